"""The RPCs of memoryd.v2.MemoryService: StoreMemory, GetMemory, ListMemories, UpdateMemory,
ArchiveMemory, RestoreMemory, DeleteMemory, Recall, ListMemorySources, SetJobStatus,
FinishJobRun: translate, call, translate back."""

from __future__ import annotations

from memoryd.api import convert
from memoryd.api import memory_convert as mc
from memoryd.api.context import Context
from memoryd.api.enum_tables import (
    ARCHIVED_FILTER,
    JOB_RUN_OUTCOME,
    JOB_STATUS,
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
from memoryd.domain.jobs import JobStatus, RunOutcome
from memoryd.domain.memories import (
    Caller,
    StoreRequest,
    check_job_id,
    check_metadata,
    check_reason,
    preview,
)
from memoryd.domain.memory_queries import ListFilter
from memoryd.domain.memory_sources import SourceType
from memoryd.domain.recall import RecallScope
from memoryd.errors import InvalidArgument, Reason
from memoryd.services.long_term_memory import list_visibility
from memoryd.services.recall import RecallHit, RecallRequest
from memoryd.services.use_cases import Services
from memoryd_client.v2 import memory_service_pb2 as memory_pb
from memoryd_client.v2 import memory_service_pb2_grpc as memory_grpc

RESTORED = "restored memory {id}"


class MemoryServicer(memory_grpc.MemoryServiceServicer):
    """memoryd.v2.MemoryService."""

    def __init__(self, services: Services) -> None:
        self._jobs = services.jobs
        self._memory = services.memory
        self._recall = services.recall

    async def StoreMemory(
        self, request: memory_pb.StoreMemoryRequest, context: Context
    ) -> memory_pb.StoreMemoryResponse:
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
        response = memory_pb.StoreMemoryResponse(created=created)
        mc.fill_memory(response.memory, record)
        return response

    async def GetMemory(
        self, request: memory_pb.GetMemoryRequest, context: Context
    ) -> memory_pb.GetMemoryResponse:
        caller = mc.caller_in(request, request.job_id)
        locator = mc.locator_in(caller, request.id, request.scope_type, request.key)
        record = await self._memory.get(caller, locator, convert.trust_in(request.trust))
        response = memory_pb.GetMemoryResponse()
        mc.fill_memory(response.memory, record)
        return response

    async def ListMemories(
        self, request: memory_pb.ListMemoriesRequest, context: Context
    ) -> memory_pb.ListMemoriesResponse:
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
        response = memory_pb.ListMemoriesResponse(next_page_token=page.next_page_token)
        for record in page.records:
            item = response.memories.add()
            mc.fill_memory(item.memory, record, with_value=not request.preview)
            if request.preview:
                item.preview = preview(record.value)
        return response

    async def UpdateMemory(
        self, request: memory_pb.UpdateMemoryRequest, context: Context
    ) -> memory_pb.UpdateMemoryResponse:
        caller = mc.caller_in(request, request.job_id)
        locator = mc.locator_in(caller, request.id, request.scope_type, request.key)
        record = await self._memory.update(
            caller.owner,
            locator,
            value=request.value,
            metadata_json=check_metadata(request.metadata),
            trust=convert.trust_in(request.trust),
        )
        response = memory_pb.UpdateMemoryResponse()
        mc.fill_memory(response.memory, record)
        return response

    async def ArchiveMemory(
        self, request: memory_pb.ArchiveMemoryRequest, context: Context
    ) -> memory_pb.ArchiveMemoryResponse:
        caller = mc.caller_in(request)
        archived_by = _optional_text(request.archived_by, "archived_by") or "operator"
        record = await self._memory.archive(
            caller.owner,
            mc.required_id(request.id),
            reason=check_reason(request.reason),
            archived_by=archived_by,
            trust=convert.trust_in(request.trust),
        )
        response = memory_pb.ArchiveMemoryResponse()
        mc.fill_memory(response.memory, record)
        return response

    async def RestoreMemory(
        self, request: memory_pb.RestoreMemoryRequest, context: Context
    ) -> memory_pb.RestoreMemoryResponse:
        caller = mc.caller_in(request)
        record = await self._memory.restore(
            caller.owner, mc.required_id(request.id), trust=convert.trust_in(request.trust)
        )
        response = memory_pb.RestoreMemoryResponse(notice=RESTORED.format(id=record.id))
        mc.fill_memory(response.memory, record)
        return response

    async def DeleteMemory(
        self, request: memory_pb.DeleteMemoryRequest, context: Context
    ) -> memory_pb.DeleteMemoryResponse:
        caller = mc.caller_in(request, request.job_id)
        locator = mc.locator_in(caller, request.id, request.scope_type, request.key)
        deleted = await self._memory.delete(
            caller.owner, locator, trust=convert.trust_in(request.trust)
        )
        return memory_pb.DeleteMemoryResponse(deleted=bool(deleted), id=deleted)

    async def Recall(
        self, request: memory_pb.RecallRequest, context: Context
    ) -> memory_pb.RecallResponse:
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
        response = memory_pb.RecallResponse(
            truncated=fit < len(hits),
            below_floor=recalled.below_floor,
            unembedded=recalled.unembedded,
        )
        for hit in hits[:fit]:
            item = response.hits.add()
            if hit.memory is not None:
                item.source = memory_pb.RECALL_SOURCE_MEMORIES
                mc.fill_memory(item.memory, hit.memory.record)
                item.rank = hit.memory.rank
                if request.query.strip():
                    item.match = MATCH_KIND.number(hit.memory.matches[0])
                    item.matches.extend(MATCH_KIND.number(kind) for kind in hit.memory.matches)
                    fill_scores(item.scores, hit.memory.scores)
            elif hit.message is not None:
                item.source = memory_pb.RECALL_SOURCE_HISTORY
                fill_hit(item.message, hit.message)
                item.rank = hit.message.rank
                item.match = item.message.match
                item.matches.extend(item.message.matches)
                item.scores.CopyFrom(item.message.scores)
        return response

    async def ListMemorySources(
        self, request: memory_pb.ListMemorySourcesRequest, context: Context
    ) -> memory_pb.ListMemorySourcesResponse:
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
        response = memory_pb.ListMemorySourcesResponse(next_page_token=page.next_page_token)
        for source in page.sources:
            mc.fill_source(response.sources.add(), source)
        return response

    async def SetJobStatus(
        self, request: memory_pb.SetJobStatusRequest, context: Context
    ) -> memory_pb.SetJobStatusResponse:
        owner = owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
        job_id = _required_job_id(request.job_id)
        status = JOB_STATUS.value(request.status, "status")
        source = await self._jobs.set_status(owner, job_id, status)
        response = memory_pb.SetJobStatusResponse()
        mc.fill_source(response.source, source)
        return response

    async def FinishJobRun(
        self, request: memory_pb.FinishJobRunRequest, context: Context
    ) -> memory_pb.FinishJobRunResponse:
        owner = owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
        job_id = _required_job_id(request.job_id)
        run_id = check_identifier(request.run_id, "run_id")
        if not run_id:
            raise InvalidArgument("run_id is required", reason=Reason.REQUIRED, field="run_id")
        outcome = JOB_RUN_OUTCOME.value(request.outcome, "outcome")
        finished = await self._jobs.finish_run(
            Caller(owner, None, job_id), run_id, outcome, request.summary
        )
        run = finished.run
        response = memory_pb.FinishJobRunResponse(
            status=run.status,
            outcome=JOB_RUN_OUTCOME.number(RunOutcome(run.status)),
            started_at=convert.timestamp_out(run.started_at),
        )
        if run.finished_at is not None:
            convert.set_timestamp(response.finished_at, run.finished_at)
        if finished.summary is not None:
            mc.fill_memory(response.summary, finished.summary)
        return response


def _required_job_id(value: str) -> str:
    job_id = check_job_id(value)
    if job_id is None:
        raise InvalidArgument("job_id is required", reason=Reason.REQUIRED, field="job_id")
    return job_id


def _recall_hit_bytes(hit: RecallHit) -> int:
    if hit.memory is not None:
        return memory_bytes(hit.memory.record)
    return hit_bytes(hit.message) if hit.message is not None else 0


def _optional_text(value: str, field: str) -> str:
    return check_identifier(value, field)


def _recall_caller(request: memory_pb.RecallRequest) -> tuple[Caller, RecallScope]:
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
    if request.scope == memory_pb.RECALL_SCOPE_CURRENT:
        raise InvalidArgument(
            "RECALL_SCOPE_CURRENT recalls within a conversation: set conversation, or another "
            "scope",
            field="scope",
        )
    scope = (
        RecallScope.ALL
        if request.scope == memory_pb.RECALL_SCOPE_UNSPECIFIED
        else RECALL_SCOPE.value(request.scope, "scope")
    )
    return mc.owner_caller(request.owner, request.job_id), scope
