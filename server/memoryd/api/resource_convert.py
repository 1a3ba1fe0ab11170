"""Translation of versioned resource messages: references, revisions and resources. Nothing
here decides policy."""

from __future__ import annotations

from memoryd.api.convert import timestamp_out
from memoryd.api.enum_tables import RESOURCE_TYPE
from memoryd.domain.conversation import DEFAULT_OWNER_ID, check_identifier, owner_key
from memoryd.domain.quoting import clipped
from memoryd.domain.resources import (
    ResourceInfo,
    ResourceKey,
    ResourceType,
    Revision,
    is_checkpoint_scope,
)
from memoryd.errors import InvalidArgument
from memoryd_client.v2 import records_pb2 as records_pb


def resource_key_in(ref: records_pb.ResourceRef, field: str = "ref") -> ResourceKey:
    """A resource named by a request; the scope of a prompt file defaults to "default"."""
    kind = RESOURCE_TYPE.value(ref.type, f"{field}.type")
    agent = owner_key(agent_id=ref.agent_id, owner_id="", field=field).agent_id
    scope = check_identifier(ref.scope_id, f"{field}.scope_id")
    if kind is ResourceType.CHECKPOINT and not is_checkpoint_scope(scope):
        raise InvalidArgument(
            f"{field}.scope_id of a checkpoint is <owner>:<channel>:<chat_id>:<thread> (with % "
            "and : escaped in the owner, chat_id and thread; GetCompactionState's "
            f"checkpoint.resource names it), got {clipped(scope) if scope else 'nothing'}",
            field=f"{field}.scope_id",
        )
    if not scope:
        scope = DEFAULT_OWNER_ID
    return ResourceKey(agent, kind, scope)


def resource_ref_out(key: ResourceKey) -> records_pb.ResourceRef:
    """A resource key as a protobuf message."""
    return records_pb.ResourceRef(
        agent_id=key.agent_id, type=RESOURCE_TYPE.number(key.resource_type), scope_id=key.scope_id
    )


def revision_out(revision: Revision, *, with_content: bool) -> records_pb.ResourceRevision:
    """A revision as a protobuf message."""
    return records_pb.ResourceRevision(
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


def resource_out(info: ResourceInfo) -> records_pb.Resource:
    """A resource as a protobuf message."""
    return records_pb.Resource(
        ref=resource_ref_out(info.key),
        path=info.path,
        current_revision=info.current_revision,
        updated_at=timestamp_out(info.updated_at),
    )
