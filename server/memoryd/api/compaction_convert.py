"""Translation of compaction messages: the composed context, compaction outcomes and state.
Nothing here decides policy."""

from __future__ import annotations

import collections

from memoryd.api.convert import conversation_out, set_timestamp
from memoryd.api.enum_tables import COMPACTION_OUTCOME, CONTEXT_PART_KIND, ROLE
from memoryd.api.resource_convert import resource_ref_out
from memoryd.domain.compaction import (
    CompactionDescription,
    CompactResult,
    PartKind,
    PreflightResult,
    WindowMessage,
)
from memoryd.domain.conversation import ConversationKey
from memoryd.domain.resources import checkpoint_resource
from memoryd.domain.timestamps import from_text
from memoryd.services.context_composer import ComposedContext
from memoryd_client.v2 import context_service_pb2 as context_pb

# The conversations whose last ComposeContext answer is kept.
ANSWERS_KEPT = 256


class ContextAnswers:
    """ComposeContext's answers, for one store: the last answer of each conversation is kept by
    its stamp (equal stamps, equal answers); a message's part is serialized once and kept (a
    stored message never changes, and its id is never used again), so a new answer of hundreds
    of messages is mostly joined, not built. Kept by the service that answers (one per store:
    message ids and conversations are a store's own). Used on the event loop only."""

    def __init__(self) -> None:
        self._parts = _SerializedParts(capacity=50_000)
        # The last answer of each conversation, with its stamp; an answer handed to gRPC is
        # never changed afterwards.
        self._answers: collections.OrderedDict[
            ConversationKey, tuple[object, context_pb.ComposeContextResponse]
        ] = collections.OrderedDict()

    def answer(
        self, key: ConversationKey, composed: ComposedContext
    ) -> context_pb.ComposeContextResponse:
        """ComposeContext's answer for `composed`, built once per stamp."""
        found = self._answers.get(key)
        if found is not None and found[0] == composed.stamp:
            self._answers.move_to_end(key)
            return found[1]
        response = _build(composed, self._parts)
        self._answers[key] = (composed.stamp, response)
        self._answers.move_to_end(key)
        if len(self._answers) > ANSWERS_KEPT:
            self._answers.popitem(last=False)
        return response


def _build(composed: ComposedContext, parts: _SerializedParts) -> context_pb.ComposeContextResponse:
    composition = composed.composition
    head = context_pb.ComposeContextResponse(
        parts=[
            context_pb.ContextPart(
                kind=CONTEXT_PART_KIND.number(block.kind),
                role=ROLE.number(block.role),
                content=block.content,
                tokens=block.tokens,
            )
            for block in composition.blocks
        ],
        total_tokens=composition.total_tokens,
        limit_tokens=composed.limit_tokens,
        context_window=composed.context_window,
        history_version=composed.history_version,
        omitted_messages=composition.omitted_messages,
        omitted_tokens=composition.omitted_tokens,
        memory_withheld=composed.memory_withheld,
    )
    messages = b"".join(parts.of(message) for message in composition.messages)
    return context_pb.ComposeContextResponse.FromString(head.SerializeToString() + messages)


class _SerializedParts:
    """The ContextPart of each message recently composed, serialized as a `parts` field entry,
    by message id."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._entries: collections.OrderedDict[int, bytes] = collections.OrderedDict()

    def of(self, message: WindowMessage) -> bytes:
        """The `parts` entry of a message (tag, length, ContextPart)."""
        found = self._entries.get(message.id)
        if found is not None:
            self._entries.move_to_end(message.id)
            return found
        part = context_pb.ContextPart(
            kind=_MESSAGE_KIND,
            role=ROLE.number(message.role),
            content=message.content,
            tokens=message.tokens,
            message_id=message.id,
            sender=message.sender,
            message_kind=message.kind,
            metadata=message.metadata_json,
        ).SerializeToString()
        entry = _PARTS_TAG + _varint(len(part)) + part
        self._entries[message.id] = entry
        if len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
        return entry


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# ComposeContextResponse.parts is field 1, length-delimited: tag (1 << 3) | 2.
_PARTS_TAG = bytes([(context_pb.ComposeContextResponse.PARTS_FIELD_NUMBER << 3) | 2])
_MESSAGE_KIND = CONTEXT_PART_KIND.number(PartKind.MESSAGE)


def preflight_out(result: PreflightResult) -> context_pb.PreflightResponse:
    """Preflight's answer."""
    return context_pb.PreflightResponse(
        outcome=COMPACTION_OUTCOME.number(result.outcome),
        notice=result.notice,
        reason=result.reason,
        peak_prompt_tokens=result.peak_prompt_tokens,
        trigger_tokens=result.trigger_tokens,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
    )


def compact_out(result: CompactResult) -> context_pb.CompactResponse:
    """Compact's answer."""
    return context_pb.CompactResponse(
        outcome=COMPACTION_OUTCOME.number(result.outcome),
        message=result.message,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        checkpoint_id=result.checkpoint_id,
    )


def state_out(
    key: ConversationKey, described: CompactionDescription
) -> context_pb.GetCompactionStateResponse:
    """GetCompactionState's answer."""
    response = context_pb.GetCompactionStateResponse(
        conversation=conversation_out(key),
        enabled=described.enabled,
        threshold=described.threshold,
        context_window=described.context_window,
        budget_tokens=described.budget_tokens,
        trigger_tokens=described.trigger_tokens,
        peak_prompt_tokens=described.peak_prompt_tokens,
        window_start_id=described.window_start_id,
        last_error=described.last_error,
    )
    if described.backoff_until is not None:
        set_timestamp(response.backoff_until, described.backoff_until)
    checkpoint = described.checkpoint
    if checkpoint is not None:
        target = response.checkpoint
        target.id = checkpoint.message.id
        set_timestamp(target.created_at, from_text(checkpoint.message.created_at))
        target.first_message_id = checkpoint.first_message_id
        target.last_message_id = checkpoint.last_message_id
        target.tokens = checkpoint.message.tokens
        target.revision = checkpoint.revision
        target.resource.CopyFrom(resource_ref_out(checkpoint_resource(key)))
    return response
