"""Translation of long-term memory and resource messages; nothing here decides policy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from memoryd.api.convert import TRUST_NUMBERS, TRUSTS, conversation_in, timestamp_out
from memoryd.domain.conversation import DEFAULT_OWNER_ID, OwnerKey, check_identifier, owner_key
from memoryd.domain.memories import (
    Caller,
    Category,
    MemoryRecord,
    PromptTarget,
    ScopeType,
    check_job_id,
    check_key,
)
from memoryd.domain.memory_queries import Locator, SourceRow
from memoryd.domain.messages import Trust
from memoryd.domain.recall import RecallScope, RecallSource
from memoryd.domain.resources import ResourceInfo, ResourceKey, ResourceType, Revision
from memoryd.domain.timestamps import from_text
from memoryd.errors import InvalidArgument
from memoryd_client.v1 import memory_service_pb2 as service_pb
from memoryd_client.v1 import resources_pb2 as pb

CATEGORIES = {
    pb.CATEGORY_IDENTITY: Category.IDENTITY,
    pb.CATEGORY_PREFERENCE: Category.PREFERENCE,
    pb.CATEGORY_INTEREST: Category.INTEREST,
    pb.CATEGORY_GOAL: Category.GOAL,
    pb.CATEGORY_CONTEXT: Category.CONTEXT,
    pb.CATEGORY_DIRECTIVE: Category.DIRECTIVE,
    pb.CATEGORY_FACT: Category.FACT,
    pb.CATEGORY_JOB_RUN_SUMMARY: Category.JOB_RUN_SUMMARY,
}
CATEGORY_NUMBERS = {category: number for number, category in CATEGORIES.items()}
SCOPE_TYPES = {
    pb.SCOPE_TYPE_OWNER: ScopeType.OWNER,
    pb.SCOPE_TYPE_AGENT: ScopeType.AGENT,
    pb.SCOPE_TYPE_CONVERSATION: ScopeType.CONVERSATION,
    pb.SCOPE_TYPE_JOB: ScopeType.JOB,
}
SCOPE_TYPE_NUMBERS = {scope: number for number, scope in SCOPE_TYPES.items()}
TARGET_NUMBERS = {
    PromptTarget.NONE: pb.PROMPT_TARGET_NONE,
    PromptTarget.USER_MD: pb.PROMPT_TARGET_USER_MD,
    PromptTarget.MEMORY_MD: pb.PROMPT_TARGET_MEMORY_MD,
}
RECALL_SCOPES = {
    service_pb.RECALL_SCOPE_UNSPECIFIED: RecallScope.CURRENT,
    service_pb.RECALL_SCOPE_CURRENT: RecallScope.CURRENT,
    service_pb.RECALL_SCOPE_OWNER: RecallScope.OWNER,
    service_pb.RECALL_SCOPE_ALL: RecallScope.ALL,
}
RECALL_SOURCES = {
    service_pb.RECALL_SOURCE_UNSPECIFIED: RecallSource.MEMORIES,
    service_pb.RECALL_SOURCE_MEMORIES: RecallSource.MEMORIES,
    service_pb.RECALL_SOURCE_HISTORY: RecallSource.HISTORY,
    service_pb.RECALL_SOURCE_ALL: RecallSource.ALL,
}
ARCHIVED_FILTERS: dict[int, bool | None] = {
    service_pb.ARCHIVED_FILTER_UNSPECIFIED: False,
    service_pb.ARCHIVED_FILTER_ACTIVE: False,
    service_pb.ARCHIVED_FILTER_ARCHIVED: True,
    service_pb.ARCHIVED_FILTER_ALL: None,
}
RESOURCE_TYPES = {
    pb.RESOURCE_TYPE_USER_MD: ResourceType.USER_MD,
    pb.RESOURCE_TYPE_MEMORY_MD: ResourceType.MEMORY_MD,
    pb.RESOURCE_TYPE_CHECKPOINT: ResourceType.CHECKPOINT,
}
RESOURCE_TYPE_NUMBERS = {kind: number for number, kind in RESOURCE_TYPES.items()}


CallerRequest = (
    service_pb.StoreMemoryRequest
    | service_pb.GetMemoryRequest
    | service_pb.ListMemoriesRequest
    | service_pb.UpdateMemoryRequest
    | service_pb.ArchiveMemoryRequest
    | service_pb.RestoreMemoryRequest
    | service_pb.DeleteMemoryRequest
)
E = TypeVar("E")


def caller_in(request: CallerRequest, job_id: str = "") -> Caller:
    """The caller of a memory RPC: a conversation, or an owner (default main/default)."""
    which = request.WhichOneof("caller")
    if which == "conversation":
        return conversation_caller(request.conversation, job_id)
    job = check_job_id(job_id)
    if which == "owner":
        owner = owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
    else:
        owner = owner_key(agent_id="", owner_id="")
    return Caller(owner, None, job)


def conversation_caller(conversation: pb.Conversation, job_id: str = "") -> Caller:
    """A caller in a conversation (its agent and owner own what it writes)."""
    key = conversation_in(conversation)
    return Caller(OwnerKey(key.agent_id, key.owner_id), key, check_job_id(job_id))


def enum_in(table: Mapping[Any, E], number: int, field: str) -> E:
    """An enum value from a request, refusing numbers the contract does not declare."""
    if number not in table:
        raise InvalidArgument(f"{field} has unknown value {number}")
    return table[number]


def category_in(number: int, field: str = "category") -> Category | None:
    """A category, or None when unset."""
    if number == pb.CATEGORY_UNSPECIFIED:
        return None
    if number not in CATEGORIES:
        raise InvalidArgument(
            f"{field} has unknown value {number}; use identity, preference, interest, goal, "
            "context or directive"
        )
    return enum_in(CATEGORIES, number, field)


def scope_type_in(number: int, field: str = "scope_type") -> ScopeType | None:
    """A scope type, or None when unset."""
    if number == pb.SCOPE_TYPE_UNSPECIFIED:
        return None
    return enum_in(SCOPE_TYPES, number, field)


def trust_in(number: int, field: str = "trust") -> Trust:
    """A trust; unset means operator."""
    return enum_in(TRUSTS, number, field)


def locator_in(caller: Caller, memory_id: int, scope_type_number: int, key: str) -> Locator:
    """A row named by id, or by scope type and key within the caller's scope."""
    if memory_id < 0:
        raise InvalidArgument(f"id must be positive, got {memory_id}")
    if memory_id:
        return Locator(id=memory_id)
    scope_type = scope_type_in(scope_type_number)
    if scope_type is None:
        raise InvalidArgument("either id, or scope_type and key, are required")
    return Locator(scope_type=scope_type, scope_id=caller.scope_id(scope_type), key=check_key(key))


def required_id(memory_id: int) -> int:
    """A row id that must be given."""
    if memory_id <= 0:
        raise InvalidArgument(f"id is required (a positive memory id), got {memory_id}")
    return memory_id


def fill_memory(target: pb.Memory, record: MemoryRecord, *, with_value: bool = True) -> None:
    """Write a memory row into `target`."""
    target.id = record.id
    target.agent_id = record.agent_id
    target.owner_id = record.owner_id
    target.scope_type = SCOPE_TYPE_NUMBERS[record.scope_type]
    target.scope_id = record.scope_id
    target.category = CATEGORY_NUMBERS[record.category]
    target.key = record.key
    if with_value:
        target.value = record.value
    target.confidence = record.confidence
    target.prompt_target = TARGET_NUMBERS[record.prompt_target]
    target.metadata = record.metadata_json
    target.trust = TRUST_NUMBERS[record.trust]
    source = record.provenance
    provenance = target.provenance
    provenance.source_id = source.source_id or ""
    provenance.source_type = source.source_type or ""
    provenance.source_name = source.source_name or ""
    provenance.source_description = source.source_description or ""
    provenance.session_id = source.session_id or ""
    provenance.run_id = source.run_id or ""
    provenance.source_message_id = source.source_message_id or 0
    provenance.details = source.details_json
    target.created_at.CopyFrom(timestamp_out(record.created_at))
    target.updated_at.CopyFrom(timestamp_out(record.updated_at))
    if record.archived_at is not None:
        target.archived = True
        target.archived_at.CopyFrom(timestamp_out(record.archived_at))
        target.archived_by = record.archived_by or ""
        target.archive_reason = record.archive_reason or ""


def fill_source(target: pb.MemorySource, source: SourceRow) -> None:
    """Write a memory source into `target`."""
    target.id = source.info.id
    target.source_type = source.info.source_type
    target.name = source.info.name
    target.description = source.info.description
    target.memory_scope = source.info.memory_scope
    target.status = source.status
    target.created_at.CopyFrom(timestamp_out(from_text(source.created_at)))
    target.updated_at.CopyFrom(timestamp_out(from_text(source.updated_at)))


def resource_key_in(ref: pb.ResourceRef, field: str = "ref") -> ResourceKey:
    """A resource named by a request; the scope of a prompt file defaults to "default"."""
    if ref.type == pb.RESOURCE_TYPE_UNSPECIFIED:
        raise InvalidArgument(f"{field}.type is required")
    kind = RESOURCE_TYPES.get(ref.type)
    if kind is None:
        raise InvalidArgument(f"{field}.type has unknown value {ref.type}")
    agent = owner_key(agent_id=ref.agent_id, owner_id="", field=field).agent_id
    scope = check_identifier(ref.scope_id, f"{field}.scope_id")
    if not scope:
        if kind is ResourceType.CHECKPOINT:
            raise InvalidArgument(f"{field}.scope_id is required for checkpoints")
        scope = DEFAULT_OWNER_ID
    return ResourceKey(agent, kind, scope)


def resource_ref_out(key: ResourceKey) -> pb.ResourceRef:
    """A resource key as a protobuf message."""
    return pb.ResourceRef(
        agent_id=key.agent_id, type=RESOURCE_TYPE_NUMBERS[key.resource_type], scope_id=key.scope_id
    )


def revision_out(revision: Revision, *, with_content: bool) -> pb.ResourceRevision:
    """A revision as a protobuf message."""
    return pb.ResourceRevision(
        ref=resource_ref_out(revision.key),
        revision=revision.revision,
        parent_revision=revision.parent_revision or 0,
        content_hash=revision.content_hash,
        content=revision.content if with_content else "",
        byte_size=revision.byte_size,
        mutation_source=revision.mutation_source,
        provenance=revision.provenance_json,
        created_at=timestamp_out(revision.created_at),
    )


def resource_out(info: ResourceInfo) -> pb.Resource:
    """A resource as a protobuf message."""
    return pb.Resource(
        ref=resource_ref_out(info.key),
        path=info.path,
        current_revision=info.current_revision,
        updated_at=timestamp_out(info.updated_at),
    )
