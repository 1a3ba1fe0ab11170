"""CommitTurn: a completed turn's messages, its usage, and the reviewer's new-input mark.

All three commit in one transaction; then the review scheduler is nudged and the compaction
check starts in the background, and the caller is answered. Neither review nor compaction runs
on the caller's path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from memoryd.domain.conversation import ConversationKey
from memoryd.domain.history import AppendResult
from memoryd.domain.messages import SentMessage, Trust, is_blank
from memoryd.domain.review_prompt import is_review_input
from memoryd.domain.timestamps import utc_now
from memoryd.domain.turns import TurnUsage
from memoryd.errors import InvalidArgument
from memoryd.services.history import HistoryService
from memoryd.storage import history_writes, review_store
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer


@dataclasses.dataclass(frozen=True, slots=True)
class TurnResult:
    """What CommitTurn stored."""

    append: AppendResult
    review_pending: bool


@dataclasses.dataclass(frozen=True, slots=True)
class _Turn:
    request: history_writes.AppendRequest
    usage: TurnUsage
    new_input: bool


class TurnService:
    """Turn commits over the writer; `on_commit(key, usage)` runs once a turn is committed (the
    review scheduler's nudge, the compaction check), on the event loop."""

    def __init__(
        self,
        writer: Writer,
        history: HistoryService,
        on_commit: Callable[[ConversationKey, TurnUsage], None],
    ) -> None:
        self._writer = writer
        self._history = history
        self._on_commit = on_commit

    async def commit(
        self,
        key: ConversationKey,
        messages: Sequence[SentMessage],
        usage: TurnUsage,
        *,
        speaker: Trust,
    ) -> TurnResult:
        """Store the turn; mark new input when a reviewable user message is in it.

        A message that does not say its trust has the speaker's. A guest's turn is reviewed as
        a guest's (no directives, no operator rows changed); its messages may not claim more
        trust than the turn's speaker.
        """
        checked = self._history.check_messages(messages, default_trust=speaker)
        if speaker is Trust.GUEST:
            for index, message in enumerate(checked):
                if message.trust is not Trust.GUEST:
                    raise InvalidArgument(
                        f"messages[{index}].trust is operator in a guest's turn: a message may "
                        "not claim more trust than the turn's speaker"
                    )
        prepared = tuple(None if is_blank(message.content) else message for message in checked)
        new_input = any(
            message is not None and is_review_input(message.role, message.metadata_json)
            for message in prepared
        )
        turn = _Turn(history_writes.AppendRequest(key, prepared, utc_now()), usage, new_input)

        result = await self._writer.run(
            "commit_turn",
            lambda transaction: _commit(transaction, turn),
            rows=max(1, sum(message is not None for message in prepared)),
            after_commit=lambda done: self._history.cache.append(key, done.append.stored),
        )
        # On the event loop, once committed: the review scheduler and the compaction check.
        self._on_commit(key, usage)
        return result


def _commit(connection: Transaction, turn: _Turn) -> TurnResult:
    (result,) = history_writes.append_batch(connection, [turn.request])
    # A turn whose messages were all blank (a first turn that was only an image) stores no
    # message, but the turn and its usage are still recorded on the conversation.
    history_writes.ensure_conversation(connection, turn.request.key, turn.request.now)
    review_store.mark_turn(
        connection,
        turn.request.key,
        usage=turn.usage,
        new_input=turn.new_input,
        now=turn.request.now,
    )
    return TurnResult(result, turn.new_input)
