"""Erasure: PurgeConversation removes a conversation's messages and the memory rows scoped to it;
PurgeMessages removes messages of a conversation's window by id; PurgeOwner removes everything
of one owner of one agent.

Everything goes in one write transaction: the message rows (the triggers remove their index
entries), the conversation's record, the rows of its conversation scope (notes, conversation
context) with their index entries, its memory source, and, when one of those rows was rendered,
a new revision of the owner's prompt files without it (its provenance names the erased rows,
not the chat). After the commit the caches forget what was erased and the files are rewritten.
Facts at owner or agent scope that were learnt in the conversation are the owner's and stay;
they only lose their link to the purged message (source_message_id) and name "an erased
conversation" as their source.

Both scrub (memoryd.storage.scrub): the conversation's checkpoint resource with every revision
goes too, and every older revision of the owner's prompt files that rendered an erased row (as
the revision's provenance recorded when it was written, never by searching its text), the word
indexes are optimized in the same transaction, and after the commit the WAL is checkpointed and
truncated, so the erased text is in neither file.

The truncation never waits: readers on an older snapshot (an open export) would make it hold
the write lock, and every writer behind it, until they let go. It is tried at once; when
readers hold the WAL, the receipt says so (wal_truncated false) and a background task tries
again with growing pauses until it succeeds. Each erasure records itself in pending_scrubs in
its own transaction and is cleared only by a truncation after it, so a crash meanwhile leaves
the record for the next start, which truncates before serving, and `memoryd check` reports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path

from memoryd.data_directory import residual_files
from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.memories import PromptTarget
from memoryd.domain.message_erasure import check_erasable, check_purged_ids
from memoryd.domain.messages import Trust, require_operator
from memoryd.domain.resources import MutationSource
from memoryd.domain.timestamps import to_text, utc_now
from memoryd.log_events import Event
from memoryd.services.history import HistoryService
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.services.prompt_files import PromptFiles
from memoryd.services.prompt_state import CommittedRender
from memoryd.services.semantic import VectorCache
from memoryd.storage import database, history_writes, memory_writes, scrub
from memoryd.storage.fts5_words import forget_counts
from memoryd.storage.location import DatabaseLocation
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer

log = logging.getLogger("memoryd.erasure")
# Right after the purge a few quick tries (a writer's group may hold the lock for a moment),
# then background attempts with growing, then steady, pauses.
QUICK_TRIES = 5
QUICK_PAUSE_SECONDS = 0.02
RETRY_FIRST_SECONDS = 0.2
RETRY_MAX_SECONDS = 5.0


@dataclasses.dataclass(frozen=True, slots=True)
class PurgeResult:
    """What an erasure removed, and how far the scrub after it went."""

    messages_deleted: int
    conversation_deleted: bool
    memories_deleted: int
    wal_truncated: bool = False
    statistics_rebuilt: bool = False
    residual_files: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class MessagesPurged:
    """What PurgeMessages erased, and how far the scrub after it went."""

    message_ids: tuple[int, ...]
    history_version: int
    wal_truncated: bool = False
    statistics_rebuilt: bool = False
    residual_files: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class _MessagesErased:
    key: ConversationKey
    erased: history_writes.ErasedMessages


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerReceipt:
    """What PurgeOwner removed: rows by table, prompt files deleted, whether the WAL is
    truncated yet (False: readers hold it; it is retried in the background) and the planner's
    statistics rebuilt, and the files of the data directory that may still hold the owner's
    data."""

    counts: dict[str, int]
    files_removed: int
    wal_truncated: bool
    statistics_rebuilt: bool
    residual_files: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Purged:
    key: ConversationKey
    result: PurgeResult
    # The rows erased or changed: the caches forget them.
    memory_ids: tuple[int, ...]
    render: CommittedRender | None


class ErasureService:
    """Explicit erasure of conversations."""

    def __init__(
        self,
        *,
        home: Path,
        writer: Writer,
        readers: ReaderPool,
        history: HistoryService,
        memory: LongTermMemory,
        prompts: PromptFiles,
        connection_settings: DatabaseLocation,
        vectors: VectorCache,
    ) -> None:
        self._home = home
        self._vectors = vectors
        # For the WAL truncation, on a connection of its own that never waits (storage.database).
        self._connection_settings = connection_settings
        self._writer = writer
        self._readers = readers
        self._history = history
        self._memory = memory
        self._prompts = prompts
        self._retrying: asyncio.Task[None] | None = None

    async def purge_conversation(self, key: ConversationKey, trust: Trust) -> PurgeResult:
        """Erase the conversation; purging an unknown conversation removes nothing. Operators
        only."""
        require_operator(trust, "purging a conversation")
        purged = await self._writer.run(
            "purge", lambda transaction: self._purge(transaction, key), after_commit=self._publish
        )
        scrubbed = await self.scrub_wal()
        return dataclasses.replace(
            purged.result,
            wal_truncated=scrubbed.wal_truncated,
            statistics_rebuilt=scrubbed.statistics_rebuilt,
            residual_files=tuple(residual_files(self._home, wal_truncated=scrubbed.wal_truncated)),
        )

    async def purge_messages(
        self, key: ConversationKey, message_ids: Sequence[int], trust: Trust
    ) -> MessagesPurged:
        """Erase messages of the conversation's window by id (ids it does not hold are
        ignored); one before the window, or a checkpoint summary, refuses the call. Operators
        only."""
        require_operator(trust, "purging messages")
        ids = check_purged_ids(message_ids)
        done = await self._writer.run(
            "purge_messages",
            lambda transaction: self._purge_messages(transaction, key, ids),
            after_commit=self._publish_messages,
        )
        scrubbed = await self.scrub_wal()
        return MessagesPurged(
            done.erased.ids,
            done.erased.history_version,
            wal_truncated=scrubbed.wal_truncated,
            statistics_rebuilt=scrubbed.statistics_rebuilt,
            residual_files=tuple(residual_files(self._home, wal_truncated=scrubbed.wal_truncated)),
        )

    async def purge_owner(self, owner: OwnerKey) -> OwnerReceipt:
        """Erase everything of one owner of one agent, and scrub the files."""
        erased = await self._writer.run(
            "purge_owner",
            lambda transaction: _purge_owner(transaction, owner),
            after_commit=self._publish_owner,
        )
        removed = sum(await asyncio.gather(*(self._remove_file(f) for f in erased.files)))
        scrubbed = await self.scrub_wal()
        return OwnerReceipt(
            erased.counts,
            removed,
            scrubbed.wal_truncated,
            scrubbed.statistics_rebuilt,
            tuple(residual_files(self._home, wal_truncated=scrubbed.wal_truncated)),
        )

    async def scrub_wal(self) -> scrub.Scrubbed:
        """Truncate the WAL now if no reader holds it (PostgreSQL: vacuum, analyze, rebuild),
        clearing the erasures recorded before; otherwise leave it to the background."""
        scrubbed = scrub.Scrubbed(wal_truncated=False, statistics_rebuilt=False)
        for attempt in range(QUICK_TRIES):
            try:
                scrubbed = await self._truncate_once()
            except Exception:
                # The erasure has committed: its receipt says the scrub is pending, and the
                # background goes on trying (the log has why this try failed).
                log.exception(
                    "scrubbing after an erasure failed; retrying in the background",
                    extra={"event": Event.WAL_TRUNCATE_FAILED},
                )
                break
            if scrubbed.wal_truncated:
                return scrubbed
            if attempt + 1 < QUICK_TRIES:
                await asyncio.sleep(QUICK_PAUSE_SECONDS)
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.get_running_loop().create_task(self._retry())
        return scrubbed

    async def close(self) -> None:
        """Stop retrying (the next start truncates what is still recorded)."""
        if self._retrying is not None:
            self._retrying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retrying

    async def _retry(self) -> None:
        pause = RETRY_FIRST_SECONDS
        while True:
            await asyncio.sleep(pause)
            try:
                if (await self._truncate_once()).wal_truncated:
                    log.info(
                        "erased text is scrubbed (SQLite: the WAL truncated; PostgreSQL: the "
                        "erased tables vacuumed)",
                        extra={"event": Event.WAL_TRUNCATED},
                    )
                    return
            except Exception:
                log.exception(
                    "truncating the WAL failed", extra={"event": Event.WAL_TRUNCATE_FAILED}
                )
            pause = min(pause * 2, RETRY_MAX_SECONDS)

    async def _truncate_once(self) -> scrub.Scrubbed:
        """One attempt; when the WAL is truncated, the erasures recorded before are cleared."""
        through = await self._readers.read(scrub.newest_pending)
        scrubbed = await asyncio.to_thread(database.scrub_erased, self._connection_settings)
        if scrubbed.wal_truncated and through:
            await self._writer.run(
                "scrub_cleared", lambda transaction: scrub.clear_pending(transaction, through)
            )
        return scrubbed

    def _purge(self, connection: Transaction, key: ConversationKey) -> _Purged:
        now = utc_now()
        scrub.delete_checkpoints(connection, key)
        deleted, conversation_deleted = history_writes.purge_conversation(connection, key)
        erased = memory_writes.delete_conversation_scope(connection, key)
        renamed = memory_writes.forget_conversation_source(connection, key)
        render = None
        # Rows that render (or rendered before they were archived) may be quoted by revisions.
        quoted = [r.id for r in erased if r.prompt_target is not PromptTarget.NONE]
        if quoted:
            render = self._prompts.render_in_transaction(
                connection,
                OwnerKey(key.agent_id, key.owner_id),
                mutation_source=MutationSource.CONVERSATION_PURGE,
                # The erased rows by id, not the conversation: its chat id is erased too.
                provenance={"memory_ids": [record.id for record in erased], "at": to_text(now)},
                now=now,
            )
            # Older revisions that rendered the erased rows go; the new one no longer does.
            scrub.delete_rendering_revisions(
                connection, OwnerKey(key.agent_id, key.owner_id), quoted
            )
        if deleted or erased:
            scrub.optimize_indexes(connection)
            scrub.record_pending(connection, "a conversation", to_text(now))
        result = PurgeResult(deleted, conversation_deleted, len(erased))
        changed = (*(record.id for record in erased), *renamed)
        return _Purged(key, result, changed, render)

    def _purge_messages(
        self, connection: Transaction, key: ConversationKey, ids: tuple[int, ...]
    ) -> _MessagesErased:
        named = history_writes.named_messages(connection, key, ids)
        check_erasable(named.found, named.window_start_id)
        if not named.found:
            return _MessagesErased(
                key, history_writes.ErasedMessages((), named.history_version, ())
            )
        erased = history_writes.purge_messages(connection, key, [i for i, _ in named.found])
        scrub.optimize_indexes(connection)
        scrub.record_pending(connection, "messages of a conversation", to_text(utc_now()))
        return _MessagesErased(key, erased)

    def _publish_messages(self, done: _MessagesErased) -> None:
        if not done.erased.ids:
            return
        self._history.cache.invalidate(done.key)
        for memory_id in done.erased.memory_ids:
            self._memory.rows.invalidate(memory_id)
        self._forget_copies()

    def _publish_owner(self, erased: scrub.OwnerErased) -> None:
        for key in erased.conversations:
            self._history.cache.invalidate(key)
        for memory_id in erased.memory_ids:
            self._memory.rows.invalidate(memory_id)
        self._prompts.cache.invalidate(erased.owner)
        self._forget_copies()

    def _forget_copies(self) -> None:
        """No copy of an erased vector, nor a count of erased rows' words, stays in memory."""
        self._vectors.clear()
        forget_counts()

    async def _remove_file(self, relative: str) -> int:
        return int(await asyncio.to_thread(self._prompts.remove_committed, relative))

    def _publish(self, purged: _Purged) -> None:
        self._history.cache.invalidate(purged.key)
        for memory_id in purged.memory_ids:
            self._memory.rows.invalidate(memory_id)
        if purged.render is not None:
            self._prompts.publish(purged.render)
        self._forget_copies()


def _purge_owner(connection: Transaction, owner: OwnerKey) -> scrub.OwnerErased:
    erased = scrub.purge_owner(connection, owner)
    if any(erased.counts.values()):
        scrub.record_pending(connection, "an owner", to_text(utc_now()))
    return erased
