"""The shapes of conversation-history results, shared by storage, use cases and transport."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.fusion import NO_SCORES, MatchKind, Scores
from memoryd.domain.messages import StoredMessage


class AppendOutcome(enum.Enum):
    """What happened to one message of an append."""

    STORED = "stored"
    DUPLICATE = "duplicate"
    SKIPPED_BLANK = "skipped_blank"


@dataclasses.dataclass(frozen=True, slots=True)
class AppendedMessage:
    """The result for one message of an append, in request order."""

    index: int
    outcome: AppendOutcome
    message: StoredMessage | None


@dataclasses.dataclass(frozen=True, slots=True)
class AppendResult:
    """The result of one append call."""

    key: ConversationKey
    messages: tuple[AppendedMessage, ...]
    history_version: int
    # Stored messages a review reads (user messages, not spoken), counted as they are stored.
    review_input: int = 0
    # Asked to store its messages as already reviewed, and it could (no unread input before).
    passed_over: bool = False

    @property
    def stored(self) -> list[StoredMessage]:
        """The rows this call stored (not the duplicates)."""
        return [
            item.message
            for item in self.messages
            if item.outcome is AppendOutcome.STORED and item.message is not None
        ]


@dataclasses.dataclass(frozen=True, slots=True)
class WindowState:
    """A conversation's window, as stored on its row."""

    window_start_id: int
    window_started_at: dt.datetime | None
    history_version: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EndedSession:
    """A session that `/new` ended: its messages (ids after started_after_id, up to
    last_message_id) and its working memory and description, kept."""

    started_after_id: int
    last_message_id: int
    working_memory: str
    description: str
    ended_at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ConversationStats:
    """What GetConversation reports."""

    window: WindowState
    message_count: int
    window_message_count: int
    first_message_at: dt.datetime | None
    last_message_at: dt.datetime | None
    last_message_id: int
    working_memory: str = ""
    description: str = ""
    completed_turns: int = 0
    peak_prompt_tokens: int = 0
    context_window: int = 0
    previous_session: EndedSession | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class WindowTail:
    """The newest messages of a conversation's window, oldest first."""

    window: WindowState | None
    messages: tuple[StoredMessage, ...]
    # True when `messages` holds every message of the window.
    complete: bool


@dataclasses.dataclass(frozen=True, slots=True)
class SearchHit:
    """One message found by a search."""

    message: StoredMessage
    snippet: str | None  # None: the use case builds a substring snippet
    rank: float
    word_match: bool
    # False for a hit only the meaning ranking (or a neighbour's match) found.
    lexical: bool = True
    semantic: bool = False
    scores: Scores = NO_SCORES

    @property
    def matches(self) -> tuple[MatchKind, ...]:
        """Every way the hit matched, the lexical way first."""
        found = []
        if self.lexical:
            found.append(MatchKind.WORD if self.word_match else MatchKind.SUBSTRING)
        if self.semantic:
            found.append(MatchKind.SEMANTIC)
        return tuple(found) or (MatchKind.NEIGHBOUR,)
