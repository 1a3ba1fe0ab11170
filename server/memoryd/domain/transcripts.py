"""Realtime voice transcripts: the session's conversation, the rules a segment stream follows,
and the message a final becomes.

    open      the first message, once; the conversation is channel "realtime", chat_id
              "local:<device_id>", the session's thread (default root)
    segments  seq >= 1, never lower than one sent before on the connection; partials of an
              utterance and its final share its seq; one final per seq
    finals    stored (with persistence on) as kind voice_turn, metadata source_type "realtime",
              device_id, the transcript kind, the model, the usage; a blank one is dropped
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json

from memoryd.domain.conversation import ConversationKey, check_identifier, conversation_key
from memoryd.domain.messages import Role, SentMessage, Trust
from memoryd.domain.turns import TurnUsage
from memoryd.errors import InvalidArgument, Reason

CHANNEL = "realtime"
KIND = "voice_turn"


class Speaker(enum.Enum):
    """Who spoke a segment."""

    USER = "user"
    ASSISTANT = "assistant"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Opening:
    """A session's opening message, translated from the wire."""

    device_id: str
    session_id: str
    agent_id: str
    owner_id: str
    thread_scope: str
    model: str
    trust: Trust


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """A segment, translated from the wire (the speaker is checked by the rules)."""

    seq: int
    speaker: Speaker | None
    partial: bool
    text: str
    start_ms: int
    end_ms: int
    usage: TurnUsage | None


@dataclasses.dataclass(frozen=True, slots=True)
class Ending:
    """The session's last message."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """An open session: who, where, and its conversation."""

    opening: Opening
    key: ConversationKey


def open_session(opening: Opening) -> Session:
    """The session's conversation, its identifiers checked."""
    device = check_identifier(opening.device_id, "open.device_id", required=True)
    session_id = check_identifier(opening.session_id, "open.session_id", required=True)
    key = conversation_key(
        agent_id=opening.agent_id,
        owner_id=opening.owner_id,
        channel=CHANNEL,
        chat_id=f"local:{device}",
        thread_scope=opening.thread_scope,
        field="open",
    )
    checked = dataclasses.replace(opening, device_id=device, session_id=session_id)
    return Session(opening=checked, key=key)


@dataclasses.dataclass(slots=True)
class Progress:
    """The rules of one connection's segments: seqs never go down, one final per seq."""

    max_text_bytes: int
    last_seq: int = 0
    last_final: int = 0

    def check(self, segment: Segment) -> Speaker:
        """The segment's speaker, once the segment is known to follow the rules."""
        if segment.seq < 1:
            raise InvalidArgument(
                f"segment.seq must be at least 1, got {segment.seq}",
                reason=Reason.OUT_OF_RANGE,
                field="segment.seq",
            )
        if segment.seq < self.last_seq:
            raise InvalidArgument(
                f"segment.seq {segment.seq} is lower than seq {self.last_seq}, sent before"
            )
        if segment.seq == self.last_final:
            raise InvalidArgument(f"segment.seq {segment.seq} already had its final")
        if segment.speaker is None:
            raise InvalidArgument(
                "segment.speaker must be SPEAKER_USER or SPEAKER_ASSISTANT", field="segment.speaker"
            )
        size = len(segment.text.encode("utf-8"))
        if size > self.max_text_bytes:
            raise InvalidArgument(
                f"segment.text is {size} bytes; the limit is {self.max_text_bytes} "
                "(memoryd.realtime.max_segment_bytes)",
                reason=Reason.VALUE_TOO_LONG,
                field="segment.text",
            )
        self.last_seq = segment.seq
        if not segment.partial:
            self.last_final = segment.seq
        return segment.speaker


def final_message(session: Session, segment: Segment, speaker: Speaker) -> SentMessage:
    """The message a final becomes; its client_message_id makes a replay a duplicate."""
    opening = session.opening
    metadata: dict[str, object] = {
        "source_type": "realtime",
        "device_id": opening.device_id,
        "session_id": opening.session_id,
        "seq": segment.seq,
        "transcript_kind": "input" if speaker is Speaker.USER else "output",
        "model": opening.model,
    }
    if segment.start_ms or segment.end_ms:
        metadata["start_ms"], metadata["end_ms"] = segment.start_ms, segment.end_ms
    if segment.usage is not None:
        metadata["usage"] = {
            "peak_prompt_tokens": segment.usage.peak_prompt_tokens,
            "context_window": segment.usage.context_window,
        }
    return SentMessage(
        sender=speaker.value,
        role=Role.USER if speaker is Speaker.USER else Role.ASSISTANT,
        kind=KIND,
        content=segment.text,
        metadata_json=json.dumps(metadata, separators=(",", ":"), ensure_ascii=False),
        client_message_id=f"realtime:{_digest(opening.session_id)}:{segment.seq}",
        created_at=None,
        trust=opening.trust if speaker is Speaker.USER else Trust.OPERATOR,
    )


def _digest(session_id: str) -> str:
    """A session id of any length, short enough for a client_message_id."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:24]


@dataclasses.dataclass(slots=True)
class Totals:
    """What one connection of a session did."""

    segments: int = 0
    finals_stored: int = 0
    duplicates: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """An acknowledgement: every utterance up to committed_seq has its final committed."""

    committed_seq: int
    persisted: bool
    conversation: ConversationKey | None = None  # the first answer
    resumed: bool = False  # the first answer
    totals: Totals | None = None  # the answer to `end`
