"""ComposeContext: what the next model call of a conversation receives, with no model call.

    compose   read the window (newest first, as far as the limit reaches), the prompt files, the
              working memory and the session's description, the recent agent-scope rows and the
              latest checkpoint

The last composition of each conversation is kept with its stamp: a kept composition is
returned only when it is exactly what would be built, and without a read at all while the
database's commit count has not moved. services.compaction uses it to see what the context
leaves out (a trigger of compaction).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import threading

from memoryd.config import CompactionSettings
from memoryd.domain import compaction as rules
from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.messages import Trust
from memoryd.domain.prompt_files import context_block
from memoryd.domain.tokens import count_tokens
from memoryd.errors import InvalidArgument, NotFound
from memoryd.services.coherence import Coherence
from memoryd.services.history import HistoryService
from memoryd.services.prompt_files import PromptFiles
from memoryd.storage import compaction_store as store
from memoryd.storage import memory_reads
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction

# Block texts repeat from call to call (the prompt files change rarely): count each once.
_count_block = functools.lru_cache(maxsize=4096)(count_tokens)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ComposedContext:
    """ComposeContext's answer. Two answers for one conversation with equal stamps are equal."""

    composition: rules.Composition
    limit_tokens: int
    context_window: int
    history_version: int
    memory_withheld: bool
    stamp: tuple[object, ...]


class ContextComposer:
    """Composition over the readers, the prompt files and the history's window cap."""

    def __init__(
        self,
        *,
        readers: ReaderPool,
        history: HistoryService,
        prompts: PromptFiles,
        settings: CompactionSettings,
        coherence: Coherence,
        default_window: int | None,
    ) -> None:
        self._readers = readers
        self._history = history
        self._prompts = prompts
        self.settings = settings
        self._coherence = coherence
        # The primary provider's context window, for a conversation that never reported one.
        self._default_window = default_window
        self._composed = _Compositions(capacity=256)

    async def compose(
        self, key: ConversationKey, trust: Trust, requested_window: int, reserve_tokens: int = 0
    ) -> ComposedContext:
        """What the next model call receives (no model is called).

        The last composition of each conversation is kept with its stamp (history version,
        limit, working memory, recent entries, memory block): any change of those gives another
        stamp, so a kept composition is returned only when it is exactly what would be built.
        """
        owner = OwnerKey(key.agent_id, key.owner_id)
        state = await self._prompts.context_for(owner, trust)
        memory_text = context_block(state.user_md.text, state.memory_md.text) if state else ""
        # Nothing committed since the kept composition was read: it is still exact (no read).
        request = (requested_window, state is None, memory_text, reserve_tokens)
        committed = await self._coherence.stamp()
        unchanged = self._composed.unchanged(key, request, committed)
        if unchanged is not None:
            return unchanged

        def read(connection: Transaction) -> ComposedContext:
            # A conversation that has no message yet is composed too: its memory block and
            # nothing else (an assistant's first call, before anything was said), whether or
            # not a window is known (0: none, and nothing to fit into one).
            found = store.conversation(connection, key)
            record = found or NOTHING_SAID
            window = self.context_window(
                requested_window, record.context_window, required=found is not None
            )
            limit_tokens = 0
            if window:
                limit_tokens = rules.limit(self.settings.threshold, window) - reserve_tokens
                if limit_tokens <= 0:
                    raise InvalidArgument(
                        f"recall_tokens is {reserve_tokens:,}: it leaves no room in the context "
                        f"limit of {limit_tokens + reserve_tokens:,} tokens"
                    )
            entries = (
                ()
                if state is None
                else tuple(
                    memory_reads.recent_agent_entries(
                        connection,
                        owner,
                        self.settings.context_entry_limit,
                        leaving_out=state.memory_md.memory_ids,  # sent once, in MEMORY.md
                    )
                )
            )
            stamp = (
                record.history_version,
                limit_tokens,
                record.working_memory,
                record.description,
                entries,
                memory_text,
                state is None,
            )
            kept = self._composed.get(key, stamp)
            if kept is not None:
                self._composed.put(key, stamp, kept, request, committed)
                return kept
            protected = store.protected(connection, key, record.session_start_id)
            after = max(record.window_start_id, protected[-1].id if protected else 0)
            newest, older = store.newest_within(
                connection, key, after, limit_tokens, self._history.window_cap
            )
            blocks = [
                rules.block(rules.PartKind.MEMORY_CONTEXT, memory_text, _count_block),
                rules.block(
                    rules.PartKind.WORKING_MEMORY,
                    rules.working_memory_text(record.working_memory, record.description),
                    _count_block,
                ),
                rules.block(
                    rules.PartKind.RECENT_ENTRIES, rules.recent_entries_text(entries), _count_block
                ),
                _checkpoint_block(session_checkpoint(connection, record)),
            ]
            composed = ComposedContext(
                composition=rules.compose(
                    [part for part in blocks if part is not None],
                    protected,
                    newest,
                    limit_tokens=limit_tokens or UNBOUNDED,
                    older_omitted=older,
                    max_messages=self._history.window_cap,
                ),
                limit_tokens=limit_tokens,
                context_window=window,
                history_version=record.history_version,
                memory_withheld=state is None,
                stamp=stamp,
            )
            self._composed.put(key, stamp, composed, request, committed)
            return composed

        return await self._readers.read(read)

    def context_window(self, requested: int, recorded: int | None, *, required: bool = True) -> int:
        """The request's window, else the one last reported, else the primary provider's; 0
        when none is known and none is `required`."""
        if requested < 0:
            raise InvalidArgument(f"context_window must not be negative, got {requested}")
        if requested:
            return requested
        if recorded:
            return recorded
        if self._default_window:
            return self._default_window
        if not required:
            return 0
        raise InvalidArgument(
            "context_window is required: none was reported with CommitTurn, and no model "
            "provider (with its context_window) is configured"
        )


class _Compositions:
    """The last composition of each conversation: its stamp, the request it answered, and the
    database's commit count before it was read. Reader threads and the event loop share it."""

    def __init__(self, *, capacity: int) -> None:
        self._capacity = capacity
        self._entries: collections.OrderedDict[ConversationKey, _Kept] = collections.OrderedDict()
        self._lock = threading.Lock()

    def unchanged(
        self, key: ConversationKey, request: tuple[object, ...], committed: int | None
    ) -> ComposedContext | None:
        """The kept composition for the same request when nothing was committed since it was
        read, or None."""
        if committed is None:
            return None
        with self._lock:
            kept = self._entries.get(key)
            if kept is None or kept.committed != committed or kept.request != request:
                return None
            self._entries.move_to_end(key)
            return kept.composed

    def get(self, key: ConversationKey, stamp: object) -> ComposedContext | None:
        """The composition stamped `stamp`, or None."""
        with self._lock:
            kept = self._entries.get(key)
            if kept is None or kept.stamp != stamp:
                return None
            self._entries.move_to_end(key)
            return kept.composed

    def put(
        self,
        key: ConversationKey,
        stamp: object,
        composed: ComposedContext,
        request: tuple[object, ...],
        committed: int | None,
    ) -> None:
        """Keep a composition (the least recently used conversation goes when full)."""
        with self._lock:
            self._entries[key] = _Kept(stamp, composed, request, committed)
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)


@dataclasses.dataclass(frozen=True, slots=True)
class _Kept:
    stamp: object
    composed: ComposedContext
    request: tuple[object, ...]
    committed: int | None


# The limit of a composition without a window: a conversation in which nothing was said, whose
# blocks alone are composed.
UNBOUNDED = 1 << 62
# The record of a conversation in which nothing was said yet.
NOTHING_SAID = store.CompactionRow(
    session_start_id=0,
    window_start_id=0,
    checkpoint_id=0,
    history_version=0,
    peak_prompt_tokens=None,
    context_window=None,
    failed_at=None,
    error=None,
    working_memory="",
    description="",
)


def conversation_record(connection: Transaction, key: ConversationKey) -> store.CompactionRow:
    """The conversation's compaction record; NOT_FOUND without one."""
    found = store.conversation(connection, key)
    if found is None:
        raise NotFound(f"conversation {key.describe()} has no record")
    return found


def session_checkpoint(
    connection: Transaction, record: store.CompactionRow
) -> rules.WindowMessage | None:
    """The session's latest checkpoint (one made before /new belongs to the old session)."""
    if record.checkpoint_id <= record.session_start_id:
        return None
    return store.message(connection, record.checkpoint_id)


def _checkpoint_block(checkpoint: rules.WindowMessage | None) -> rules.Part | None:
    if checkpoint is None:
        return None
    text = rules.checkpoint_text(checkpoint.content)
    return rules.Part(rules.PartKind.CHECKPOINT_SUMMARY, checkpoint.role, text, _count_block(text))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSnapshot:
    """What a compaction reads of its conversation in one transaction."""

    record: store.CompactionRow
    protected: list[rules.WindowMessage]
    candidates: list[rules.WindowMessage]
    checkpoint: rules.WindowMessage | None


def compaction_snapshot(connection: Transaction, key: ConversationKey) -> CompactionSnapshot:
    """The conversation's record, its protected messages, the candidates after them and the
    session's checkpoint, read together."""
    record = conversation_record(connection, key)
    protected = store.protected(connection, key, record.session_start_id)
    after = max(record.window_start_id, protected[-1].id if protected else 0)
    return CompactionSnapshot(
        record=record,
        protected=protected,
        candidates=store.window(connection, key, after),
        checkpoint=session_checkpoint(connection, record),
    )
