"""Translation that every RPC group shares: conversations, timestamps and trust. Nothing here
decides policy.

Timestamps outside 0001..9999 are refused here with the field named, before any use case runs.
"""

from __future__ import annotations

import datetime as dt

from google.protobuf import timestamp_pb2

from memoryd.api.enum_tables import TRUST
from memoryd.domain.conversation import ConversationKey, conversation_key
from memoryd.domain.messages import Trust
from memoryd.domain.timestamps import EPOCH
from memoryd.errors import InvalidArgument, Reason
from memoryd_client.v2 import context_service_pb2 as context_pb
from memoryd_client.v2 import conversation_service_pb2 as conversation_pb
from memoryd_client.v2 import memory_service_pb2 as memory_pb
from memoryd_client.v2 import records_pb2 as records_pb
from memoryd_client.v2 import review_service_pb2 as review_pb


def conversation_in(
    message: records_pb.Conversation, field: str = "conversation"
) -> ConversationKey:
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
    request: conversation_pb.ListMessagesRequest
    | conversation_pb.AppendMessagesRequest
    | conversation_pb.ClearConversationRequest
    | conversation_pb.PurgeConversationRequest
    | conversation_pb.PurgeMessagesRequest
    | conversation_pb.GetConversationRequest
    | conversation_pb.CommitTurnRequest
    | review_pb.GetReviewStateRequest
    | review_pb.ListReviewRunsRequest
    | review_pb.GetReviewExchangeRequest
    | memory_pb.RecallRequest
    | context_pb.ComposeContextRequest
    | context_pb.PreflightRequest
    | context_pb.CompactRequest
    | context_pb.GetCompactionStateRequest,
) -> ConversationKey:
    """The conversation of a request that must name one."""
    if not request.HasField("conversation"):
        raise InvalidArgument(
            "conversation is required (with channel and chat_id)",
            reason=Reason.REQUIRED,
            field="conversation",
        )
    return conversation_in(request.conversation)


def trust_in(number: int, field: str = "trust") -> Trust:
    """A caller's trust; unset means operator."""
    return TRUST.value(number, field)


def timestamp_in(value: timestamp_pb2.Timestamp, field: str) -> dt.datetime:
    """A client's timestamp as an aware datetime; out-of-range values are refused."""
    try:
        return value.ToDatetime(tzinfo=dt.UTC)
    except (ValueError, OverflowError, OSError):
        raise InvalidArgument(
            f"{field} is out of range (seconds {value.seconds}, nanos {value.nanos})",
            reason=Reason.OUT_OF_RANGE,
            field=field,
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


def optional_timestamp_out(moment: dt.datetime | None) -> timestamp_pb2.Timestamp | None:
    """A timestamp field that may be unset."""
    return timestamp_out(moment) if moment is not None else None


def conversation_out(key: ConversationKey) -> records_pb.Conversation:
    """A conversation key as a protobuf message."""
    return records_pb.Conversation(
        agent_id=key.agent_id,
        owner_id=key.owner_id,
        channel=key.channel,
        chat_id=key.chat_id,
        thread_scope=key.thread_scope,
    )


def positive_id(value: int, field: str, what: str) -> int:
    """A required id: INVALID_ARGUMENT when unset or not positive."""
    if value <= 0:
        raise InvalidArgument(
            f"{field} must be {what} (positive), got {value}",
            reason=Reason.REQUIRED if value == 0 else Reason.OUT_OF_RANGE,
            field=field,
        )
    return value
