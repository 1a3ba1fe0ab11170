"""Translation between protobuf messages and domain values; nothing here decides policy.

Enum numbers outside the declared values (proto3 keeps unknown numbers) and timestamps outside
0001..9999 are refused here with the field named, before any use case runs.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from google.protobuf import timestamp_pb2

from memoryd.domain.answers import LIST_BUDGET_BYTES, message_bytes
from memoryd.domain.conversation import (
    ConversationKey,
    HistoryScope,
    agent_key,
    conversation_key,
    owner_key,
)
from memoryd.domain.history import AppendOutcome, AppendResult, SearchHit
from memoryd.domain.messages import NewMessage, Role, StoredMessage, Trust
from memoryd.domain.timestamps import EPOCH
from memoryd.errors import InvalidArgument
from memoryd_client.v1 import memory_service_pb2 as service_pb
from memoryd_client.v1 import resources_pb2 as pb

ROLES = {
    pb.ROLE_USER: Role.USER,
    pb.ROLE_ASSISTANT: Role.ASSISTANT,
    pb.ROLE_SYSTEM: Role.SYSTEM,
    pb.ROLE_TOOL: Role.TOOL,
}
ROLE_NUMBERS = {role: number for number, role in ROLES.items()}
TRUSTS = {
    pb.TRUST_UNSPECIFIED: Trust.OPERATOR,
    pb.TRUST_OPERATOR: Trust.OPERATOR,
    pb.TRUST_GUEST: Trust.GUEST,
}
TRUST_NUMBERS = {Trust.OPERATOR: pb.TRUST_OPERATOR, Trust.GUEST: pb.TRUST_GUEST}
OUTCOMES = {
    AppendOutcome.STORED: service_pb.APPEND_OUTCOME_STORED,
    AppendOutcome.DUPLICATE: service_pb.APPEND_OUTCOME_DUPLICATE,
    AppendOutcome.SKIPPED_BLANK: service_pb.APPEND_OUTCOME_SKIPPED_BLANK,
}


def conversation_in(message: pb.Conversation, field: str = "conversation") -> ConversationKey:
    """A request's conversation, validated, defaults filled in."""
    return conversation_key(
        agent_id=message.agent_id,
        owner_id=message.owner_id,
        channel=message.channel,
        chat_id=message.chat_id,
        thread_scope=message.thread_scope,
        field=field,
    )


def required_conversation(
    request: service_pb.ListMessagesRequest
    | service_pb.AppendMessagesRequest
    | service_pb.ClearConversationRequest
    | service_pb.PurgeConversationRequest
    | service_pb.GetConversationRequest
    | service_pb.CommitTurnRequest
    | service_pb.GetReviewStateRequest,
) -> ConversationKey:
    """The conversation of a request that must name one."""
    if not request.HasField("conversation"):
        raise InvalidArgument("conversation is required (with channel and chat_id)")
    return conversation_in(request.conversation)


def search_scope_in(request: service_pb.SearchHistoryRequest) -> HistoryScope:
    """The scope of a search: a conversation, an owner or an agent."""
    which = request.WhichOneof("scope")
    if which == "conversation":
        return conversation_in(request.conversation)
    if which == "owner":
        return owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
    if which == "agent":
        return agent_key(agent_id=request.agent.agent_id)
    raise InvalidArgument("one of conversation, owner or agent is required")


def new_message_in(message: service_pb.NewMessage, field: str) -> NewMessage:
    """A message to append, with enums and time checked (limits are checked by the use case)."""
    if message.role == pb.ROLE_UNSPECIFIED:
        raise InvalidArgument(f"{field}.role is required")
    role = ROLES.get(message.role)
    if role is None:
        raise InvalidArgument(f"{field}.role has unknown value {message.role}")
    trust = TRUSTS.get(message.trust)
    if trust is None:
        raise InvalidArgument(f"{field}.trust has unknown value {message.trust}")
    created_at = (
        timestamp_in(message.created_at, f"{field}.created_at")
        if message.HasField("created_at")
        else None
    )
    return NewMessage(
        sender=message.sender,
        role=role,
        kind=message.kind,
        content=message.content,
        metadata_json=message.metadata,
        client_message_id=message.client_message_id or None,
        created_at=created_at,
        trust=trust,
    )


def timestamp_in(value: timestamp_pb2.Timestamp, field: str) -> dt.datetime:
    """A client's timestamp as an aware datetime; out-of-range values are refused."""
    try:
        return value.ToDatetime(tzinfo=dt.UTC)
    except (ValueError, OverflowError, OSError):
        raise InvalidArgument(
            f"{field} is out of range (seconds {value.seconds}, nanos {value.nanos})"
        ) from None


def timestamp_out(moment: dt.datetime) -> timestamp_pb2.Timestamp:
    """An aware datetime as a protobuf Timestamp (integer arithmetic: no float rounding)."""
    stamp = timestamp_pb2.Timestamp()
    set_timestamp(stamp, moment)
    return stamp


def set_timestamp(target: timestamp_pb2.Timestamp, moment: dt.datetime) -> None:
    """Write `moment` into a Timestamp field of a message being filled in place."""
    since = moment - EPOCH
    target.seconds = since.days * 86400 + since.seconds
    target.nanos = since.microseconds * 1000


def conversation_out(key: ConversationKey) -> pb.Conversation:
    """A conversation key as a protobuf message."""
    return pb.Conversation(
        agent_id=key.agent_id,
        owner_id=key.owner_id,
        channel=key.channel,
        chat_id=key.chat_id,
        thread_scope=key.thread_scope,
    )


def fill_message(target: pb.Message, message: StoredMessage) -> None:
    """Write a stored message into `target`, a message field of a response being built.

    Responses are filled in place (`results.add()`, then fields): building nested messages from
    keyword arguments copies each of them and cost about a tenth of AppendMessages throughput.
    """
    target.id = message.id
    conversation = target.conversation
    conversation.agent_id, conversation.owner_id = message.key.agent_id, message.key.owner_id
    conversation.channel, conversation.chat_id = message.key.channel, message.key.chat_id
    conversation.thread_scope = message.key.thread_scope
    target.sender = message.sender
    target.role = ROLE_NUMBERS[message.role]
    target.kind = message.kind
    target.content = message.content
    target.metadata = message.metadata_json
    if message.client_message_id:
        target.client_message_id = message.client_message_id
    set_timestamp(target.created_at, message.created_at)
    target.trust = TRUST_NUMBERS[message.trust]


def fill_append_results(target: Any, result: AppendResult, *, echo: bool) -> bool:
    """Append one `AppendResult` per appended message to the repeated field `target`: outcome,
    id and time, and with `echo` the row itself while it fits the answer. Returns whether an
    echo was left out."""
    budget = LIST_BUDGET_BYTES
    truncated = False
    for item in result.messages:
        entry = target.add(index=item.index, outcome=OUTCOMES[item.outcome])
        stored = item.message
        if stored is None:
            continue
        entry.id = stored.id
        set_timestamp(entry.created_at, stored.created_at)
        if echo:
            budget -= message_bytes(stored)
            if budget >= 0:
                fill_message(entry.message, stored)
            else:
                truncated = True
    return truncated


def fill_hit(target: service_pb.HistoryHit, hit: SearchHit) -> None:
    """Write a search hit into `target`."""
    fill_message(target.message, hit.message)
    target.snippet = hit.snippet or ""
    target.match = service_pb.MATCH_KIND_WORD if hit.word_match else service_pb.MATCH_KIND_SUBSTRING
    target.rank = hit.rank


def optional_timestamp_out(moment: dt.datetime | None) -> timestamp_pb2.Timestamp | None:
    """A timestamp field that may be unset."""
    return timestamp_out(moment) if moment is not None else None
