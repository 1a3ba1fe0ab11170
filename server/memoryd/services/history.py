"""Conversation history use cases: append, list, search, clear (/new), describe.

Purging a conversation also erases memory rows, so it lives in memoryd.services.erasure.

Writes go through the single writer and are answered after commit; reads go to reader threads,
and the first page of a window is served from the hot cache when it can answer exactly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from memoryd.config import HistorySettings
from memoryd.domain.answers import message_bytes, page_of
from memoryd.domain.conversation import ConversationKey
from memoryd.domain.history import AppendResult, ConversationStats, WindowState
from memoryd.domain.messages import (
    MessageLimits,
    NewMessage,
    SentMessage,
    StoredMessage,
    Trust,
    check_kinds,
    check_message_count,
    check_new_message,
    is_blank,
    require_operator,
)
from memoryd.domain.paging import PageCursor, PageTokens, fingerprint, page_size
from memoryd.domain.review_prompt import is_review_input
from memoryd.domain.timestamps import utc_now
from memoryd.errors import NotFound
from memoryd.services.coherence import Coherence
from memoryd.services.window_cache import CachedWindow, WindowCache
from memoryd.storage import history_reads as reads
from memoryd.storage import history_writes as writes
from memoryd.storage import review_input, review_store
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.write_terms import Batch
from memoryd.storage.writer import Writer

CLEAR_NOTICE = "Started a fresh session. Long-term memory is preserved."


def store_appends(
    connection: Transaction, requests: list[writes.AppendRequest]
) -> list[AppendResult]:
    """Store the messages; a stored user message is new input for the reviewer, whichever RPC
    brought it (CommitTurn marks its turn itself), unless it is stored as already reviewed."""
    results = writes.append_batch(connection, requests)
    inputs = []
    for index, (request, result) in enumerate(zip(requests, results, strict=True)):
        stored = result.stored
        read = sum(is_review_input(m.role, m.metadata_json) for m in stored)
        passed = bool(
            request.as_reviewed
            and stored
            and review_store.pass_over(connection, request.key, [m.id for m in stored])
        )
        results[index] = dataclasses.replace(result, review_input=read, passed_over=passed)
        if read and not passed:
            inputs.append((request.key, request.now, read))
    review_input.mark_input(connection, inputs)
    return results


# Appends are set-based: the consecutive appends of a group run as one batch.
APPEND = Batch("append", store_appends)


@dataclasses.dataclass(frozen=True, slots=True)
class MessagePage:
    """One page of ListMessages: messages oldest first, and the token to walk further back."""

    messages: list[StoredMessage]
    next_page_token: str


@dataclasses.dataclass(frozen=True, slots=True)
class ClearResult:
    """What /new did."""

    notice: str
    window: WindowState


@dataclasses.dataclass(frozen=True, slots=True)
class _PageSlice:
    newest_first: list[StoredMessage]
    floor_id: int


class HistoryService:
    """Conversation history over the writer, the readers and the window cache."""

    def __init__(
        self,
        writer: Writer,
        readers: ReaderPool,
        settings: HistorySettings,
        tokens: PageTokens,
        coherence: Coherence,
    ) -> None:
        self._writer = writer
        self._coherence = coherence
        self._tokens = tokens
        self._readers = readers
        self._cap = settings.max_conversation_history
        self._limits = MessageLimits(
            max_content_bytes=settings.max_content_bytes,
            max_metadata_bytes=settings.max_metadata_bytes,
            max_messages_per_call=settings.max_messages_per_call,
        )
        self.cache = WindowCache(
            max_conversations=settings.cache_conversations,
            per_conversation=settings.cache_messages_per_conversation,
            window_cap=settings.max_conversation_history,
        )
        coherence.track(self.cache)

    @property
    def window_cap(self) -> int | None:
        """memoryd.history.max_conversation_history: a window's most messages (None: no cap)."""
        return self._cap

    # --- writes -------------------------------------------------------------------------------

    def check_messages(
        self, messages: Sequence[SentMessage], *, default_trust: Trust
    ) -> list[NewMessage]:
        """Every message checked against the limits (blank ones too: a malformed request is
        refused as a whole); a message that does not say its trust gets `default_trust`."""
        check_message_count(len(messages), self._limits)
        return [
            check_new_message(
                message, f"messages[{index}]", self._limits, default_trust=default_trust
            )
            for index, message in enumerate(messages)
        ]

    async def append(self, key: ConversationKey, messages: Sequence[SentMessage]) -> AppendResult:
        """Store every valid message of the call, or none; blank ones are skipped. A message
        that does not say its trust is an operator's."""
        checked = self.check_messages(messages, default_trust=Trust.OPERATOR)
        return await self.append_checked(key, checked)

    async def append_checked(
        self, key: ConversationKey, messages: Sequence[NewMessage]
    ) -> AppendResult:
        """Store messages already checked (blank ones are skipped), answered once committed.
        Calls made together are committed together."""
        prepared = [None if is_blank(message.content) else message for message in messages]
        return await self._writer.submit(
            APPEND,
            writes.AppendRequest(key, tuple(prepared), utc_now()),
            rows=max(1, sum(message is not None for message in prepared)),
            after_commit=lambda result: self.cache.append(key, result.stored),
        )

    async def append_checked_many(
        self,
        groups: Sequence[tuple[ConversationKey, Sequence[NewMessage]]],
        *,
        as_reviewed: bool = False,
    ) -> list[AppendResult]:
        """Store checked messages of many conversations in one transaction (blank ones are
        skipped), answered once committed; one result per group, in order. `as_reviewed`
        stores them as already reviewed where the review cursor allows (AppendResult says)."""
        now = utc_now()
        requests = [
            writes.AppendRequest(
                key,
                tuple(None if is_blank(message.content) else message for message in messages),
                now,
                as_reviewed,
            )
            for key, messages in groups
        ]

        def published(results: list[AppendResult]) -> None:
            for result in results:
                self.cache.append(result.key, result.stored)

        return await self._writer.run(
            "append_many",
            lambda transaction: store_appends(transaction, requests),
            rows=max(1, sum(len(request.messages) for request in requests)),
            after_commit=published,
        )

    def check_message(self, message: SentMessage, field: str) -> NewMessage:
        """One message checked against the limits; unset trust means operator."""
        return check_new_message(message, field, self._limits, default_trust=Trust.OPERATOR)

    async def clear(self, key: ConversationKey, trust: Trust) -> ClearResult:
        """/new: a fresh window after the newest message; nothing is deleted. Operators only."""
        require_operator(trust, "/new")
        now = utc_now()
        window = await self._writer.run(
            "clear",
            lambda transaction: writes.clear_window(transaction, key, now),
            after_commit=lambda _: self.cache.invalidate(key),
        )
        return ClearResult(CLEAR_NOTICE, window)

    # --- reads --------------------------------------------------------------------------------

    async def list_messages(
        self,
        key: ConversationKey,
        *,
        requested_page_size: int,
        page_token: str,
        kinds: list[str],
        all_history: bool,
    ) -> MessagePage:
        """A page of the window (or of all history), oldest first, newest page first."""
        size = page_size(requested_page_size)
        kind_filter = check_kinds(kinds, "kinds")
        bound_to = fingerprint(key, kind_filter, all_history=all_history)
        if page_token:
            cursor = self._tokens.messages_cursor(page_token, bound_to)
            rows = await self._readers.read(
                lambda connection: reads.page(
                    connection,
                    key,
                    before_id=cursor.before_id,
                    floor_id=cursor.floor_id,
                    kinds=kind_filter,
                    limit=size + 1,
                )
            )
            found = _PageSlice(rows, cursor.floor_id)
        elif all_history:
            rows = await self._readers.read(
                lambda connection: reads.page(
                    connection, key, before_id=None, floor_id=0, kinds=kind_filter, limit=size + 1
                )
            )
            found = _PageSlice(rows, 0)
        else:
            found = await self._first_window_page(key, size, kind_filter)
        return self._to_page(found, size, bound_to)

    async def state(self, key: ConversationKey) -> ConversationStats:
        """Counts, times, window and version of a conversation."""
        stats = await self._readers.read(
            lambda connection: reads.conversation_stats(connection, key, self._cap)
        )
        if stats is None:
            raise NotFound(f"conversation {key.describe()} has no record")
        return stats

    def _to_page(self, found: _PageSlice, size: int, bound_to: str) -> MessagePage:
        """At most `size` messages and LIST_BUDGET_BYTES; a token when more are left."""
        rows, more = page_of(found.newest_first, size, message_bytes)
        token = ""
        if more and rows:
            cursor = PageCursor(before_id=rows[-1].id, floor_id=found.floor_id)
            token = self._tokens.messages_token(cursor, bound_to)
        return MessagePage(list(reversed(rows)), token)

    # --- the first page of a window -----------------------------------------------------------

    async def _first_window_page(
        self, key: ConversationKey, size: int, kinds: tuple[str, ...]
    ) -> _PageSlice:
        await self._coherence.check()
        cached = self.cache.get(key)
        if cached is not None:
            found = self._page_from_cache(cached, size, kinds)
            if found is not None:
                return found
            return await self._readers.read(
                lambda connection: self._window_page(connection, key, size, kinds)
            )
        # A miss loads the window's tail into the cache and answers from the same snapshot.
        self.cache.begin_load(key)
        loaded: CachedWindow | None = None
        try:
            loaded, first_page = await self._readers.read(
                lambda connection: self._load_window(connection, key, size, kinds)
            )
        finally:
            self.cache.finish_load(key, loaded)
        return first_page

    def _load_window(
        self, connection: Transaction, key: ConversationKey, size: int, kinds: tuple[str, ...]
    ) -> tuple[CachedWindow | None, _PageSlice]:
        tail = reads.window_tail(connection, key, self.cache.capacity, self._cap)
        if tail.window is None:
            return None, _PageSlice([], 0)
        window = CachedWindow(tail.window.window_start_id, list(tail.messages), tail.complete)
        found = self._page_from_cache(window, size, kinds)
        return window, found or self._window_page(connection, key, size, kinds)

    def _window_page(
        self, connection: Transaction, key: ConversationKey, size: int, kinds: tuple[str, ...]
    ) -> _PageSlice:
        state = reads.window_state(connection, key)
        if state is None:
            return _PageSlice([], 0)
        floor = reads.window_floor(connection, key, state.window_start_id, self._cap)
        rows = reads.page(
            connection, key, before_id=None, floor_id=floor, kinds=kinds, limit=size + 1
        )
        return _PageSlice(rows, floor)

    def _page_from_cache(
        self, window: CachedWindow, size: int, kinds: tuple[str, ...]
    ) -> _PageSlice | None:
        """The first page from a cached window, or None if the cache cannot answer exactly."""
        messages = [m for m in window.messages if not kinds or m.kind in kinds]
        if window.complete:
            # The whole window is here: the walk may stop just below its oldest message.
            floor = window.messages[0].id - 1 if window.messages else window.window_start_id
            return _PageSlice(list(reversed(messages[-(size + 1) :])), floor)
        if self._cap is None and len(messages) > size:
            return _PageSlice(list(reversed(messages[-(size + 1) :])), window.window_start_id)
        return None
