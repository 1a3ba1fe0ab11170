"""Run every benchmark in one go and print the figures the README's performance section shows.

    make bench        # installs ghz, then runs this
    python bench/run_all.py [--quick] [--only NAME,NAME] --locomo PATH [--beam PATH]

Each benchmark prints its own JSON document; this collects them, prints them all as one JSON
document, then the summary tables. A benchmark that fails (a non-zero exit, or no JSON) is marked
failed with the end of what it wrote to stderr, the others' figures are still printed, and the
script exits non-zero only at the end. Each result is also written to `--record` (default
bench/results/last-run.json) as soon as it comes, so a run that is cut off keeps what it measured;
`--resume` runs only the benchmarks that file has no figures for, then prints the tables from it
all. `--quick` runs every benchmark once with tiny sizes: a
smoke check that each still runs (tests/server/test_benchmarks.py runs each that way), not figures.
The machine is shared and noisy: compare ratios and medians, not single absolute times.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
BACKENDS = ("sqlite", "postgres")
BOTH = ("--backend", "sqlite", "--backend", "postgres")
# The benchmarks run on each backend whose figures sit side by side.
SIDE_BY_SIDE = ("search_latency", "recall_latency", "compose_latency", "ingest_throughput")
# How much of a failed benchmark's stderr is kept (its last lines).
STDERR_LINES = 12


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """One run of one script: its arguments for the full figures, and for `--quick`."""

    name: str
    script: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()
    # Measures real chat text: takes `--locomo PATH`, and is skipped without one.
    locomo: bool = False
    # Measures BEAM too, when it is given (`--beam PATH`).
    beam: bool = False

    def command(self, *, quick: bool, locomo: str = "", beam: str = "") -> list[str]:
        """The command line that runs it."""
        data = ("--locomo", locomo) if self.locomo else ()
        if self.beam and beam:
            data = (*data, "--beam", beam)
        chosen = self.quick if quick else self.full
        return [sys.executable, str(ROOT / self.script), *data, *chosen]


def _each_backend(
    name: str, script: str, full: tuple[str, ...], quick: tuple[str, ...], *, locomo: bool = False
) -> list[Benchmark]:
    """The same benchmark run on each backend, one run each."""
    return [
        Benchmark(
            f"{name}.{backend}",
            script,
            (*full, "--backend", backend),
            (*quick, "--backend", backend),
            locomo=locomo,
        )
        for backend in BACKENDS
    ]


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "append_throughput",
        "append_throughput.py",
        ("--rounds", "5", *BOTH),
        ("--seconds", "0.5", "--rounds", "1", "--concurrency", "4", "--warm-up", "0.5", *BOTH),
    ),
    *_each_backend(
        "search_latency",
        "search_latency.py",
        (),
        ("--messages", "2000", "--queries", "50"),
        locomo=True,
    ),
    *_each_backend(
        "recall_latency",
        "recall_latency.py",
        (),
        (
            "--messages",
            "3000",
            "--memories",
            "300",
            "--queries",
            "50",
            "--owners",
            "20",
            "--calls",
            "200",
        ),
    ),
    Benchmark(
        "recall_latency_embedded",
        "recall_latency.py",
        (),
        # The quick run's vectors are cached where it runs, not beside the real text's.
        (
            "--messages",
            "300",
            "--memories",
            "50",
            "--queries",
            "20",
            "--owners",
            "5",
            "--calls",
            "50",
            "--cache",
            "vectors.npz",
        ),
        locomo=True,
    ),
    *_each_backend(
        "compose_latency",
        "compose_latency.py",
        (),
        ("--messages", "20", "--calls", "50", "--rounds", "1"),
    ),
    *_each_backend(
        "ingest_throughput", "ingest_throughput.py", (), ("--messages", "2000", "--batch", "200")
    ),
    *_each_backend("activity_cost", "activity_cost.py", (), ("--messages", "200", "--rounds", "1")),
    Benchmark("review_throughput", "review_throughput.py", (), ("--conversations", "20")),
    Benchmark(
        "transcript_latency",
        "transcript_latency.py",
        (),
        ("--streams", "2", "--rate", "50", "--seconds", "1"),
    ),
    Benchmark("transfer_throughput", "transfer_throughput.py", (), ("--messages", "1000")),
    Benchmark(
        "hybrid_latency",
        "hybrid_latency.py",
        (),
        # The quick run's vectors are cached where it runs, not beside the real text's.
        ("--messages", "1000", "--queries", "1", "--cache", "vectors.npz"),
        locomo=True,
    ),
    Benchmark(
        "embedding_freshness",
        "embedding_freshness.py",
        (),
        ("--seconds", "1", "--conversations", "2"),
        locomo=True,
    ),
    Benchmark(
        "framework_overhead",
        "framework_overhead.py",
        (),
        ("--turns", "4", "--rounds", "1"),
        locomo=True,
    ),
    Benchmark(
        "commit_headers_cost",
        "commit_headers_cost.py",
        (),
        ("--seconds", "0.5", "--rounds", "1", "--concurrency", "4"),
    ),
    Benchmark(
        "ai_sdk_overhead",
        "ai_sdk_overhead.py",
        (),
        ("--turns", "4", "--rounds", "1"),
        locomo=True,
    ),
    Benchmark(
        "worker_throughput",
        "worker_throughput.py",
        BOTH,
        ("--seconds", "0.5", "--rounds", "1", "--workers", "2", "--warm-up", "0.5", *BOTH),
    ),
    Benchmark("http_json", "http_json.py", (), ("--calls", "50")),
    Benchmark(
        "http_servers", "http_servers.py", (), ("--calls", "50", "--rounds", "1", "--skip-hostile")
    ),
    Benchmark(
        "observability_cost",
        "observability_cost.py",
        (),
        ("--rounds", "1", "--seconds", "1", "--concurrency", "2"),
    ),
    Benchmark(
        "console_first_view",
        "console_first_view.py",
        (),
        ("--messages", "2000", "--memories", "200", "--loads", "1"),
    ),
    Benchmark("auth_overhead", "auth_overhead.py", (), ("--rounds", "200")),
    Benchmark("erasure_cost", "erasure_cost.py", (), ("--messages", "2000", "--owners", "4")),
    Benchmark(
        "erasure_under_exports",
        "erasure_under_exports.py",
        (),
        ("--messages", "400", "--exports", "1"),
    ),
    Benchmark(
        "pg_drivers",
        "pg_drivers.py",
        (),
        ("--seconds", "0.5", "--rounds", "1", "--concurrency", "4", "--conversations", "10"),
    ),
    *[
        Benchmark(
            f"retrieval_quality.{backend}",
            "retrieval_quality.py",
            ("--backend", backend),
            ("--backend", backend, "--no-off-topic"),
            locomo=True,
            beam=True,
        )
        for backend in BACKENDS
    ],
)


def run(benchmark: Benchmark, *, quick: bool, locomo: str = "", beam: str = "") -> dict[str, Any]:
    """Run one benchmark: its JSON document, or {"failed": why} (with what it printed, if any
    of it was JSON)."""
    if benchmark.locomo and not locomo:
        return {"skipped": "no LoCoMo file (--locomo or $LOCOMO)"}
    print(f"running {benchmark.name} ...", file=sys.stderr, flush=True)
    result = subprocess.run(
        benchmark.command(quick=quick, locomo=locomo, beam=beam),
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        document: dict[str, Any] = json.loads(result.stdout)
    except ValueError:
        document = {}
    tail = "\n".join(result.stderr.strip().splitlines()[-STDERR_LINES:])
    if result.returncode != 0:
        return {"failed": f"exit status {result.returncode}", "stderr": tail, "document": document}
    if not document:
        return {"failed": "no JSON document on stdout", "stderr": tail}
    return document


def collect(
    benchmarks: tuple[Benchmark, ...],
    *,
    quick: bool,
    locomo: str = "",
    beam: str = "",
    record: Path | None = None,
    kept: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every benchmark's result by name, in order; a failure never stops the others. Results in
    `kept` are reused, not run again; `record` is rewritten after each benchmark."""
    results: dict[str, Any] = {}
    for item in benchmarks:
        earlier = (kept or {}).get(item.name)
        if earlier is not None and not ({"failed", "skipped"} & earlier.keys()):
            results[item.name] = earlier
            continue
        results[item.name] = run(item, quick=quick, locomo=locomo, beam=beam)
        if record is not None:
            record.parent.mkdir(parents=True, exist_ok=True)
            partial = record.with_name(record.name + ".partial")
            partial.write_text(json.dumps(results, indent=2))
            partial.replace(record)
    return results


def failures(results: dict[str, Any]) -> dict[str, str]:
    """The failed benchmarks, and why."""
    return {name: found["failed"] for name, found in results.items() if "failed" in found}


def _row(
    label: str, results: dict[str, Any], needs: tuple[str, ...], write: Callable[[], None]
) -> None:
    """Print a table's row with `write`, or say which benchmark it would have come from failed
    (or which figure was missing from its answer)."""
    failed = [name for name in needs if "failed" in results.get(name, {})]
    skipped = [name for name in needs if "skipped" in results.get(name, {})]
    if failed:
        print(f"| {label} | **FAILED** ({', '.join(failed)}) | |")
    elif any(name not in results for name in needs):
        print(f"| {label} | not run | |")
    elif skipped:
        print(f"| {label} | skipped ({results[skipped[0]]['skipped']}) | |")
    else:
        try:
            write()
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as error:
            print(f"| {label} | **not printed**: {type(error).__name__} {error} | |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke check")
    parser.add_argument("--only", default="", help="comma-separated names (default: every one)")
    parser.add_argument(
        "--locomo",
        default=os.environ.get("LOCOMO", ""),
        help="LoCoMo's data/locomo10.json (default $LOCOMO): the real chat text the latency and "
        "quality benchmarks measure; those are skipped without it",
    )
    parser.add_argument(
        "--beam",
        default=os.environ.get("BEAM", ""),
        help="BEAM's repository (default $BEAM): measured beside LoCoMo by retrieval_quality",
    )
    parser.add_argument(
        "--record",
        type=Path,
        default=None,
        help="where each result is written as it comes (default bench/results/last-run.json, "
        "or last-quick.json with --quick)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="reuse the figures already in --record; run only the benchmarks it lacks",
    )
    args = parser.parse_args()
    if args.record is None:
        args.record = ROOT / "results" / ("last-quick.json" if args.quick else "last-run.json")
    kept: dict[str, Any] = {}
    if args.resume and args.record.exists():
        kept = json.loads(args.record.read_text())
    wanted = {name for name in args.only.split(",") if name}
    chosen = tuple(
        item
        for item in BENCHMARKS
        if not wanted or item.name.split(".")[0] in wanted or item.name in wanted
    )
    results = collect(
        chosen,
        quick=args.quick,
        locomo=args.locomo,
        beam=args.beam,
        record=args.record,
        kept=kept,
    )
    print(json.dumps(results, indent=2))
    print_tables(results)
    failed = failures(results)
    for name, why in failed.items():
        print(f"FAILED: {name}: {why}\n{results[name].get('stderr', '')}", file=sys.stderr)
    return 1 if failed else 0


def print_tables(results: dict[str, Any]) -> None:
    """The README's summary tables, a row for each figure; a failed benchmark's rows say so."""
    r = results
    print(f"\nmachine: {platform.machine()}, Python {platform.python_version()}")
    print("| measure | memoryd | baseline or target |")
    print("|---|---|---|")

    def append() -> None:
        found = r["append_throughput"]
        on, off = found["memoryd"], found["embeddings_off"]
        print(
            f"| AppendMessages, 1 message per call, {found['concurrency']} callers, median of "
            f"{found['rounds']} rounds | {statistics.median(on['rps']):.0f} calls/s, "
            f"p50 {on['p50_ms']} ms, p99 {on['p99_ms']} ms (embeddings off: "
            f"{statistics.median(off['rps']):.0f} calls/s) | do-nothing "
            f"grpc.aio server: {statistics.median(found['baseline_rps']):.0f} calls/s |"
        )
        print(
            f"| ratio of the medians | **{on['ratio_of_medians']}** (embeddings off "
            f"{off['ratio_of_medians']}) | at least 0.5 |"
        )
        print(
            f"| acknowledged appends committed | {on['every_acknowledged_row_committed']} "
            f"({on['acknowledged']} acknowledged, {on['committed_rows']} rows) | all |"
        )

    def search() -> None:
        found = r["search_latency.sqlite"]
        client, server = found["client_ms"], found["server_ms"]
        print(
            f"| SearchHistory, {found['messages']} messages, {found['queries']} queries | "
            f"p50 **{client['all']['p50']} ms**, p99 **{client['all']['p99']} ms** at the client; "
            f"p50 {server['p50']} ms, p99 {server['p99']} ms in the server | p50 < 5 ms, "
            f"p99 < 25 ms |"
        )

    def recall() -> None:
        found = r["recall_latency.sqlite"]
        print(
            f"| Recall, {found['messages']} messages and {found['memories']} memory rows, "
            f"{found['queries']} queries | p50 **{found['recall_client_ms']['all']['p50']} ms**, "
            f"p99 **{found['recall_client_ms']['all']['p99']} ms** at the client; p50 "
            f"{found['recall_server_ms']['p50']} ms, p99 {found['recall_server_ms']['p99']} ms "
            "in the server | p50 < 5 ms, p99 < 30 ms |"
        )
        embedded = r.get("recall_latency_embedded", {})
        if "recall_client_ms" in embedded:
            print(
                f"| Recall, the same sizes of LoCoMo's text, every vector written | p50 "
                f"**{embedded['recall_client_ms']['all']['p50']} ms**, p99 "
                f"**{embedded['recall_client_ms']['all']['p99']} ms** at the client | "
                "p50 < 5 ms, p99 < 20 ms |"
            )
        prompt, health = found["prompt_context_ghz_ms"], found["health_check_ghz_ms"]
        print(
            f"| GetPromptContext, one at a time (ghz) | p50 **{prompt['p50_ms']} ms** at the "
            f"client (p50 {found['prompt_context_server_ms']['p50']} ms in the server) | "
            f"p50 < 1 ms; grpc health check on the same server: p50 {health['p50_ms']} ms |"
        )

    def review() -> None:
        found = r["review_throughput"]
        print(
            f"| background reviews, {found['conversations']} due conversations, fake model "
            f"answering at once, concurrency {found['concurrency']} | "
            f"{found['reviews_per_second']} reviews/s; own time per review p50 "
            f"**{found['own_ms']['p50']} ms**, p99 {found['own_ms']['p99']} ms | "
            "own time p50 < 10 ms |"
        )

    def compose() -> None:
        found = r["compose_latency.sqlite"]
        floor = found["same_answer_from_a_do_nothing_server_ghz_ms"]
        python = found["python_client_ms"]
        print(
            f"| ComposeContext, {found['messages']} messages, {found['context_window']}-token "
            f"window ({found['answer_bytes']} bytes), one at a time (ghz) | p50 "
            f"**{found['compose_ghz_ms']['p50']} ms**, p99 {found['compose_ghz_ms']['p99']} ms "
            f"(p50 {found['compose_server_ms']['p50']} ms in the server; Python client p50 "
            f"{python['compose_p50']} ms) | health check p50 "
            f"{found['health_check_ghz_ms']['p50']} ms (Python client {python['health_p50']} "
            f"ms); the same answer from a do-nothing server p50 {floor['p50']} ms |"
        )

    def ingest() -> None:
        found = r["ingest_throughput.sqlite"]
        print(
            f"| IngestMessages, {found['messages']} messages in batches of {found['batch']}, "
            f"{found['streams']} streams | {found['ingest_messages_per_second']} messages/s "
            f"(server peak RSS {found['server_peak_rss_mb']} MB) | raw APSW into the same "
            f"schema: {found['raw_messages_per_second']} messages/s; ratio "
            f"**{found['ratio']}**, target at least {found['target_ratio']} |"
        )

    def transcript() -> None:
        found = r["transcript_latency"]
        print(
            f"| StreamTranscript, {found['streams']} streams, {found['target_rate']:.0f} "
            f"finals/s asked, medians of {found['rounds']} rounds | "
            f"{found['finals_per_second']} finals/s; acknowledgement p50 "
            f"{found['ack_ms']['p50']} ms, p99 **{found['ack_ms']['p99']} ms** (server peak RSS "
            f"{found['server_peak_rss_mb']} MB) | p99 < 20 ms at 1,000 finals/s; do-nothing "
            f"server in the same run: p50 {found['noop_ack_ms']['p50']} ms, p99 "
            f"{found['noop_ack_ms']['p99']} ms |"
        )

    def transfer() -> None:
        found = r["transfer_throughput"]
        print(
            f"| memoryd import / export, {found['records']} records | import "
            f"{found['import_records_per_second']} records/s, export "
            f"{found['export_records_per_second']} records/s (identical: "
            f"{found['export_identical_to_the_file']}) | IngestMessages of the same messages: "
            f"{found['ingest_messages_per_second']} messages/s; ratio "
            f"{found['import_to_ingest_ratio']} |"
        )

    def hybrid() -> None:
        found = r["hybrid_latency"]
        for mode in ("lexical", "semantic", "hybrid"):
            row = found[mode]
            figures = (
                f"refused: {row['refused']}"
                if "refused" in row
                else f"p50 **{row['p50']} ms**, p99 {row['p99']} ms at the client "
                "(query embedding included)"
            )
            print(
                f"| SearchHistory {mode}, {found['scope']} of {found['messages']} messages of "
                f"real chat, {found['queries_per_mode']} questions | {figures} | "
                "hybrid p50 <= 20 ms, p99 <= 40 ms (2 cores) |"
            )

    def freshness() -> None:
        found = r["embedding_freshness"]
        alone, during = found["live alone"], found["live during a bulk load"]
        loaded = found["bulk load"]
        print(
            f"| a chat message's vector, after its append | alone: p50 "
            f"{alone['freshness_ms']['p50']} ms, p99 **{alone['freshness_ms']['p99']} ms**; "
            f"during a bulk load of {loaded['messages']}: p50 "
            f"{during['freshness_ms']['p50']} ms, p99 **{during['freshness_ms']['p99']} ms** "
            f"(the load embedded at {loaded['per_second']} messages/s) | p99 within 2 s |"
        )

    def frameworks() -> None:
        found = r["framework_overhead"]
        for name, arm in found["arms"].items():
            print(
                f"| a turn through {name}, {arm['turns']} turns of real chat | p50 "
                f"{arm['integration_p50_ms']} ms against {arm['direct_p50_ms']} ms direct: "
                f"**+{arm['added_p50_ms']} ms** (p99 {arm['integration_p99_ms']} against "
                f"{arm['direct_p99_ms']} ms) | at most 1 ms more at p50 |"
            )

    _row("AppendMessages", r, ("append_throughput",), append)
    _row("SearchHistory", r, ("search_latency.sqlite",), search)
    _row("Recall", r, ("recall_latency.sqlite",), recall)
    _row("background reviews", r, ("review_throughput",), review)
    _row("ComposeContext", r, ("compose_latency.sqlite",), compose)
    _row("IngestMessages", r, ("ingest_throughput.sqlite",), ingest)
    _row("StreamTranscript", r, ("transcript_latency",), transcript)
    _row("memoryd import / export", r, ("transfer_throughput",), transfer)
    _row("SearchHistory by mode", r, ("hybrid_latency",), hybrid)
    _row("embedding freshness", r, ("embedding_freshness",), freshness)
    _row("agent frameworks", r, ("framework_overhead",), frameworks)

    def ai_sdk() -> None:
        arm = r["ai_sdk_overhead"]["ai_sdk"]
        print(
            f"| a turn through the Vercel AI SDK's middleware, {arm['turns']} turns | p50 "
            f"{arm['integration_p50_ms']} ms against {arm['direct_p50_ms']} ms direct: "
            f"**+{arm['added_p50_ms']} ms** | at most 1 ms more at p50 |"
        )

    _row("the AI SDK's middleware", r, ("ai_sdk_overhead",), ai_sdk)

    def headers() -> None:
        found = r["commit_headers_cost"]
        print(
            "| what an unkeyed append costs more than a keyed one (its headers) | "
            f"{found['unkeyed_cpu_us_per_call_more']} µs of CPU a call "
            f"({found['arms']['unkeyed']['rps_median']} appends/s against "
            f"{found['arms']['keyed']['rps_median']} keyed) | none (issue 57) |"
        )

    _row("committed headers", r, ("commit_headers_cost",), headers)
    print("\n| measure | SQLite | PostgreSQL | PostgreSQL against SQLite |")
    print("|---|---|---|---|")
    _row(
        "SQLite and PostgreSQL",
        r,
        (
            "append_throughput",
            *(f"{name}.{backend}" for name in SIDE_BY_SIDE for backend in BACKENDS),
        ),
        lambda: print_backends(r),
    )
    print(
        "\n| workers, backend | appends/s (ratio to do-nothing) | CPU per call | "
        "SearchHistory / GetPromptContext p50 under appends | cross-process pairs/s, stale |"
    )
    print("|---|---|---|---|---|")
    _row("workers", r, ("worker_throughput",), lambda: print_workers(r["worker_throughput"]))
    print("\n| measure | memoryd | baseline or target |")
    print("|---|---|---|")
    for backend in BACKENDS:
        name = f"retrieval_quality.{backend}"

        def show(name: str = name, backend: str = backend) -> None:
            print_quality(r[name], backend)

        _row(f"retrieval quality on {backend}", r, (name,), show)
    ran = [name for name, found in r.items() if not ({"failed", "skipped"} & found.keys())]
    print(f"\nran: {len(ran)} of {len(r)}; failed: {', '.join(failures(r)) or 'none'}")


def print_quality(found: Any, backend: str) -> None:
    """Recall@5 and @10 of each mode on each half of LoCoMo and on BEAM, side by side (a ranking
    rule is kept only if it gains on more than one set); and how often questions about nothing
    stored get nothing."""
    sets = [
        name
        for name in ("LoCoMo 1-5", "LoCoMo 6-10", "BEAM 100K")
        if name in found.get("memoryd hybrid", {})
    ]
    for name in ("memoryd hybrid", "memoryd lexical", "memoryd semantic"):
        if name not in found:
            continue
        row = "; ".join(
            f"{part} {found[name][part]['5']} / **{found[name][part]['10']}**" for part in sets
        )
        print(
            f"| recall@5 / @10, {name} on {backend} | {row} | LoCoMo: DRAGON 56.7 / 66.2, "
            "target hybrid 80 at @10 |"
        )
    for name, empty in found.get("off-topic (empty answers)", {}).items():
        if isinstance(empty, dict):
            print(
                f"| questions about nothing stored answered with nothing, {name} on "
                f"{backend} | **{empty['all']}** | |"
            )


def print_workers(workers: Any) -> None:
    """`serve --workers N` beside a do-nothing server of as many processes."""
    for section, found in workers.items():
        if not section.startswith("workers_"):
            continue
        for backend in BACKENDS:
            row = found.get(backend)
            if row is None:
                continue
            loaded = row["under_append_load"]
            print(
                f"| {section.removeprefix('workers_')}, {backend} | {row['rps']} "
                f"({row['ratio_of_medians']}) | {row['cpu_us_per_call']} us "
                f"(do-nothing {found['baseline_cpu_us_per_call']} us) | "
                f"{loaded['search_history']['p50_ms']} / "
                f"{loaded['get_prompt_context']['p50_ms']} ms | "
                f"{row['coherence']['pairs_per_second']}, {row['coherence']['stale']} |"
            )


def print_backends(r: dict[str, Any]) -> None:
    """SQLite and PostgreSQL side by side, with the targets PostgreSQL is held to."""
    sqlite, postgres = r["append_throughput"]["memoryd"], r["append_throughput"]["memoryd_postgres"]
    print(
        f"| AppendMessages, ratio to a do-nothing server (CPU per call) | "
        f"{sqlite['ratio_of_medians']} ({sqlite['cpu_us_per_call']} µs) | "
        f"{postgres['ratio_of_medians']} ({postgres['cpu_us_per_call']} µs) | "
        f"**{postgres['ratio_of_medians'] / sqlite['ratio_of_medians']:.2f}**, target >= 0.7 |"
    )
    print(
        f"| every acknowledged append committed | "
        f"{sqlite['every_acknowledged_row_committed']} | "
        f"{postgres['every_acknowledged_row_committed']} | |"
    )
    for label, name, key in (
        ("SearchHistory", "search_latency", "client_ms"),
        ("Recall", "recall_latency", "recall_client_ms"),
    ):
        one, other = r[f"{name}.sqlite"], r[f"{name}.postgres"]
        mine, theirs = one[key]["all"], other[key]["all"]
        print(
            f"| {label}, {one['messages']} messages, p50 / p99 at the client | {mine['p50']} / "
            f"{mine['p99']} ms | {theirs['p50']} / {theirs['p99']} ms | "
            f"p50 **{theirs['p50'] / mine['p50']:.2f}x**, target <= 2x |"
        )
    one = r["compose_latency.sqlite"]["python_client_ms"]
    other = r["compose_latency.postgres"]["python_client_ms"]
    print(
        f"| ComposeContext, p50 at the Python client | {one['compose_p50']} ms | "
        f"{other['compose_p50']} ms | {other['compose_p50'] / one['compose_p50']:.2f}x |"
    )
    one, other = r["ingest_throughput.sqlite"], r["ingest_throughput.postgres"]
    print(
        f"| IngestMessages (ratio to the raw driver's rate) | "
        f"{one['ingest_messages_per_second']} messages/s ({one['ratio']}) | "
        f"{other['ingest_messages_per_second']} messages/s ({other['ratio']}) | "
        f"{other['ingest_messages_per_second'] / one['ingest_messages_per_second']:.2f}x |"
    )


if __name__ == "__main__":
    sys.exit(main())
