"""The sections of what memoryd keeps and how: [memoryd.history], [memoryd.memory] (the
background review), [memoryd.compaction], [memoryd.realtime], [memoryd.search], and the
[[memoryd.providers]] the review and compaction call. Each checks its own rules (`validate`)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from memoryd.config.section import (
    KIB,
    MAX_MESSAGE_BYTES,
    Section,
)
from memoryd.errors import StartupError


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class HistorySettings(Section):
    """[memoryd.history]: conversation history limits and the hot window cache."""

    # The most messages of a conversation's window; "unbounded" (the default) or a positive
    # integer. Older messages stay stored and searchable.
    max_conversation_history: int | None = None
    # The largest content and metadata of one message; together at most 3 MiB, so that one
    # message always fits in a 4 MiB answer.
    max_content_bytes: int = 256 * KIB
    max_metadata_bytes: int = 64 * KIB
    # The most messages of one AppendMessages call.
    max_messages_per_call: int = 100
    # The hot window cache: conversations kept, and their newest messages each.
    cache_conversations: int = 1024
    cache_messages_per_conversation: int = 200

    def validate(self) -> None:
        """One stored message must always fit in an answer a default client reads (4 MiB)."""
        size = self.max_content_bytes + self.max_metadata_bytes
        if size > MAX_MESSAGE_BYTES:
            raise StartupError(
                f"memoryd.history.max_content_bytes + max_metadata_bytes is {size:,} bytes; at "
                f"most {MAX_MESSAGE_BYTES:,}, so that one message always fits in the 4 MiB "
                "answer every gRPC client accepts"
            )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReviewSettings(Section):
    """[memoryd.memory]: the background reviewer."""

    # Background review; off leaves ReviewNow (`memoryd memory review`) working.
    enabled: bool = True
    # Reviews use this provider (a [[memoryd.providers]] name) first, or, when it names no
    # provider, the primary provider with this model (a cheaper one, say); the other providers
    # stay fallbacks. Empty: the chain as configured.
    model: str = ""
    # Hours (fractions too: 0.5 is 30 minutes) since the last review after which a conversation
    # with new input is reviewed: the longest a fact waits. 0: no time trigger (the turn, idle
    # and passive triggers still fire). A conversation with a backlog is reviewed again at once.
    review_interval_hours: float = 24.0
    # The most messages, and tokens of messages, one review reads; a backlog is read in turns.
    review_max_messages: int = 40
    review_input_token_budget: int = 4000
    # Tokens of the "current memory" listing in a review prompt: the most recently updated rows
    # that fit are shown, and the review may change only those.
    review_memory_token_budget: int = 4000
    # After a failed review, the conversation's next review waits this long.
    review_failure_backoff_ms: int = 300_000
    # Off ("unbounded") by default. When set, at most this many row changes (add, replace,
    # archive) of one answer are applied; the cursor then stays, and the same messages are
    # reviewed again at once, so nothing is dropped.
    review_max_operations: int | None = None
    # OpenHermit's name for review_max_operations (its per-review tool-call cap), accepted as
    # that; when both are set they must agree.
    max_tool_calls: int | None = None
    # The longest answer a review call may write (sent as max_tokens). An answer cut at it fails
    # the review, saying so, and the messages stay for the next one.
    review_max_output_tokens: int = 4096
    # Reviews running at once.
    review_concurrency: int = 4
    # OpenHermit's triggers, at its values (0 turns one off). Completed turns since the last
    # review after which new input is reviewed.
    turn_interval: int | None = 5
    # Minutes without a new message after which unread input is reviewed.
    idle_timeout_minutes: float | None = 10.0
    # User messages stored without an agent turn (AppendMessages in a group chat the agent only
    # reads) since the last review after which they are reviewed.
    passive_turn_interval: int | None = 20
    # How often the scheduler looks for due reviews.
    scheduler_tick_seconds: float = 5.0
    # Keep each review's prompt and the model's answer, for an operator to read
    # (GetReviewExchange, the console). They quote what users said, so they are off by default;
    # a purge of the conversation or owner erases them.
    keep_review_exchanges: bool = False

    def validate(self) -> None:
        """The scheduler ticks; the operation cap has one value."""
        if self.scheduler_tick_seconds <= 0:
            raise StartupError("memoryd.memory.scheduler_tick_seconds must be positive")
        both = (self.review_max_operations, self.max_tool_calls)
        if None not in both and both[0] != both[1]:
            raise StartupError(
                "memoryd.memory.max_tool_calls (OpenHermit's name) and review_max_operations "
                f"are the same cap: set one, or the same value in both (got {both[1]} and "
                f"{both[0]})"
            )

    @property
    def operation_cap(self) -> int | None:
        """The most row changes one review applies (None: all): review_max_operations, or
        OpenHermit's max_tool_calls."""
        return self.review_max_operations if self.max_tool_calls is None else self.max_tool_calls


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSettings(Section):
    """[memoryd.compaction]: keeping conversations inside their model's context window."""

    # Automatic compaction (Preflight, and the check after CommitTurn); /compact always works.
    enabled: bool = True
    # Compact when a turn's peak prompt tokens reach this fraction of the context window; the
    # composed context never passes it either. 0.1 to 1.0.
    threshold: float = 0.85
    # Sent with the summary call only ("none": not sent). An endpoint that refuses it (HTTP 400)
    # is asked again without it.
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] = "medium"
    # The most recently updated agent-scope memory rows in the composed context.
    context_entry_limit: int = 10
    # After a failed compaction, automatic compaction of that conversation waits this long.
    failure_backoff_seconds: float = 60.0
    # Before the window moves past unreviewed user messages, they are reviewed (in batches of
    # review_max_messages) for at most this long; compaction then goes ahead regardless.
    review_catch_up_seconds: float = 60.0

    def validate(self) -> None:
        """The threshold is a fraction of the context window."""
        if not 0.1 <= self.threshold <= 1.0:
            raise StartupError(
                f"memoryd.compaction.threshold must be between 0.1 and 1.0 (a fraction of the "
                f"context window), got {self.threshold}"
            )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeSettings(Section):
    """[memoryd.realtime]: StreamTranscript."""

    # Store final transcript segments (off by default, as in the seed: finals are then only
    # acknowledged, each acknowledgement saying persisted: false, and the start says so once).
    persist_transcripts: bool = False
    # Transcript streams open at once; one more is RESOURCE_EXHAUSTED.
    max_streams: int = 256
    # Transcript streams of one agent open at once, so that one adapter cannot take every slot
    # and starve the other agents; one more is RESOURCE_EXHAUSTED.
    max_streams_per_agent: int = 64
    # The largest segment text.
    max_segment_bytes: int = 64 * KIB


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SearchSettings(Section):
    """[memoryd.search]: semantic search (vectors made in the background) beside the words."""

    # "embedded": bge-small-en-v1.5 inside the memoryd-model-bge-small package, on this machine;
    # "provider": the /embeddings endpoint of a [[memoryd.providers]] entry; "off": words only.
    embeddings: Literal["embedded", "provider", "off"] = "embedded"
    # With "provider": the [[memoryd.providers]] entry's name (empty: the first entry).
    embedding_provider: str = ""
    # With "provider": the embedding model's name (required), e.g. nomic-embed-text on Ollama.
    embedding_model: str = ""
    # Messages or rows the background embedder reads and embeds at a time.
    embedding_batch: int = 64
    # Threads the background embedder runs the embedded model on, at the lowest CPU priority
    # (they use what calls leave). A search's query embeds on a thread of its own.
    embedding_threads: int = 2
    # Vectors of recently searched scopes kept in memory, in MiB (least recently used dropped;
    # each scope also counts about 1 KiB of its own).
    # A scope with more vectors than fit is searched by its words (semantic: refused, saying so).
    vector_cache_mb: float = 256.0
    # The similarity (0 to 1) at which a row or message holding none of the query's words is
    # as relevant as the floor asks (docs/api.md#relevance): "model", the one measured for the
    # embedded model (a provider's model has none: whatever its meaning finds stands at the
    # floor); a number, that one instead; 0: none.
    min_similarity: float | Literal["model"] = "model"
    # The relevance (0 to 1) every hit of SearchHistory and Recall is held to, whichever way it
    # matched (its words, part of a word, a key, its meaning, or their fusion): a hit below it
    # is left out and counted (below_floor). 0 keeps every hit.
    min_relevance: float = 0.5

    def validate(self) -> None:
        """A similarity floor is between 0 and 1, and so is the relevance floor."""
        if isinstance(self.min_similarity, float) and not 0 <= self.min_similarity < 1:
            raise StartupError(
                "memoryd.search.min_similarity must be from 0 up to (not including) 1, or "
                f'"model", got {self.min_similarity}'
            )
        if not 0 <= self.min_relevance < 1:
            raise StartupError(
                "memoryd.search.min_relevance must be from 0 up to (not including) 1, "
                f"got {self.min_relevance}"
            )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSettings:
    """One [[memoryd.providers]] entry: an OpenAI-compatible chat-completions endpoint."""

    # Unique: what logs, review runs and [memoryd.memory] model call the entry.
    name: str
    # The endpoint's base URL, http:// or https:// (for example http://127.0.0.1:11434/v1).
    base_url: str
    # The chat model to call.
    model: str
    # The environment variable holding the API key; empty for endpoints without keys.
    api_key_env: str = ""
    # The model's context window in tokens, where a caller does not say (compaction's budget).
    context_window: int = 128_000
    # One call's time limit; then the next provider in the chain is tried.
    timeout_seconds: float = 90.0

    def validate(self, label: str) -> None:
        """Names and addresses that can be called; positive limits."""
        for key in ("name", "base_url", "model"):
            if not getattr(self, key).strip():
                raise StartupError(f"{label}.{key} must not be blank")
        if not self.base_url.startswith(("http://", "https://")):
            raise StartupError(f"{label}.base_url must start with http:// or https://")
        if self.context_window <= 0 or self.timeout_seconds <= 0:
            raise StartupError(f"{label}: context_window and timeout_seconds must be positive")


def review_providers(
    providers: tuple[ProviderSettings, ...], model: str
) -> tuple[ProviderSettings, ...]:
    """The chain reviews use ([memoryd.memory] model): the provider of that name first, or the
    primary with that model; the others follow as fallbacks. Empty: the chain as configured."""
    if not model or not providers:
        return providers
    named = [provider for provider in providers if provider.name == model]
    if named:
        return (named[0], *(provider for provider in providers if provider is not named[0]))
    return (dataclasses.replace(providers[0], model=model), *providers[1:])
