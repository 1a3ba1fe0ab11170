"""The gauges read when Prometheus scrapes: queue depths, backlogs, open streams and the
database's size (memoryd.storage.metric_reads), rather than kept up to date on every write."""

from __future__ import annotations

import logging
from pathlib import Path

from memoryd.errors import MemorydError
from memoryd.observability import metrics
from memoryd.runtime import Runtime
from memoryd.storage import metric_reads

log = logging.getLogger("memoryd.metrics")


async def refresh(runtime: Runtime) -> None:
    """Set the scrape-time gauges from `runtime`; a database that cannot be read leaves its
    gauges as they were (the scrape still answers, with the rest)."""
    metrics.WRITER_QUEUE.set(runtime.writer.queued)
    metrics.TRANSCRIPT_STREAMS.set(runtime.services.transcripts.open_streams)
    metrics.EMBEDDING_LAG.set(runtime.services.embedding.lag_seconds)
    for gauge, path in zip(
        (metrics.DATABASE_BYTES, metrics.WAL_BYTES), runtime.files, strict=False
    ):
        gauge.set(_size(path))
    queue = runtime.services.embedding.queue_position
    try:
        found = await runtime.readers.read(
            lambda connection: metric_reads.levels(connection, queue)
        )
    except MemorydError as error:  # the database is away (PostgreSQL restarting, say)
        log.warning("metrics: cannot read the database's levels: %s", error.message)
        return
    metrics.REVIEW_BACKLOG.set(found.review_backlog)
    metrics.EMBEDDING_QUEUE.labels("message").set(found.pending_messages)
    metrics.EMBEDDING_QUEUE.labels("memory").set(found.pending_memories)
    if found.database_bytes is not None:
        metrics.DATABASE_BYTES.set(found.database_bytes)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
