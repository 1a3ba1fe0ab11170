"""ComposeContext's Recalled block: what matters now from outside the composed context.

Asked for per call (ComposeContextRequest.recall_tokens), never by default: a context without it
stays byte for byte what it was, so prompt caches hold. The newest user message of the composed
window is the query. It finds, by hybrid search, the memory rows that no prompt file renders
(those are in the memory block already) and the conversation's messages that are not in the
composed context: older than the window, compacted away, or left out for room. They are listed
best first, as many as fit in the block's own budget. A guest's block holds messages only, as
a guest gets no memory block.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from memoryd.domain import compaction as rules
from memoryd.domain.conversation import ConversationKey, OwnerKey
from memoryd.domain.memories import Caller, PromptTarget
from memoryd.domain.messages import CHECKPOINT_KIND, Role, Trust
from memoryd.domain.recall import RecallScope, RecallSource
from memoryd.domain.search_query import MAX_QUERY_CHARS, MAX_QUERY_WORDS
from memoryd.domain.tokens import count_tokens
from memoryd.errors import InvalidArgument
from memoryd.services.context_composer import ComposedContext, ContextComposer
from memoryd.services.recall import RecallRequest, RecallService
from memoryd.services.search import HistorySearch

# Candidates read from each source before the budget decides.
ROWS = 10
MESSAGES = 20


def query_of(messages: Sequence[rules.WindowMessage]) -> str | None:
    """The newest user message's text, cut to what a search takes (its last words)."""
    for message in reversed(messages):
        if message.role is Role.USER and message.content.strip():
            words = message.content.split()[-MAX_QUERY_WORDS:]
            return " ".join(words)[-MAX_QUERY_CHARS:]
    return None


class RecalledContext:
    """ComposeContext with or without the Recalled block, over the composer, the search and
    recall use cases."""

    def __init__(
        self, composer: ContextComposer, search: HistorySearch, recall: RecallService
    ) -> None:
        self._composer = composer
        self._search = search
        self._recall = recall

    async def compose(
        self, key: ConversationKey, trust: Trust, requested_window: int, recall_tokens: int
    ) -> ComposedContext:
        """The composed context; with `recall_tokens`, the window's messages fit in what is
        left of the limit, and the Recalled block in those tokens."""
        if recall_tokens < 0:
            raise InvalidArgument(f"recall_tokens must not be negative, got {recall_tokens}")
        composed = await self._composer.compose(
            key, trust, requested_window, reserve_tokens=recall_tokens
        )
        if not recall_tokens:
            return composed
        part = await self.part(key, trust, composed.composition.messages, recall_tokens)
        # No window known (nothing said yet): no limit either.
        limit = composed.limit_tokens + recall_tokens if composed.limit_tokens else 0
        if part is None:
            return dataclasses.replace(composed, limit_tokens=limit)
        composition = dataclasses.replace(
            composed.composition,
            blocks=(*composed.composition.blocks, part),
            total_tokens=composed.composition.total_tokens + part.tokens,
        )
        return dataclasses.replace(composed, composition=composition, limit_tokens=limit)

    async def part(
        self,
        key: ConversationKey,
        trust: Trust,
        composed: Sequence[rules.WindowMessage],
        budget: int,
    ) -> rules.Part | None:
        """The block for a context whose messages are `composed`, within `budget` tokens."""
        query = query_of(composed)
        if query is None:
            return None
        lines: list[str] = []
        if trust is Trust.OPERATOR:
            found = await self._recall.recall(
                RecallRequest(
                    caller=Caller(OwnerKey(key.agent_id, key.owner_id), conversation=key),
                    query=query,
                    key="",
                    scope=RecallScope.ALL,
                    source=RecallSource.MEMORIES,
                    limit=ROWS,
                    trust=trust,
                )
            )
            lines += [
                f"- {hit.memory.record.key}: {hit.memory.record.value}"
                for hit in found.hits
                if hit.memory is not None and hit.memory.record.prompt_target is PromptTarget.NONE
            ]
        shown = {message.id for message in composed}
        said = await self._search.search(
            key, query, kinds=[], requested_limit=MESSAGES, trust=trust
        )
        lines += [
            f"- {hit.message.created_at:%Y-%m-%d} {hit.message.sender}: {hit.message.content}"
            for hit in said.hits
            if hit.message.id not in shown and hit.message.kind != CHECKPOINT_KIND
        ]
        return rules.recalled_part(lines, budget, count_tokens)
