"""The background embedder: every message and memory row gets a vector, and no write waits for it.

One task reads what waits, embeds a batch, and commits the vectors through the writer; then the
next, as the callers leave it room (memoryd.services.pacing). Each step first sorts what arrived
since the last into the live queue (a conversation that brought a few: a chat) or the backlog
(memoryd.domain.embedding_queue); then embeds the live queue, then memory rows without a vector
of the model, then the backlog (a bulk load, an import, a reindex: messages after the model's
cursor, oldest first). A chat appending during a bulk load of LoCoMo's 5,882 turns got its
vectors 172 to 180 s later when every message waited its turn (bench/embedding_freshness.py).
When nothing waits it sleeps, looking every POLL_SECONDS at the database's commit count
(memoryd.storage.changes, a few microseconds) and for work only once the count moved: any write
of any use case wakes it, with no hook in each of them. A failing provider is retried with a
growing pause (up to a minute), its reason kept for GetEmbeddingStatus; words find meanwhile.

The model row (provider, model, dimension) is made with the first vector. A changed model gets a
row of its own, with its cursor at 0: everything is embedded again in the background, and until
then searches compare only the new model's vectors.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time

from memoryd.domain.vectors import Floats, quantise, to_blob
from memoryd.errors import FailedPrecondition, Unavailable
from memoryd.llm.embeddings import Embedder, EmbeddingUnavailableError
from memoryd.log_events import Event
from memoryd.observability import metrics
from memoryd.services import embedded
from memoryd.services.outages import Outage
from memoryd.services.pacing import Pacing
from memoryd.services.waiting import wait_at_most
from memoryd.storage import vector_reads
from memoryd.storage import vector_store as store
from memoryd.storage.background_lock import BackgroundLock
from memoryd.storage.database import Changes
from memoryd.storage.readers import ReaderPool
from memoryd.storage.transaction import Transaction
from memoryd.storage.writer import Writer

log = logging.getLogger("memoryd.embedding")

POLL_SECONDS = 0.2
RECHECK_SECONDS = 2.0
MAX_BACKOFF_SECONDS = 60.0
# A process that does not embed (memoryd.storage.background_lock) looks this often for the
# model's row that the process that embeds makes.
MODEL_LOOKUP_SECONDS = 1.0
# How often a process that shares the store tries for the lock of the one that embeds.
LEAD_SECONDS = 2.0


class EmbeddingService:
    """The embedder task and the model row searches compare against."""

    def __init__(
        self,
        embedder: Embedder | None,
        writer: Writer,
        readers: ReaderPool,
        changes: Changes,
        *,
        pacing: Pacing,
        outage: Outage,
    ) -> None:
        self.embedder = embedder
        self._pacing = pacing
        self._writer = writer
        self._readers = readers
        self._changes = changes
        self.model: store.EmbeddingModel | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lead: asyncio.Task[None] | None = None
        self._last_error = ""
        self._model_looked_up = 0.0
        # Since when messages have waited without the embedder catching up (monotonic).
        self._behind_since: float | None = None
        self.outage = outage

    @property
    def enabled(self) -> bool:
        """Whether a provider is configured."""
        return self.embedder is not None

    @property
    def queue_position(self) -> tuple[bool, store.EmbeddingModel | None]:
        """What storage.metric_reads.levels counts the queue from: whether anything waits for a
        vector (False: embeddings are off), and the current model's row as last read (None:
        before its first vector, every message waits)."""
        return self.embedder is not None, self.model

    async def start(self, *, background: bool = True, lock: BackgroundLock | None = None) -> None:
        """Find the model's row (if it has vectors already), so that searches compare with
        them, and start the task that embeds what waits (not on a read-only server). With
        `lock`, it embeds only while this process holds it (the store is shared by several
        processes: memoryd.storage.background_lock), and tries for it every LEAD_SECONDS."""
        if self.embedder is None:
            return
        embedder = self.embedder
        self.model = await self._readers.read(
            lambda connection: store.find_model(connection, embedder.provider, embedder.model)
        )
        if not background:
            return
        if lock is None:
            self._task = asyncio.create_task(self._run(), name="memoryd-embedder")
        else:
            self._lead = asyncio.create_task(self._lead_while_held(lock), name="memoryd-lead")

    async def _lead_while_held(self, lock: BackgroundLock) -> None:
        try:
            while True:
                held = await asyncio.to_thread(lock.try_take)
                if held and self._task is None:
                    log.info(
                        "this process embeds new messages now",
                        extra={"event": Event.EMBEDDER_LEADING},
                    )
                    self._task = asyncio.create_task(self._run(), name="memoryd-embedder")
                elif not held and self._task is not None:
                    await self._cancel_task()
                await asyncio.sleep(LEAD_SECONDS)
        finally:
            await asyncio.to_thread(lock.release)

    def nudge(self) -> None:
        """Look for work now rather than when the commit count next moves."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop the task (a batch in flight is dropped; it is embedded again next start)."""
        if self._lead is not None:
            self._lead.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lead
            self._lead = None
        await self._cancel_task()
        if self.embedder is not None:
            await self.embedder.close()

    async def _cancel_task(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def lag_seconds(self) -> float:
        """How long the background embedder has had messages waiting without catching up
        (0: caught up, or this process does not embed)."""
        since = self._behind_since
        return 0.0 if since is None else time.monotonic() - since

    async def status(self) -> embedded.EmbeddingStatus:
        """The provider, the model, and how much is embedded and waiting."""
        return await embedded.status(self.embedder, self._readers, self._last_error)

    async def reindex(self) -> tuple[int, int]:
        """Queue every message and row again for the current model."""
        if self.embedder is None:
            raise FailedPrecondition(
                'embeddings are off (memoryd.search.embeddings = "off"): nothing to reindex'
            )
        if self.model is None:
            # No vector was ever made: everything waits already.
            found = await self._readers.read(
                lambda connection: vector_reads.counts(connection, None)
            )
            return found.pending_messages, found.pending_memories
        model_id = self.model.id
        queued = await self._writer.run(
            "reindex", lambda transaction: store.restart(transaction, model_id)
        )
        self.model = dataclasses.replace(self.model, message_cursor=0)
        self.nudge()
        return queued

    async def query_vector(self, text: str) -> tuple[store.EmbeddingModel, Floats] | None:
        """The query's vector and the model it may be compared within; None when no vector of
        the current model exists yet (or embeddings are off)."""
        if self.embedder is None:
            return None
        if self.model is None and time.monotonic() - self._model_looked_up > MODEL_LOOKUP_SECONDS:
            # Another process (the one that embeds: memoryd.storage.background_lock) may have
            # made the model's row since this one looked.
            self._model_looked_up = time.monotonic()
            embedder = self.embedder
            self.model = await self._readers.read(
                lambda connection: store.find_model(connection, embedder.provider, embedder.model)
            )
        if self.model is None:
            return None
        vectors = await embedded.embed(self.embedder, [text], "query")
        if vectors.shape[1] != self.model.dimension:
            return None
        return self.model, vectors[0]

    def _provider(self) -> Embedder:
        if self.embedder is None:
            raise FailedPrecondition('embeddings are off (memoryd.search.embeddings = "off")')
        return self.embedder

    # --- the task ---------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = 0.0
        while True:
            try:
                worked = await self.step()
            except (EmbeddingUnavailableError, Unavailable) as error:
                # The provider, or the database (PostgreSQL gone for a while): the task waits
                # and tries again rather than end, which would stop embedding until a restart.
                backoff = min(MAX_BACKOFF_SECONDS, max(1.0, backoff * 2))
                self._last_error = str(error)
                metrics.EMBEDDING_FAILURES.inc()
                if isinstance(error, Unavailable):  # storage away: one line for the outage
                    self.outage.failed(error, "embedding batches", interrupted=1)
                else:
                    log.warning(
                        "embedding failed; retrying in %.0f s: %s",
                        backoff,
                        error,
                        extra={"event": Event.EMBEDDING_FAILED, "retry_seconds": backoff},
                    )
                await asyncio.sleep(backoff)
                continue
            backoff = 0.0
            self.outage.answered()
            self._last_error = ""
            if worked:
                await self._pacing.rest()
            else:
                await self._idle()

    async def _idle(self) -> None:
        """Until the commit count moves, a nudge comes, or RECHECK_SECONDS pass (on
        PostgreSQL the count is this process's own commits: another process's messages are
        found by looking again)."""
        self._wake.clear()
        seen = self._changes.stamp()
        deadline = time.monotonic() + RECHECK_SECONDS
        while not self._wake.is_set() and time.monotonic() < deadline:
            await wait_at_most(self._wake, POLL_SECONDS)
            now = self._changes.stamp()
            if now is None or now != seen:
                return

    async def step(self) -> bool:
        """Embed one batch (its size by the pacing); False when nothing waits, or while an
        import writes (it waits)."""
        embedder = self._provider()
        batch = self._pacing.batch()
        if batch == 0:
            return False

        def read(connection: Transaction) -> tuple[store.EmbeddingModel | None, int]:
            # The model's row is read again each time: another process (a worker, a replica)
            # may have moved its cursor back (ReindexEmbeddings) or made it.
            model = store.find_model(connection, embedder.provider, embedder.model)
            return model, store.arrivals_count(connection, model)

        self.model, arrived = await self._readers.read(read)
        if self.model is not None and arrived:
            sorting = self.model
            through = await self._writer.run(
                "sort arrivals",
                lambda transaction: store.sort_arrivals(transaction, sorting),
                rows=arrived,
            )
            if through is not None:
                self.model = dataclasses.replace(self.model, arrived_through=through)
        model = self.model

        def waiting(connection: Transaction) -> tuple[list[store.MessageText], bool]:
            if model is None:  # before the first vector: the live arrivals, not sorted yet
                live = store.messages_by_id(
                    connection, store.live_arrivals(connection, None)[:batch]
                )
            else:
                live = store.live_messages(connection, model, batch)
            if live:
                return live, True
            return store.waiting_messages(connection, model, batch), False

        messages, live = await self._readers.read(waiting)
        if messages and live:
            await self._embed_messages(messages, live=True)
            return True
        # Rows remembered come before the backlog of messages: a fact stored during a bulk
        # load is one the conversation goes on about. (No model row yet, nothing said: every
        # row waits, and the first vector makes the row.)
        model_id = 0 if self.model is None else self.model.id
        memories = await self._readers.read(
            lambda connection: store.waiting_memories(connection, model_id, batch)
        )
        if memories:
            await self._embed_memories(memories)
            return True
        if messages:
            await self._embed_messages(messages, live=False)
            return True
        self._behind_since = None
        return False

    async def _embed_messages(self, messages: list[store.MessageText], *, live: bool) -> None:
        """Embed and store a batch of the live queue (out of order: the cursor stays) or of the
        backlog (oldest first: the cursor moves past it)."""
        embedder = self._provider()
        if self._behind_since is None:
            self._behind_since = time.monotonic()
        started = time.perf_counter()
        found = await self._pacing.timed(
            embedded.embed(embedder, [embedded.message_text(m) for m in messages], "message")
        )
        self._answered()
        model = await self._model_for(found.shape[1])
        quantised = quantise(found)
        vectors = [
            (message.id, float(quantised.scales[row]), to_blob(quantised.components[row]))
            for row, message in enumerate(messages)
        ]
        through = None if live else messages[-1].id
        await self._writer.run(
            "store message vectors",
            lambda transaction: store.store_message_vectors(
                transaction, model.id, vectors, through
            ),
            rows=max(1, len(vectors)),
        )
        if through is not None:
            self.model = dataclasses.replace(
                model, message_cursor=max(model.message_cursor, through)
            )
        log.debug(
            "embedded %d messages",
            len(vectors),
            extra={
                "event": Event.EMBEDDED,
                "messages": len(vectors),
                "queue": "live" if live else "backlog",
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )

    async def _embed_memories(self, memories: list[store.MemoryText]) -> None:
        embedder = self._provider()
        texts = [embedded.memory_text(text.key, text.value) for text in memories]
        found = await self._pacing.timed(embedded.embed(embedder, texts, "memory"))
        self._answered()
        model = await self._model_for(found.shape[1])
        quantised = quantise(found)
        vectors = [
            (text, float(quantised.scales[row]), to_blob(quantised.components[row]))
            for row, text in enumerate(memories)
        ]
        await self._writer.run(
            "store memory vectors",
            lambda transaction: store.store_memory_vectors(transaction, model.id, vectors),
            rows=len(vectors),
        )

    def _answered(self) -> None:
        """The provider answered: its last failure is over. Said before the vectors commit, so
        that no status reads them beside a failure already over (the task's own clearing comes
        after the commit, when a status may have read it)."""
        self._last_error = ""

    async def _model_for(self, dimension: int) -> store.EmbeddingModel:
        """The current model's row for vectors of `dimension` (made when new)."""
        if self.model is not None and dimension == self.model.dimension:
            return self.model
        embedder = self._provider()
        self.model = await self._writer.run(
            "embedding model",
            lambda transaction: store.model_row(
                transaction, embedder.provider, embedder.model, dimension
            ),
        )
        return self.model
