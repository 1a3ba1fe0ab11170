"""Erasure: PurgeConversation removes a conversation's messages and the memory rows scoped to it.

Everything goes in one write transaction: the message rows (the triggers remove their index
entries), the conversation's record, the rows of its conversation scope (notes, conversation
context) with their index entries, and, when one of those rows was rendered, a new revision of
the owner's prompt files without it. After the commit the caches forget what was erased and the
files are rewritten. Facts at owner or agent scope that were learnt in the conversation are the
owner's and stay; they only lose their link to the purged message (source_message_id).
"""

from __future__ import annotations

import dataclasses

import apsw

from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.memories import MemoryRecord, PromptTarget
from memoryd.domain.messages import Trust, require_operator
from memoryd.domain.timestamps import to_text, utc_now
from memoryd.services.history import HistoryService
from memoryd.services.long_term_memory import LongTermMemory
from memoryd.services.prompt_files import CommittedRender, PromptFiles
from memoryd.storage import history_writes, memory_writes
from memoryd.storage.writer import Batch, Writer


@dataclasses.dataclass(frozen=True, slots=True)
class PurgeResult:
    """What an erasure removed."""

    messages_deleted: int
    conversation_deleted: bool
    memories_deleted: int


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
    ) -> None:
        self._writer = writer
        self._history = history
        self._memory = memory
        self._prompts = prompts
        self._batch: Batch[ConversationKey, _Purged] = Batch.each("purge", self._purge)

    async def purge_conversation(self, key: ConversationKey, trust: Trust) -> PurgeResult:
        """Erase the conversation; purging an unknown conversation removes nothing. Operators
        only."""
        require_operator(trust, "purging a conversation")
        purged = await self._writer.submit(self._batch, key, after_commit=self._publish)
        return purged.result

    def _purge(self, connection: apsw.Connection, key: ConversationKey) -> _Purged:
        deleted, conversation_deleted = history_writes.purge_conversation(connection, key)
        erased = memory_writes.delete_conversation_scope(connection, key)
        render = None
        if any(_rendered(record) for record in erased):
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
        result = PurgeResult(deleted, conversation_deleted, len(erased))
        return _Purged(key, result, tuple(record.id for record in erased), render)

    def _publish(self, purged: _Purged) -> None:
        self._history.cache.invalidate(purged.key)
        for memory_id in purged.memory_ids:
            self._memory.rows.invalidate(memory_id)
        if purged.render is not None:
            self._prompts.publish(purged.render)


def _rendered(record: MemoryRecord) -> bool:
    return not record.archived and record.prompt_target is not PromptTarget.NONE
