"""Memory sources: what a row is written through (a conversation, the API, a scheduled job, the
reviewer), as registered in memory_sources, and the provenance each gives its rows."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Sequence

from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.memories import Caller, Provenance, job_scope_id


# What memory_sources may hold (the migration checks the same values).
class SourceType(enum.StrEnum):
    """The kind of a memory source (memory_sources.source_type)."""

    CONVERSATION = "conversation"
    API = "api"
    SCHEDULED_JOB = "scheduled_job"
    MEMORY_REVIEWER = "memory_reviewer"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SourceInfo:
    """A memory source as registered in memory_sources."""

    id: str
    source_type: SourceType
    name: str
    description: str
    memory_scope: str


def memory_source_for(caller: Caller) -> Provenance:
    """The provenance fields of a row written by `caller`."""
    info = source_info(caller)
    return Provenance(
        source_id=info.id,
        source_type=info.source_type,
        source_name=info.name,
        source_description=info.description,
    )


def source_info(caller: Caller) -> SourceInfo:
    """The memory source a caller writes through: its job, its conversation, or the API."""
    if caller.job_id is not None:
        scope = job_scope_id(caller.job_id)
        return SourceInfo(
            id=scope,
            source_type=SourceType.SCHEDULED_JOB,
            name=caller.job_id,
            description="scheduled job",
            memory_scope=scope,
        )
    if caller.conversation is not None:
        scope = caller.conversation.scope_id
        return SourceInfo(
            id=conversation_source_id(caller.conversation),
            source_type=SourceType.CONVERSATION,
            name=scope,
            description="conversation",
            memory_scope=scope,
        )
    return SourceInfo(
        id="api",
        source_type=SourceType.API,
        name="api",
        description="written through the API",
        memory_scope=caller.owner.owner_id,
    )


def conversation_source_id(key: ConversationKey) -> str:
    """The id of the memory source a conversation writes through."""
    return f"conversation:{key.scope_id}"


# What rows written through a conversation name as their source once it is erased: their
# facts stay the owner's, without the chat's id.
ERASED_CONVERSATION = SourceInfo(
    id="conversation:erased",
    source_type=SourceType.CONVERSATION,
    name="an erased conversation",
    description="conversation, since erased",
    memory_scope="",
)


# The memory source of every row the reviewer writes, and of its rows' provenance.
REVIEWER = SourceInfo(
    id="memory_reviewer",
    source_type=SourceType.MEMORY_REVIEWER,
    name="memory reviewer",
    description="background review",
    memory_scope="",
)


def reviewer_source(owner: OwnerKey) -> SourceInfo:
    """The reviewer's memory source, scoped to the owner."""
    return dataclasses.replace(REVIEWER, memory_scope=owner.owner_id)


def reviewer_provenance(
    run_id: int, *, model: str, provider: str, message_ids: Sequence[int]
) -> Provenance:
    """The provenance of what one review run writes: the run, its model, the messages read."""
    return Provenance(
        source_id=REVIEWER.id,
        source_type=REVIEWER.source_type,
        source_name=REVIEWER.name,
        source_description=REVIEWER.description,
        run_id=str(run_id),
        details_json=json.dumps(
            {
                "review_run_id": run_id,
                "model": model,
                "provider": provider,
                "source_message_ids": list(message_ids),
            },
            separators=(",", ":"),
        ),
    )
