"""The long-term memory RPCs of memoryd.v1.MemoryService: translate, call, translate back."""

from __future__ import annotations

from memoryd.api import convert
from memoryd.api import memory_convert as mc
from memoryd.api.context import Context
from memoryd.api.enum_tables import (
    ARCHIVED_FILTER,
    MATCH_KIND,
    RECALL_SCOPE,
    RECALL_SOURCE,
    SEARCH_MODE,
    SOURCE_STATE,
    SOURCE_TYPE,
)
from memoryd.api.history_convert import fill_hit, fill_scores
from memoryd.domain.answers import fitting, hit_bytes, memory_bytes
from memoryd.domain.conversation import check_identifier, owner_key
from memoryd.domain.jobs import JobStatus
from memoryd.domain.memories import Caller, StoreRequest, check_metadata, check_reason, preview
from memoryd.domain.memory_queries import ListFilter
from memoryd.domain.memory_sources import SourceType
from memoryd.domain.prompt_files import MEMORY_MD, USER_MD, PromptFile, context_block
from memoryd.domain.recall import RecallScope
from memoryd.errors import InvalidArgument, Reason
from memoryd.services.long_term_memory import LongTermMemory, list_visibility
from memoryd.services.prompt_files import FileState, PromptFiles
from memoryd.services.recall import RecallHit, RecallRequest, RecallService
from memoryd_client.v1 import memory_service_pb2 as service_pb

RESTORED = "restored memory {id}"


class MemoryRpcs:
    """StoreMemory, GetMemory, ListMemories, Update/Archive/Restore/DeleteMemory, Recall,
    ListMemorySources, GetPromptContext."""

    def __init__(self, memory: LongTermMemory, recall: RecallService, prompts: PromptFiles) -> None:
        self._memory = memory
        self._recall = recall
        self._prompts = prompts

    async def StoreMemory(
        self, request: service_pb.StoreMemoryRequest, context: Context
    ) -> service_pb.StoreMemoryResponse:
        caller = mc.caller_in(request, request.job_id)
        if request.id < 0:
            raise InvalidArgument(
                f"id must be positive, got {request.id}", reason=Reason.OUT_OF_RANGE, field="id"
            )
        if request.source_message_id < 0:
            raise InvalidArgument(
                f"source_message_id must be positive, got {request.source_message_id}",
                reason=Reason.OUT_OF_RANGE,
                field="source_message_id",
            )
        record, created = await self._memory.store(
            StoreRequest(
                caller=caller,
                trust=convert.trust_in(request.trust),
                category=mc.category_in(request.category),
                key=request.key,
                value=request.value,
                id=request.id,
                scope_type=mc.scope_type_in(request.scope_type),
                metadata_json=request.metadata,
                confidence=request.confidence,
                session_id=_optional_text(request.session_id, "session_id"),
                run_id=_optional_text(request.run_id, "run_id"),
                source_message_id=request.source_message_id,
            )
        )
        response = service_pb.StoreMemoryResponse(created=created)
        mc.fill_memory(response.memory, record)
        return response

    async def GetMemory(
        self, request: service_pb.GetMemoryRequest, context: Context
    ) -> service_pb.GetMemoryResponse:
        caller = mc.caller_in(request, request.job_id)
        locator = mc.locator_in(caller, request.id, request.scope_type, request.key)
        record = await self._memory.get(caller, locator, convert.trust_in(request.trust))
        response = service_pb.GetMemoryResponse()
        mc.fill_memory(response.memory, record)
        return response

    async def ListMemories(
        self, request: service_pb.ListMemoriesRequest, context: Context
    ) -> service_pb.ListMemoriesResponse:
        caller = mc.caller_in(request, request.job_id)
        archived = ARCHIVED_FILTER.value(request.archived, "archived")
        categories = tuple(
            mc.required_category(number, f"categories[{index}]")
            for index, number in enumerate(request.categories)
        )
        page = await self._memory.list_memories(
            list_visibility(
                caller,
                mc.scope_type_in(request.scope_type),
                archived=archived,
                trust=convert.trust_in(request.trust),
            ),
            ListFilter(categories, request.key_prefix),
            requested_page_size=request.page_size,
            page_token=request.page_token,
        )
        response = service_pb.ListMemoriesResponse(next_page_token=page.next_page_token)
        for record in page.records:
            item = response.memories.add()
            mc.fill_memory(item.memory, record, with_value=not request.preview)
            if request.preview:
                item.preview = preview(record.value)
        return response

    async def UpdateMemory(
        self, request: service_pb.UpdateMemoryRequest, context: Context
    ) -> service_pb.UpdateMemoryResponse:
        caller = mc.caller_in(request, request.job_id)
        locator = mc.locator_in(caller, request.id, request.scope_type, request.key)
        record = await self._memory.update(
            caller.owner,
            locator,
            value=request.value,
            metadata_json=check_metadata(request.metadata),
            trust=convert.trust_in(request.trust),
        )
        response = service_pb.UpdateMemoryResponse()
        mc.fill_memory(response.memory, record)
        return response

    async def ArchiveMemory(
        self, request: service_pb.ArchiveMemoryRequest, context: Context
    ) -> service_pb.ArchiveMemoryResponse:
        caller = mc.caller_in(request)
        archived_by = _optional_text(request.archived_by, "archived_by") or "operator"
        record = await self._memory.archive(
            caller.owner,
            mc.required_id(request.id),
            reason=check_reason(request.reason),
            archived_by=archived_by,
            trust=convert.trust_in(request.trust),
        )
        response = service_pb.ArchiveMemoryResponse()
        mc.fill_memory(response.memory, record)
        return response

    async def RestoreMemory(
        self, request: service_pb.RestoreMemoryRequest, context: Context
    ) -> service_pb.RestoreMemoryResponse:
        caller = mc.caller_in(request)
        record = await self._memory.restore(
            caller.owner, mc.required_id(request.id), trust=convert.trust_in(request.trust)
        )
        response = service_pb.RestoreMemoryResponse(notice=RESTORED.format(id=record.id))
        mc.fill_memory(response.memory, record)
        return response

    async def DeleteMemory(
        self, request: service_pb.DeleteMemoryRequest, context: Context
    ) -> service_pb.DeleteMemoryResponse:
        caller = mc.caller_in(request, request.job_id)
        locator = mc.locator_in(caller, request.id, request.scope_type, request.key)
        deleted = await self._memory.delete(
            caller.owner, locator, trust=convert.trust_in(request.trust)
        )
        return service_pb.DeleteMemoryResponse(deleted=bool(deleted), id=deleted)

    async def Recall(
        self, request: service_pb.RecallRequest, context: Context
    ) -> service_pb.RecallResponse:
        caller, scope = _recall_caller(request)
        source = RECALL_SOURCE.value(request.source, "source")
        recalled = await self._recall.recall(
            RecallRequest(
                caller=caller,
                query=request.query,
                key=request.key,
                scope=scope,
                source=source,
                limit=request.limit,
                trust=convert.trust_in(request.trust),
                mode=SEARCH_MODE.value(request.mode, "mode"),
            )
        )
        hits = recalled.hits
        fit = fitting(hits, _recall_hit_bytes)
        response = service_pb.RecallResponse(
            truncated=fit < len(hits),
            below_floor=recalled.below_floor,
            unembedded=recalled.unembedded,
        )
        for hit in hits[:fit]:
            item = response.hits.add()
            if hit.memory is not None:
                item.source = service_pb.RECALL_SOURCE_MEMORIES
                mc.fill_memory(item.memory, hit.memory.record)
                item.rank = hit.memory.rank
                if request.query.strip():
                    item.match = MATCH_KIND.number(hit.memory.matches[0])
                    item.matches.extend(MATCH_KIND.number(kind) for kind in hit.memory.matches)
                    fill_scores(item.scores, hit.memory.scores)
            elif hit.message is not None:
                item.source = service_pb.RECALL_SOURCE_HISTORY
                fill_hit(item.message, hit.message)
                item.rank = hit.message.rank
                item.match = item.message.match
                item.matches.extend(item.message.matches)
                item.scores.CopyFrom(item.message.scores)
        return response

    async def ListMemorySources(
        self, request: service_pb.ListMemorySourcesRequest, context: Context
    ) -> service_pb.ListMemorySourcesResponse:
        owner = owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
        status = mc.filter_value(
            JobStatus,
            request.status,
            "status",
            SOURCE_STATE.optional(request.state, "state"),
            "state",
        )
        source_type = mc.filter_value(
            SourceType,
            request.source_type,
            "source_type",
            SOURCE_TYPE.optional(request.type, "type"),
            "type",
        )
        page = await self._memory.sources(
            owner,
            status=status,
            source_type=source_type,
            requested_page_size=request.page_size,
            page_token=request.page_token,
        )
        response = service_pb.ListMemorySourcesResponse(next_page_token=page.next_page_token)
        for source in page.sources:
            mc.fill_source(response.sources.add(), source)
        return response

    async def GetPromptContext(
        self, request: service_pb.GetPromptContextRequest, context: Context
    ) -> service_pb.GetPromptContextResponse:
        owner = owner_key(agent_id=request.agent_id, owner_id=request.owner_id, field="request")
        state = await self._prompts.context_for(owner, convert.trust_in(request.trust))
        response = service_pb.GetPromptContextResponse()
        if state is None:
            response.withheld = True
            _fill_usage(response.user_usage, USER_MD, None)
            _fill_usage(response.memory_usage, MEMORY_MD, None)
            return response
        response.user_md = state.user_md.text
        response.memory_md = state.memory_md.text
        response.context_block = context_block(state.user_md.text, state.memory_md.text)
        _fill_usage(response.user_usage, USER_MD, state.user_md)
        _fill_usage(response.memory_usage, MEMORY_MD, state.memory_md)
        return response


def _recall_hit_bytes(hit: RecallHit) -> int:
    if hit.memory is not None:
        return memory_bytes(hit.memory.record)
    return hit_bytes(hit.message) if hit.message is not None else 0


def _fill_usage(
    target: service_pb.PromptFileUsage, file: PromptFile, state: FileState | None
) -> None:
    target.max_chars = file.max_chars
    target.max_tokens = file.max_tokens
    if state is not None:
        target.used_chars = len(state.text)
        target.used_tokens = state.tokens
        target.revision = state.revision


def _optional_text(value: str, field: str) -> str:
    return check_identifier(value, field)


def _recall_caller(request: service_pb.RecallRequest) -> tuple[Caller, RecallScope]:
    """A recall's caller and scope: a conversation's (scope unset: the conversation), or an
    owner's (scope unset: everything of the owner; the conversation's own scope has none)."""
    if not request.HasField("owner"):
        convert.required_conversation(request)
        return (
            mc.conversation_caller(request.conversation, request.job_id),
            RECALL_SCOPE.value(request.scope, "scope"),
        )
    if request.HasField("conversation"):
        raise InvalidArgument("set conversation or owner, not both", field="owner")
    if request.scope == service_pb.RECALL_SCOPE_CURRENT:
        raise InvalidArgument(
            "RECALL_SCOPE_CURRENT recalls within a conversation: set conversation, or another "
            "scope",
            field="scope",
        )
    scope = (
        RecallScope.ALL
        if request.scope == service_pb.RECALL_SCOPE_UNSPECIFIED
        else RECALL_SCOPE.value(request.scope, "scope")
    )
    return mc.owner_caller(request.owner, request.job_id), scope
