"""memoryd.v1.MemoryService: validate and translate requests, call the use cases, translate back.

The service's RPCs are grouped by use case: conversation history here, long-term memory in
memoryd.api.memory_rpcs, resource versioning in memoryd.api.resource_rpcs. Errors are raised,
never turned into statuses here: memoryd.api.status does that for every RPC.
"""

from __future__ import annotations

from typing import Any

import grpc

from memoryd.api import convert
from memoryd.api.job_rpcs import JobRpcs
from memoryd.api.memory_convert import trust_in
from memoryd.api.memory_rpcs import MemoryRpcs
from memoryd.api.resource_rpcs import ResourceRpcs
from memoryd.api.review_rpcs import ReviewRpcs
from memoryd.domain.answers import fitting, hit_bytes
from memoryd.services.erasure import ErasureService
from memoryd.services.history import HistoryService
from memoryd.services.jobs import JobService
from memoryd.services.memory import MemoryService
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.recall import RecallService
from memoryd.services.resources import ResourceService
from memoryd.services.review import Reviewer
from memoryd.services.review_scheduler import ReviewScheduler
from memoryd.services.turns import TurnService
from memoryd_client.v1 import memory_service_pb2 as service_pb
from memoryd_client.v1 import memory_service_pb2_grpc as service_grpc

Context = grpc.aio.ServicerContext[Any, Any]


class MemoryServicer(
    MemoryRpcs, ResourceRpcs, ReviewRpcs, JobRpcs, service_grpc.MemoryServiceServicer
):
    """The MemoryService RPCs."""

    def __init__(
        self,
        *,
        history: HistoryService,
        memory: MemoryService,
        recall: RecallService,
        prompts: PromptFiles,
        resources: ResourceService,
        erasure: ErasureService,
        jobs: JobService,
        turns: TurnService,
        scheduler: ReviewScheduler,
        reviewer: Reviewer,
    ) -> None:
        MemoryRpcs.__init__(self, memory, recall, prompts)
        ResourceRpcs.__init__(self, resources)
        ReviewRpcs.__init__(self, turns, scheduler, reviewer)
        JobRpcs.__init__(self, jobs)
        self._history = history
        self._erasure = erasure

    async def AppendMessages(
        self, request: service_pb.AppendMessagesRequest, context: Context
    ) -> service_pb.AppendMessagesResponse:
        key = convert.required_conversation(request)
        messages = [
            convert.new_message_in(message, f"messages[{index}]")
            for index, message in enumerate(request.messages)
        ]
        result = await self._history.append(key, messages)
        response = service_pb.AppendMessagesResponse(history_version=result.history_version)
        response.echo_truncated = convert.fill_append_results(
            response.results, result, echo=request.echo_messages
        )
        return response

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
            convert.fill_message(response.messages.add(), message)
        return response

    async def SearchHistory(
        self, request: service_pb.SearchHistoryRequest, context: Context
    ) -> service_pb.SearchHistoryResponse:
        scope = convert.search_scope_in(request)
        hits = await self._history.search(
            scope, request.query, kinds=list(request.kinds), requested_limit=request.limit
        )
        fit = fitting(hits, hit_bytes)
        response = service_pb.SearchHistoryResponse(truncated=fit < len(hits))
        for hit in hits[:fit]:
            convert.fill_hit(response.hits.add(), hit)
        return response

    async def ClearConversation(
        self, request: service_pb.ClearConversationRequest, context: Context
    ) -> service_pb.ClearConversationResponse:
        key = convert.required_conversation(request)
        cleared = await self._history.clear(key, trust_in(request.trust))
        return service_pb.ClearConversationResponse(
            notice=cleared.notice,
            window_start_id=cleared.window.window_start_id,
            history_version=cleared.window.history_version,
        )

    async def PurgeConversation(
        self, request: service_pb.PurgeConversationRequest, context: Context
    ) -> service_pb.PurgeConversationResponse:
        key = convert.required_conversation(request)
        purged = await self._erasure.purge_conversation(key, trust_in(request.trust))
        return service_pb.PurgeConversationResponse(
            messages_deleted=purged.messages_deleted,
            conversation_deleted=purged.conversation_deleted,
            memories_deleted=purged.memories_deleted,
        )

    async def GetConversation(
        self, request: service_pb.GetConversationRequest, context: Context
    ) -> service_pb.GetConversationResponse:
        key = convert.required_conversation(request)
        stats = await self._history.describe(key)
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
        )
