"""Erasure: PurgeConversation removes a conversation's messages and the memory rows scoped to it;
PurgeOwner removes everything of one owner of one agent.

Everything goes in one write transaction: the message rows (the triggers remove their index
entries), the conversation's record, the rows of its conversation scope (notes, conversation
context) with their index entries, and, when one of those rows was rendered, a new revision of
the owner's prompt files without it. After the commit the caches forget what was erased and the
files are rewritten. Facts at owner or agent scope that were learnt in the conversation are the
owner's and stay; they only lose their link to the purged message (source_message_id).

Both scrub (memoryd.storage.scrub): the conversation's checkpoint summaries and every older
revision of the owner's prompt files that quoted an erased row go too, the word indexes are
optimized in the same transaction, and after the commit the WAL is checkpointed and truncated,
so the erased text is in neither file.
"""

from __future__ import annotations

import asyncio
import dataclasses

import apsw

from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.memories import MemoryRecord, PromptTarget
from memoryd.domain.messages import Trust, require_operator
from memoryd.domain.timestamps import to_text, utc_now
from memoryd.services.history import HistoryService
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.services.prompt_files import CommittedRender, PromptFiles
from memoryd.storage import history_writes, memory_writes, scrub
from memoryd.storage.connection import ConnectionSettings, open_connection, writer_policy
from memoryd.storage.writer import Batch, Writer


@dataclasses.dataclass(frozen=True, slots=True)
class PurgeResult:
    """What an erasure removed."""

    messages_deleted: int
    conversation_deleted: bool
    memories_deleted: int


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerReceipt:
    """What PurgeOwner removed: rows by table, prompt files deleted, and whether the WAL was
    truncated (False: readers kept it busy; the next checkpoint empties it)."""

    counts: dict[str, int]
    files_removed: int
    wal_truncated: bool


@dataclasses.dataclass(frozen=True, slots=True)
class _Purged:
    key: ConversationKey
    result: PurgeResult
    memory_ids: tuple[int, ...]
    render: CommittedRender | None


class ErasureService:
    """Explicit erasure of conversations."""

    def __init__(
        self,
        writer: Writer,
        history: HistoryService,
        memory: LongTermMemory,
        prompts: PromptFiles,
        connection_settings: ConnectionSettings,
    ) -> None:
        self._connection_settings = connection_settings
        self._writer = writer
        self._history = history
        self._memory = memory
        self._prompts = prompts
        self._batch: Batch[ConversationKey, _Purged] = Batch.each("purge", self._purge)
        self._owner_batch: Batch[OwnerKey, scrub.OwnerErased] = Batch.each(
            "purge_owner", scrub.purge_owner
        )

    async def purge_conversation(self, key: ConversationKey, trust: Trust) -> PurgeResult:
        """Erase the conversation; purging an unknown conversation removes nothing. Operators
        only."""
        require_operator(trust, "purging a conversation")
        purged = await self._writer.submit(self._batch, key, after_commit=self._publish)
        await self._truncate_wal()
        return purged.result

    async def purge_owner(self, owner: OwnerKey) -> OwnerReceipt:
        """Erase everything of one owner of one agent, and scrub the files."""
        erased = await self._writer.submit(
            self._owner_batch, owner, after_commit=self._publish_owner
        )
        removed = sum(await asyncio.gather(*(self._remove_file(f) for f in erased.files)))
        return OwnerReceipt(erased.counts, removed, await self._truncate_wal())

    def _purge(self, connection: apsw.Connection, key: ConversationKey) -> _Purged:
        scrub.delete_checkpoint_revisions(connection, key)
        deleted, conversation_deleted = history_writes.purge_conversation(connection, key)
        erased = memory_writes.delete_conversation_scope(connection, key)
        render = None
        rendered = [record for record in erased if _rendered(record)]
        if rendered:
            now = utc_now()
            render = self._prompts.render_in_transaction(
                connection,
                OwnerKey(key.agent_id, key.owner_id),
                mutation_source="conversation_purge",
                provenance={
                    "memory_ids": [record.id for record in erased],
                    "conversation": key.scope_id,
                    "at": to_text(now),
                },
                now=now,
            )
            # Older revisions that quoted the erased rows go; the new one no longer does.
            scrub.delete_quoting_revisions(
                connection,
                OwnerKey(key.agent_id, key.owner_id),
                [record.value for record in rendered],
            )
        if deleted or erased:
            scrub.optimize_indexes(connection)
        result = PurgeResult(deleted, conversation_deleted, len(erased))
        return _Purged(key, result, tuple(record.id for record in erased), render)

    def _publish_owner(self, erased: scrub.OwnerErased) -> None:
        for key in erased.conversations:
            self._history.cache.invalidate(key)
        for memory_id in erased.memory_ids:
            self._memory.rows.invalidate(memory_id)
        self._prompts.cache.invalidate(erased.owner)

    async def _remove_file(self, relative: str) -> int:
        return int(await asyncio.to_thread(self._prompts.remove_file, relative))

    async def _truncate_wal(self) -> bool:
        """Checkpoint and truncate the WAL from a connection of its own (the writer's belongs to
        its thread; a checkpoint is not a write of rows)."""

        def run() -> bool:
            connection = open_connection(
                self._connection_settings, writer_policy(self._connection_settings)
            )
            try:
                return scrub.truncate_wal(connection)
            finally:
                connection.close()

        return await asyncio.to_thread(run)

    def _publish(self, purged: _Purged) -> None:
        self._history.cache.invalidate(purged.key)
        for memory_id in purged.memory_ids:
            self._memory.rows.invalidate(memory_id)
        if purged.render is not None:
            self._prompts.publish(purged.render)


def _rendered(record: MemoryRecord) -> bool:
    return not record.archived and record.prompt_target is not PromptTarget.NONE
