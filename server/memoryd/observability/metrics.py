"""Every metric memoryd exports, on a registry of its own (docs/metrics.md lists them).

Label values are bounded by construction: RPC method paths, status and outcome names, the
configured providers and models, fixed cache and stage names. Never an owner, a chat or a
query: a label of unbounded values would grow the scrape (and Prometheus) without end.

The metrics are module objects, as prometheus-client intends: a counter is incremented where
the thing happens, at ~1 microsecond, without threading a registry through every constructor.
The per-call ones (RPCs, write groups) are recorded only while metrics are enabled
(`RECORDING`), so that turning them off really takes their cost away; the others count rare
events (a review, a compaction, a model call) and always run.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

# No `_created` series beside every counter and histogram: Prometheus does not need them, and
# they would double the scrape.
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = CollectorRegistry(auto_describe=True)
for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
    REGISTRY.register(_collector)


class PlainCounter(Collector):
    """A labelled counter kept in a dict of plain numbers, for the per-call paths: ~0.3
    microseconds an increment against prometheus-client's ~1 (its lock and its child lookup).
    Each label set must be incremented by one thread (the event loop; a writer's own thread);
    the scrape reads a copy."""

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...]) -> None:
        self._name = name
        self._documentation = documentation
        self._labels = labels
        self._values: dict[tuple[str, ...], float] = {}
        REGISTRY.register(self)

    def inc(self, labels: tuple[str, ...], amount: float = 1) -> None:
        """Add `amount` to the count of `labels` (values in the declared order)."""
        values = self._values
        values[labels] = values.get(labels, 0) + amount

    def describe(self) -> list[Metric]:
        return [CounterMetricFamily(self._name, self._documentation, labels=self._labels)]

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labels)
        for labels, value in list(self._values.items()):
            family.add_metric(labels, value)
        yield family


class PlainHistogram(Collector):
    """A labelled histogram kept as plain bucket counts (see PlainCounter): ~0.6 microseconds
    an observation against prometheus-client's ~1.5."""

    def __init__(
        self, name: str, documentation: str, labels: tuple[str, ...], buckets: tuple[float, ...]
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labels = labels
        self._bounds = buckets
        # Per label set: the count in each bucket (the last one past every bound), and the sum.
        self._values: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}
        REGISTRY.register(self)

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        """Count `value` for `labels`."""
        found = self._values.get(labels)
        if found is None:
            found = self._values[labels] = ([0] * (len(self._bounds) + 1), [0.0])
        found[0][bisect.bisect_left(self._bounds, value)] += 1
        found[1][0] += value

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self._name, self._documentation, labels=self._labels)]

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labels)
        bounds = [*(repr(float(bound)) for bound in self._bounds), "+Inf"]
        for labels, (counts, total) in list(self._values.items()):
            cumulative = list(itertools.accumulate(list(counts)))
            family.add_metric(list(labels), list(zip(bounds, cumulative, strict=True)), total[0])
        yield family


class _Switch:
    """Whether the per-call metrics are recorded ([memoryd.metrics] enabled)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


RECORDING = _Switch()

# Seconds, from a fast read (~0.3 ms) to a long review catch-up.
_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_MODEL_SECONDS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
_TOKENS = (500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 1_000_000)

BUILD = Gauge(
    "memoryd_build_info",
    "Always 1; the running version and storage backend as labels.",
    ["version", "backend"],
    registry=REGISTRY,
)

# --- RPCs ------------------------------------------------------------------------------------
RPCS = PlainCounter(
    "memoryd_rpc_calls",
    "RPCs finished, by service (package.Service), method (/package.Service/Method), status code "
    "and transport.",
    ("service", "method", "code", "transport"),
)
RPC_SECONDS = PlainHistogram(
    "memoryd_rpc_duration_seconds",
    "Time from a request's arrival to its answer (or its last streamed message).",
    ("service", "method", "transport"),
    _SECONDS,
)
TRANSCRIPT_STREAMS = Gauge(
    "memoryd_transcript_streams_open",
    "StreamTranscript calls in progress.",
    registry=REGISTRY,
)

# --- the writer ------------------------------------------------------------------------------
WRITER_QUEUE = Gauge(
    "memoryd_writer_queue_jobs",
    "Writes waiting for the writer thread (of the main writer; the vectors' own writer apart).",
    registry=REGISTRY,
)
WRITER_GROUP_JOBS = PlainHistogram(
    "memoryd_writer_group_jobs",
    "Jobs committed together in one transaction (group commit).",
    ("writer",),
    _COUNTS,
)
WRITER_GROUP_ROWS = PlainHistogram(
    "memoryd_writer_group_rows",
    "Rows a group's jobs declared, bounded by [memoryd.storage] group_commit_max_rows.",
    ("writer",),
    _COUNTS,
)
WRITER_COMMIT_SECONDS = PlainHistogram(
    "memoryd_writer_commit_seconds",
    "A group's transaction, BEGIN to COMMIT (waiting for other processes' writers included).",
    ("writer",),
    _SECONDS,
)
WRITER_RETRIES = Counter(
    "memoryd_writer_retries",
    "Group transactions retried after a transient error (a busy database, a lost connection).",
    ["writer"],
    registry=REGISTRY,
)
WRITER_FAILURES = Counter(
    "memoryd_writer_failed_groups",
    "Groups whose transaction failed for good: their callers got an error.",
    ["writer"],
    registry=REGISTRY,
)

# --- reviews and model calls ------------------------------------------------------------------
REVIEWS = Counter(
    "memoryd_review_runs",
    "Reviews that called the model, by status: ok, nothing_to_save, nothing_to_save_prose "
    "(the model wrote text instead of operations) or failed.",
    ["status"],
    registry=REGISTRY,
)
REVIEW_OPERATIONS = Counter(
    "memoryd_review_operations",
    "Memory operations reviews proposed, by outcome: added, replaced, archived, skipped "
    "(refused; the review run keeps the reason) or deferred (to the next review).",
    ["outcome"],
    registry=REGISTRY,
)
REVIEW_VALUES_OVER_LIMIT = Counter(
    "memoryd_review_values_over_limit",
    "Facts a review wrote over the 200-character limit, by what became of them: split (into "
    "facts of whole sentences), shortened (by one more call to the model) or refused (the "
    "review run keeps the value and its message: ListReviewRuns).",
    ["outcome"],
    registry=REGISTRY,
)
REVIEW_SCHEDULER_PASSES = Counter(
    "memoryd_review_scheduler_passes",
    "Looks of the review scheduler for due conversations (one per tick, per finished review and "
    "per committed turn; a count that climbs while nothing happens is a scheduler that spins).",
    registry=REGISTRY,
)
REVIEW_BACKLOG = Gauge(
    "memoryd_review_backlog_conversations",
    "Conversations with input no review has read yet (read at scrape time).",
    registry=REGISTRY,
)
MODEL_CALLS = Counter(
    "memoryd_model_calls",
    "Requests to chat-completions providers, by provider, model, purpose (memory_reviewer or "
    "compactor) and outcome (ok, timeout, connection, http_error, invalid_answer).",
    ["provider", "model", "purpose", "outcome"],
    registry=REGISTRY,
)
MODEL_SECONDS = Histogram(
    "memoryd_model_call_duration_seconds",
    "Latency of each request to a provider, answered or not.",
    ["provider", "model", "purpose"],
    buckets=_MODEL_SECONDS,
    registry=REGISTRY,
)
MODEL_TOKENS = Counter(
    "memoryd_model_tokens",
    "Tokens providers reported, by kind: input (the prompt) or output (the completion).",
    ["provider", "model", "purpose", "kind"],
    registry=REGISTRY,
)

# --- compaction ------------------------------------------------------------------------------
COMPACTIONS = Counter(
    "memoryd_compactions",
    "Compactions, by outcome: compacted, skipped or failed.",
    ["outcome"],
    registry=REGISTRY,
)
COMPACTION_TOKENS = Histogram(
    "memoryd_compaction_window_tokens",
    "A compacted window's tokens, before and after (stage).",
    ["stage"],
    buckets=_TOKENS,
    registry=REGISTRY,
)

# --- embeddings ------------------------------------------------------------------------------
EMBEDDED = Counter(
    "memoryd_embedded_texts",
    "Texts embedded, by kind: message, memory (in the background) or query (for a search).",
    ["kind"],
    registry=REGISTRY,
)
EMBEDDING_SECONDS = Histogram(
    "memoryd_embedding_batch_seconds",
    "Time to embed one batch (model time only), by kind.",
    ["kind"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
EMBEDDING_FAILURES = Counter(
    "memoryd_embedding_failures",
    "Background embedding batches that failed and are retried after a backoff.",
    registry=REGISTRY,
)
EMBEDDING_QUEUE = Gauge(
    "memoryd_embedding_queue",
    "Messages and memory rows waiting for a vector of the current model (read at scrape time).",
    ["kind"],
    registry=REGISTRY,
)
EMBEDDING_LAG = Gauge(
    "memoryd_embedding_lag_seconds",
    "How long the background embedder has had messages waiting without catching up; 0 when "
    "it is caught up (or this process does not embed).",
    registry=REGISTRY,
)

# --- caches and storage ----------------------------------------------------------------------
CACHE = Counter(
    "memoryd_cache_lookups",
    "Lookups in memoryd's in-process caches, by cache and result (hit or miss).",
    ["cache", "result"],
    registry=REGISTRY,
)
DATABASE_BYTES = Gauge(
    "memoryd_database_bytes",
    "Size of the database: SQLite's file, or PostgreSQL's pg_database_size.",
    registry=REGISTRY,
)
WAL_BYTES = Gauge(
    "memoryd_wal_bytes",
    "Size of SQLite's write-ahead log (its -wal file); 0 on PostgreSQL.",
    registry=REGISTRY,
)


def cache_lookup(cache: str, *, hit: bool) -> None:
    """Count one lookup in `cache` (a fixed name per cache)."""
    CACHE.labels(cache, "hit" if hit else "miss").inc()
