"""Translation of long-term memory messages: callers, row locators, memory rows and sources.
Nothing here decides policy."""

from __future__ import annotations

import enum
from typing import TypeVar

from memoryd.api.convert import conversation_in, timestamp_out
from memoryd.api.enum_tables import (
    CATEGORY,
    PROMPT_TARGET,
    SCOPE_TYPE,
    SOURCE_STATE,
    SOURCE_TYPE,
    TRUST,
)
from memoryd.domain.conversation import OwnerKey, owner_key
from memoryd.domain.memories import (
    Caller,
    Category,
    MemoryRecord,
    ScopeType,
    check_job_id,
    check_key,
)
from memoryd.domain.memory_queries import Locator, SourceRow
from memoryd.domain.memory_sources import SourceType
from memoryd.domain.quoting import clipped
from memoryd.domain.timestamps import from_text
from memoryd.errors import InvalidArgument, Reason
from memoryd_client.v2 import memory_service_pb2 as memory_pb
from memoryd_client.v2 import records_pb2 as records_pb

# The source types a stored provenance may name (an imported row may carry another text).
SOURCE_TYPE_NAMES = frozenset(member.value for member in SourceType)

CallerRequest = (
    memory_pb.StoreMemoryRequest
    | memory_pb.GetMemoryRequest
    | memory_pb.ListMemoriesRequest
    | memory_pb.UpdateMemoryRequest
    | memory_pb.ArchiveMemoryRequest
    | memory_pb.RestoreMemoryRequest
    | memory_pb.DeleteMemoryRequest
)


def caller_in(request: CallerRequest, job_id: str = "") -> Caller:
    """The caller of a memory RPC: a conversation, or an owner (default main/default)."""
    which = request.WhichOneof("caller")
    if which == "conversation":
        return conversation_caller(request.conversation, job_id)
    return owner_caller(request.owner if which == "owner" else None, job_id)


def owner_caller(owner: records_pb.OwnerScope | None, job_id: str = "") -> Caller:
    """A caller outside any conversation: an owner (None: main/default)."""
    scope = owner or records_pb.OwnerScope()
    key = owner_key(agent_id=scope.agent_id, owner_id=scope.owner_id)
    return Caller(key, None, check_job_id(job_id))


def conversation_caller(conversation: records_pb.Conversation, job_id: str = "") -> Caller:
    """A caller in a conversation (its agent and owner own what it writes)."""
    key = conversation_in(conversation)
    return Caller(OwnerKey(key.agent_id, key.owner_id), key, check_job_id(job_id))


def category_in(number: int, field: str = "category") -> Category | None:
    """A category, or None when unset."""
    return CATEGORY.optional(number, field)


def required_category(number: int, field: str) -> Category:
    """A category that must be set."""
    category = CATEGORY.optional(number, field)
    if category is None:
        raise InvalidArgument(f"{field} must not be CATEGORY_UNSPECIFIED", field=field)
    return category


def scope_type_in(number: int, field: str = "scope_type") -> ScopeType | None:
    """A scope type, or None when unset."""
    return SCOPE_TYPE.optional(number, field)


def locator_in(caller: Caller, memory_id: int, scope_type_number: int, key: str) -> Locator:
    """A row named by id, or by scope type and key within the caller's scope."""
    if memory_id < 0:
        raise InvalidArgument(
            f"id must be positive, got {memory_id}", reason=Reason.OUT_OF_RANGE, field="id"
        )
    if memory_id:
        return Locator(id=memory_id)
    scope_type = scope_type_in(scope_type_number)
    if scope_type is None:
        raise InvalidArgument("either id, or scope_type and key, are required")
    return Locator(scope_type=scope_type, scope_id=caller.scope_id(scope_type), key=check_key(key))


def required_id(memory_id: int) -> int:
    """A row id that must be given."""
    if memory_id <= 0:
        raise InvalidArgument(
            f"id is required (a positive memory id), got {memory_id}",
            reason=Reason.REQUIRED,
            field="id",
        )
    return memory_id


def fill_memory(
    target: records_pb.Memory, record: MemoryRecord, *, with_value: bool = True
) -> None:
    """Write a memory row into `target`."""
    target.id = record.id
    target.agent_id = record.agent_id
    target.owner_id = record.owner_id
    target.scope_type = SCOPE_TYPE.number(record.scope_type)
    target.scope_id = record.scope_id
    target.category = CATEGORY.number(record.category)
    target.key = record.key
    if with_value:
        target.value = record.value
    target.confidence = record.confidence
    target.prompt_target = PROMPT_TARGET.number(record.prompt_target)
    target.metadata = record.metadata_json
    target.trust = TRUST.number(record.trust)
    source = record.provenance
    provenance = target.provenance
    provenance.source_id = source.source_id or ""
    provenance.source_type = source.source_type or ""
    if source.source_type in SOURCE_TYPE_NAMES:
        provenance.type = SOURCE_TYPE.number(SourceType(source.source_type))
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


def fill_source(target: records_pb.MemorySource, source: SourceRow) -> None:
    """Write a memory source into `target`."""
    target.id = source.info.id
    target.source_type = source.info.source_type
    target.type = SOURCE_TYPE.number(source.info.source_type)
    target.name = source.info.name
    target.description = source.info.description
    target.memory_scope = source.info.memory_scope
    target.status = source.status
    target.state = SOURCE_STATE.number(source.status)
    target.created_at.CopyFrom(timestamp_out(from_text(source.created_at)))
    target.updated_at.CopyFrom(timestamp_out(from_text(source.updated_at)))


E = TypeVar("E", bound=enum.StrEnum)


def filter_value(
    kind: type[E], text: str, text_field: str, chosen: E | None, enum_field: str
) -> E | None:
    """A listing filter sent as the deprecated text, as the enum, or as both (which must agree);
    None when neither is set."""
    named = None
    if text:
        try:
            named = kind(text)
        except ValueError:
            raise InvalidArgument(
                f"{text_field} must be one of {', '.join(kind)}; got {clipped(text)}",
                reason=Reason.UNKNOWN_ENUM_VALUE,
                field=text_field,
            ) from None
    if named is not None and chosen is not None and named is not chosen:
        raise InvalidArgument(
            f"{text_field} {clipped(text)} and {enum_field} disagree; set {enum_field} alone",
            field=enum_field,
        )
    return chosen or named
