"""The conversation-history RPCs of memoryd.v1.MemoryService: AppendMessages, IngestMessages,
ListMessages, SearchHistory, ClearConversation, PurgeConversation, PurgeOwner, GetConversation."""

from __future__ import annotations

from collections.abc import AsyncIterator

from memoryd.api import convert
from memoryd.api.context import Context
from memoryd.api.history_convert import (
    fill_append_results,
    fill_message,
    ingest_batches,
    ingest_out,
    sent_messages_in,
)
from memoryd.domain.conversation import check_identifier, owner_key
from memoryd.domain.history import EndedSession
from memoryd.services.erasure import ErasureService
from memoryd.services.history import HistoryService
from memoryd.services.ingest import IngestService
from memoryd.services.sessions import Sessions
from memoryd_client.v1 import memory_service_pb2 as service_pb


class HistoryRpcs:
    """AppendMessages, IngestMessages, ListMessages, ClearConversation, PurgeConversation,
    PurgeOwner, GetConversation."""

    def __init__(
        self,
        history: HistoryService,
        erasure: ErasureService,
        ingest: IngestService,
        sessions: Sessions,
    ) -> None:
        self._history = history
        self._erasure = erasure
        self._sessions = sessions
        self._ingest = ingest

    async def AppendMessages(
        self, request: service_pb.AppendMessagesRequest, context: Context
    ) -> service_pb.AppendMessagesResponse:
        key = convert.required_conversation(request)
        result = await self._history.append(key, sent_messages_in(request.messages))
        response = service_pb.AppendMessagesResponse(history_version=result.history_version)
        response.echo_truncated = fill_append_results(
            response.results, result, echo=request.echo_messages
        )
        return response

    async def IngestMessages(
        self, request_iterator: AsyncIterator[service_pb.IngestMessagesRequest], context: Context
    ) -> service_pb.IngestMessagesResponse:
        report = await self._ingest.ingest(ingest_batches(request_iterator))
        return ingest_out(report)

    async def ListMessages(
        self, request: service_pb.ListMessagesRequest, context: Context
    ) -> service_pb.ListMessagesResponse:
        key = convert.required_conversation(request)
        page = await self._history.list_messages(
            key,
            requested_page_size=request.page_size,
            page_token=request.page_token,
            kinds=list(request.kinds),
            all_history=request.all_history,
        )
        response = service_pb.ListMessagesResponse(next_page_token=page.next_page_token)
        for message in page.messages:
            fill_message(response.messages.add(), message)
        return response

    async def ClearConversation(
        self, request: service_pb.ClearConversationRequest, context: Context
    ) -> service_pb.ClearConversationResponse:
        key = convert.required_conversation(request)
        cleared = await self._sessions.new_session(key, convert.trust_in(request.trust))
        return service_pb.ClearConversationResponse(
            notice=cleared.notice,
            window_start_id=cleared.window.window_start_id,
            history_version=cleared.window.history_version,
        )

    async def PurgeConversation(
        self, request: service_pb.PurgeConversationRequest, context: Context
    ) -> service_pb.PurgeConversationResponse:
        key = convert.required_conversation(request)
        purged = await self._erasure.purge_conversation(key, convert.trust_in(request.trust))
        return service_pb.PurgeConversationResponse(
            messages_deleted=purged.messages_deleted,
            conversation_deleted=purged.conversation_deleted,
            memories_deleted=purged.memories_deleted,
            wal_truncated=purged.wal_truncated,
            statistics_rebuilt=purged.statistics_rebuilt,
            residual_files=purged.residual_files,
        )

    async def PurgeOwner(
        self, request: service_pb.PurgeOwnerRequest, context: Context
    ) -> service_pb.PurgeOwnerResponse:
        check_identifier(request.owner_id, "owner_id", required=True)
        owner = owner_key(agent_id=request.agent_id, owner_id=request.owner_id, field="request")
        receipt = await self._erasure.purge_owner(owner)
        return service_pb.PurgeOwnerResponse(
            erased=[
                service_pb.ErasedRows(table=table, rows=rows)
                for table, rows in sorted(receipt.counts.items())
            ],
            prompt_files_removed=receipt.files_removed,
            wal_truncated=receipt.wal_truncated,
            statistics_rebuilt=receipt.statistics_rebuilt,
            residual_files=receipt.residual_files,
        )

    async def GetConversation(
        self, request: service_pb.GetConversationRequest, context: Context
    ) -> service_pb.GetConversationResponse:
        key = convert.required_conversation(request)
        stats = await self._history.state(key)
        return service_pb.GetConversationResponse(
            conversation=convert.conversation_out(key),
            message_count=stats.message_count,
            window_message_count=stats.window_message_count,
            first_message_at=convert.optional_timestamp_out(stats.first_message_at),
            last_message_at=convert.optional_timestamp_out(stats.last_message_at),
            window_start_id=stats.window.window_start_id,
            window_started_at=convert.optional_timestamp_out(stats.window.window_started_at),
            history_version=stats.window.history_version,
            last_message_id=stats.last_message_id,
            working_memory=stats.working_memory,
            description=stats.description,
            completed_turns=stats.completed_turns,
            peak_prompt_tokens=stats.peak_prompt_tokens,
            context_window=stats.context_window,
            previous_session=_ended_session_out(stats.previous_session),
        )


def _ended_session_out(ended: EndedSession | None) -> service_pb.EndedSession | None:
    if ended is None:
        return None
    return service_pb.EndedSession(
        started_after_id=ended.started_after_id,
        last_message_id=ended.last_message_id,
        working_memory=ended.working_memory,
        description=ended.description,
        ended_at=convert.timestamp_out(ended.ended_at),
    )
