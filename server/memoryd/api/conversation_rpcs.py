"""The RPCs of memoryd.v2.ConversationService: AppendMessages, CommitTurn, IngestMessages,
StreamTranscript, ListMessages, GetMessage, SearchHistory, GetConversation, ListConversations,
ClearConversation, PurgeConversation, PurgeMessages."""

from __future__ import annotations

from collections.abc import AsyncIterator

from memoryd.api import convert
from memoryd.api.context import Context
from memoryd.api.convert import conversation_out, timestamp_out
from memoryd.api.enum_tables import SEARCH_MODE
from memoryd.api.history_convert import (
    fill_append_results,
    fill_hit,
    fill_message,
    ingest_batches,
    ingest_out,
    search_scope_in,
    sent_messages_in,
)
from memoryd.api.review_convert import turn_usage_in
from memoryd.api.transcript_convert import ack_out, transcript_events
from memoryd.domain.answers import fitting, hit_bytes
from memoryd.domain.conversation import owner_key
from memoryd.domain.history import EndedSession
from memoryd.services.use_cases import Services
from memoryd_client.v2 import conversation_service_pb2 as conversation_pb
from memoryd_client.v2 import conversation_service_pb2_grpc as conversation_grpc


class ConversationServicer(conversation_grpc.ConversationServiceServicer):
    """memoryd.v2.ConversationService."""

    def __init__(self, services: Services) -> None:
        self._erasure = services.erasure
        self._history = services.history
        self._ingest = services.ingest
        self._overview = services.overview
        self._search = services.search
        self._sessions = services.sessions
        self._transcripts = services.transcripts
        self._turns = services.turns

    async def AppendMessages(
        self, request: conversation_pb.AppendMessagesRequest, context: Context
    ) -> conversation_pb.AppendMessagesResponse:
        key = convert.required_conversation(request)
        result = await self._history.append(key, sent_messages_in(request.messages))
        response = conversation_pb.AppendMessagesResponse(history_version=result.history_version)
        response.echo_truncated = fill_append_results(
            response.results, result, echo=request.echo_messages
        )
        return response

    async def CommitTurn(
        self, request: conversation_pb.CommitTurnRequest, context: Context
    ) -> conversation_pb.CommitTurnResponse:
        key = convert.required_conversation(request)
        speaker = convert.trust_in(request.trust)
        messages = sent_messages_in(request.messages)
        result = await self._turns.commit(
            key, messages, turn_usage_in(request.usage), speaker=speaker
        )
        response = conversation_pb.CommitTurnResponse(
            history_version=result.append.history_version,
            review_pending=result.review_pending,
        )
        response.echo_truncated = fill_append_results(
            response.results, result.append, echo=request.echo_messages
        )
        return response

    async def IngestMessages(
        self,
        request_iterator: AsyncIterator[conversation_pb.IngestMessagesRequest],
        context: Context,
    ) -> conversation_pb.IngestMessagesResponse:
        report = await self._ingest.ingest(ingest_batches(request_iterator))
        return ingest_out(report)

    async def StreamTranscript(
        self,
        request_iterator: AsyncIterator[conversation_pb.StreamTranscriptRequest],
        context: Context,
    ) -> AsyncIterator[conversation_pb.StreamTranscriptResponse]:
        async for ack in self._transcripts.run(transcript_events(request_iterator)):
            yield ack_out(ack)

    async def ListMessages(
        self, request: conversation_pb.ListMessagesRequest, context: Context
    ) -> conversation_pb.ListMessagesResponse:
        key = convert.required_conversation(request)
        page = await self._history.list_messages(
            key,
            requested_page_size=request.page_size,
            page_token=request.page_token,
            kinds=list(request.kinds),
            all_history=request.all_history,
        )
        response = conversation_pb.ListMessagesResponse(next_page_token=page.next_page_token)
        for message in page.messages:
            fill_message(response.messages.add(), message)
        return response

    async def GetMessage(
        self, request: conversation_pb.GetMessageRequest, context: Context
    ) -> conversation_pb.GetMessageResponse:
        owner = owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
        message_id = convert.positive_id(request.id, "id", "a message id")
        response = conversation_pb.GetMessageResponse()
        fill_message(response.message, await self._overview.message(owner, message_id))
        return response

    async def SearchHistory(
        self, request: conversation_pb.SearchHistoryRequest, context: Context
    ) -> conversation_pb.SearchHistoryResponse:
        scope = search_scope_in(request)
        found = await self._search.search(
            scope,
            request.query,
            kinds=list(request.kinds),
            requested_limit=request.limit,
            trust=convert.trust_in(request.trust),
            mode=SEARCH_MODE.value(request.mode, "mode"),
        )
        fit = fitting(found.hits, hit_bytes)
        response = conversation_pb.SearchHistoryResponse(
            truncated=fit < len(found.hits),
            below_floor=found.below_floor,
            unembedded=found.unembedded,
        )
        for hit in found.hits[:fit]:
            fill_hit(response.hits.add(), hit)
        return response

    async def GetConversation(
        self, request: conversation_pb.GetConversationRequest, context: Context
    ) -> conversation_pb.GetConversationResponse:
        key = convert.required_conversation(request)
        stats = await self._history.state(key)
        return conversation_pb.GetConversationResponse(
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

    async def ListConversations(
        self, request: conversation_pb.ListConversationsRequest, context: Context
    ) -> conversation_pb.ListConversationsResponse:
        owner = owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
        page = await self._overview.conversations(owner, request.page_size, request.page_token)
        return conversation_pb.ListConversationsResponse(
            conversations=[
                conversation_pb.ConversationSummary(
                    conversation=conversation_out(row.key),
                    created_at=timestamp_out(row.created_at),
                    window_start_id=row.window_start_id,
                )
                for row in page.conversations
            ],
            next_page_token=page.next_page_token,
        )

    async def ClearConversation(
        self, request: conversation_pb.ClearConversationRequest, context: Context
    ) -> conversation_pb.ClearConversationResponse:
        key = convert.required_conversation(request)
        cleared = await self._sessions.new_session(key, convert.trust_in(request.trust))
        return conversation_pb.ClearConversationResponse(
            notice=cleared.notice,
            window_start_id=cleared.window.window_start_id,
            history_version=cleared.window.history_version,
        )

    async def PurgeConversation(
        self, request: conversation_pb.PurgeConversationRequest, context: Context
    ) -> conversation_pb.PurgeConversationResponse:
        key = convert.required_conversation(request)
        purged = await self._erasure.purge_conversation(key, convert.trust_in(request.trust))
        return conversation_pb.PurgeConversationResponse(
            messages_deleted=purged.messages_deleted,
            conversation_deleted=purged.conversation_deleted,
            memories_deleted=purged.memories_deleted,
            wal_truncated=purged.wal_truncated,
            statistics_rebuilt=purged.statistics_rebuilt,
            residual_files=purged.residual_files,
        )

    async def PurgeMessages(
        self, request: conversation_pb.PurgeMessagesRequest, context: Context
    ) -> conversation_pb.PurgeMessagesResponse:
        key = convert.required_conversation(request)
        purged = await self._erasure.purge_messages(
            key, list(request.message_ids), convert.trust_in(request.trust)
        )
        return conversation_pb.PurgeMessagesResponse(
            purged_message_ids=purged.message_ids,
            history_version=purged.history_version,
            wal_truncated=purged.wal_truncated,
            statistics_rebuilt=purged.statistics_rebuilt,
            residual_files=purged.residual_files,
        )


def _ended_session_out(ended: EndedSession | None) -> conversation_pb.EndedSession | None:
    if ended is None:
        return None
    return conversation_pb.EndedSession(
        started_after_id=ended.started_after_id,
        last_message_id=ended.last_message_id,
        working_memory=ended.working_memory,
        description=ended.description,
        ended_at=convert.timestamp_out(ended.ended_at),
    )
