"""StreamTranscript: realtime voice transcripts, acknowledged as they commit.

One connection reads its segments in order. A final is stored (with persistence on) by the
group-committing writer, in the same transaction as the session's committed seq, and
acknowledged once committed; the next segment is read only then, so a slow database slows the
sender through HTTP/2 flow control and memory stays bounded. Many streams share transactions.
With persistence off nothing is written: finals are acknowledged as processed, and a session's
committed seq is remembered by this process only.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
from collections.abc import AsyncIterator, Callable

from memoryd.config import RealtimeSettings
from memoryd.domain.history import AppendOutcome, AppendResult
from memoryd.domain.messages import NewMessage, is_blank
from memoryd.domain.quoting import clipped
from memoryd.domain.timestamps import utc_now
from memoryd.domain.transcripts import (
    Ack,
    Ending,
    Opening,
    Progress,
    Segment,
    Session,
    Speaker,
    Totals,
    final_message,
    open_session,
)
from memoryd.errors import InvalidArgument, ResourceExhausted, Unavailable
from memoryd.services.history import HistoryService, store_appends
from memoryd.storage import history_writes as writes
from memoryd.storage import transcript_store as store
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.write_terms import Batch
from memoryd.storage.writer import Writer

Event = Opening | Segment | Ending
# Sessions remembered without persistence (by this process only).
REMEMBERED_SESSIONS = 10_000
STOPPING = (
    "memoryd is shutting down: reconnect and open the session again; it resumes after the "
    "last acknowledged seq, which is committed"
)


class TranscriptService:
    """Transcript streams over the writer, the readers and the history use cases."""

    def __init__(
        self,
        *,
        writer: Writer,
        readers: ReaderPool,
        history: HistoryService,
        settings: RealtimeSettings,
        on_input: Callable[[], None],
    ) -> None:
        self._writer = writer
        self._readers = readers
        self._history = history
        self.settings = settings
        self._on_input = on_input
        self._open = 0
        self._open_by_agent: collections.Counter[str] = collections.Counter()
        self._remembered: collections.OrderedDict[tuple[str, ...], int] = collections.OrderedDict()
        self._final = Batch("transcript_final", _store_finals)
        self._stopping = asyncio.Event()

    def stop_streams(self) -> None:
        """End every open stream now with UNAVAILABLE (the server is stopping): an idle stream
        would otherwise hold the shutdown for the whole grace period."""
        self._stopping.set()

    @property
    def open_streams(self) -> int:
        """Transcript streams in progress (the metrics read it at scrape time)."""
        return self._open

    async def run(self, events: AsyncIterator[Event]) -> AsyncIterator[Ack]:
        """Acknowledgements for one connection's messages (the first one must open)."""
        first = await anext(aiter(events), None)
        if first is None:
            return
        if not isinstance(first, Opening):
            raise InvalidArgument("the first message must be `open`, which opens the session")
        session = open_session(first)
        agent = session.key.agent_id
        if self._open >= self.settings.max_streams:
            raise ResourceExhausted(
                f"{self._open} transcript streams are open; the limit is "
                f"{self.settings.max_streams} (memoryd.realtime.max_streams)"
            )
        if self._open_by_agent[agent] >= self.settings.max_streams_per_agent:
            raise ResourceExhausted(
                f"{self._open_by_agent[agent]} transcript streams of agent "
                f"{clipped(agent)} are open; the limit is "
                f"{self.settings.max_streams_per_agent} per agent "
                "(memoryd.realtime.max_streams_per_agent)"
            )
        self._open += 1
        self._open_by_agent[agent] += 1
        try:
            async for ack in self._session(session, events):
                yield ack
        finally:
            self._open -= 1
            self._open_by_agent[agent] -= 1
            if not self._open_by_agent[agent]:
                del self._open_by_agent[agent]

    async def _session(self, session: Session, events: AsyncIterator[Event]) -> AsyncIterator[Ack]:
        persisted = self.settings.persist_transcripts
        known = await self._committed(session)
        committed = known or 0
        yield Ack(
            committed_seq=committed,
            persisted=persisted,
            conversation=session.key,
            resumed=known is not None,
        )
        progress = Progress(max_text_bytes=self.settings.max_segment_bytes)
        totals = Totals()
        async for event in self._until_stopping(events):
            if isinstance(event, Opening):
                raise InvalidArgument("the session is open already: `open` comes only first")
            if isinstance(event, Ending):
                yield Ack(committed_seq=committed, persisted=persisted, totals=totals)
                return
            totals.segments += 1
            speaker = progress.check(event)
            if event.partial:
                continue
            if event.seq <= committed:
                totals.duplicates += 1
                continue
            if persisted:
                stored = await self._store(session, event, speaker)
                totals.finals_stored += stored
            else:
                self._remember(session, event.seq)
            committed = event.seq
            yield Ack(committed_seq=committed, persisted=persisted)

    async def _until_stopping(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """The stream's events until it ends, or until the server stops (then UNAVAILABLE, the
        status that tells a client to reconnect)."""
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            while True:
                following = asyncio.ensure_future(anext(events))
                await asyncio.wait((following, stopping), return_when=asyncio.FIRST_COMPLETED)
                if not following.done():
                    following.cancel()
                    raise Unavailable(STOPPING)
                try:
                    event = following.result()
                except StopAsyncIteration:
                    return
                yield event
        finally:
            stopping.cancel()

    async def _store(self, session: Session, segment: Segment, speaker: Speaker) -> int:
        """Commit a final (a blank one only moves the committed seq); 1 when it was stored."""
        message: NewMessage | None = None
        if not is_blank(segment.text):
            message = self._history.check_message(
                final_message(session, segment, speaker), "segment"
            )
        key = session.key
        result = await self._writer.submit(
            self._final,
            (session, message, segment.seq, utc_now()),
            after_commit=lambda done: (
                self._history.cache.append(key, done.stored) if done is not None else None
            ),
        )
        stored = result is not None and result.messages[0].outcome is AppendOutcome.STORED
        if stored and speaker is Speaker.USER:
            self._on_input()
        return int(stored)

    async def _committed(self, session: Session) -> int | None:
        if not self.settings.persist_transcripts:
            return self._remembered.get(_session_id(session))
        return await self._readers.read(lambda connection: store.committed_seq(connection, session))

    def _remember(self, session: Session, seq: int) -> None:
        name = _session_id(session)
        self._remembered[name] = seq
        self._remembered.move_to_end(name)
        while len(self._remembered) > REMEMBERED_SESSIONS:
            self._remembered.popitem(last=False)


def _session_id(session: Session) -> tuple[str, ...]:
    opening = session.opening
    return (session.key.agent_id, session.key.owner_id, opening.device_id, opening.session_id)


def _store_finals(
    connection: Transaction,
    payloads: list[tuple[Session, NewMessage | None, int, dt.datetime]],
) -> list[AppendResult | None]:
    """The finals of a group, set-based: one append of every stored final, one advance of every
    session's committed seq. A blank final (None) only advances its session."""
    results: list[AppendResult | None] = [None] * len(payloads)
    appends = [
        (index, writes.AppendRequest(session.key, (message,), now))
        for index, (session, message, _, now) in enumerate(payloads)
        if message is not None
    ]
    if appends:
        stored = store_appends(connection, [request for _, request in appends])
        for (index, _), result in zip(appends, stored, strict=True):
            results[index] = result
    for session, message, _, now in payloads:
        if message is None:
            writes.ensure_conversation(connection, session.key, now)
    store.advance(connection, [(session, seq, now) for session, _, seq, now in payloads])
    return results
