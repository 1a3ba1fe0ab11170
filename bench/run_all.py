"""Run every benchmark in one go and print the figures the README's performance section shows.

    make bench        # installs ghz, then runs this
    python bench/run_all.py [--quick]

Each benchmark prints its own JSON document; this collects them and prints a summary table.
The machine is shared and noisy: compare ratios and medians, not single absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
BACKENDS = ("sqlite", "postgres")


def run(script: str, *args: str) -> dict[str, object]:
    """Run one benchmark script and return its JSON result."""
    result = subprocess.run(
        [sys.executable, str(ROOT / script), *args], capture_output=True, text=True, check=True
    )
    document: dict[str, object] = json.loads(result.stdout)
    return document


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs, for a smoke check")
    parser.add_argument(
        "--locomo",
        default=os.environ.get("LOCOMO", ""),
        help="LoCoMo's data/locomo10.json (default $LOCOMO): runs bench/retrieval_quality.py",
    )
    args = parser.parse_args()
    append_args = ["--seconds", "4", "--rounds", "2"] if args.quick else ["--rounds", "5"]
    search_args = ["--messages", "20000", "--queries", "500"] if args.quick else []
    recall_args = (
        ["--messages", "50000", "--memories", "10000", "--queries", "500"] if args.quick else []
    )

    compose_args = ["--calls", "500", "--rounds", "1"] if args.quick else []
    ingest_args = ["--messages", "20000"] if args.quick else []

    # The benchmarks the storage backend matters to run on both, each pair in this one run:
    # SQLite's figures fill the main table, and the two sit side by side below it.
    append = run(
        "append_throughput.py", *append_args, "--backend", "sqlite", "--backend", "postgres"
    )
    searches = {b: run("search_latency.py", *search_args, "--backend", b) for b in BACKENDS}
    recalls = {b: run("recall_latency.py", *recall_args, "--backend", b) for b in BACKENDS}
    composes = {b: run("compose_latency.py", *compose_args, "--backend", b) for b in BACKENDS}
    ingests = {b: run("ingest_throughput.py", *ingest_args, "--backend", b) for b in BACKENDS}
    search, recall, compose, ingest = (
        searches["sqlite"],
        recalls["sqlite"],
        composes["sqlite"],
        ingests["sqlite"],
    )
    review = run("review_throughput.py", *(["--conversations", "200"] if args.quick else []))
    transcript = run("transcript_latency.py", *(["--seconds", "3"] if args.quick else []))
    transfer = run("transfer_throughput.py", *(["--messages", "20000"] if args.quick else []))
    hybrid = run(
        "hybrid_latency.py", *(["--messages", "20000", "--queries", "300"] if args.quick else [])
    )
    workers = run(
        "worker_throughput.py",
        *(["--seconds", "3", "--rounds", "1"] if args.quick else []),
        "--backend",
        "sqlite",
        "--backend",
        "postgres",
    )
    http_json = run("http_json.py", *(["--calls", "300"] if args.quick else []))
    observability = run(
        "observability_cost.py", *(["--rounds", "2", "--seconds", "3"] if args.quick else [])
    )
    console = run(
        "console_first_view.py",
        *(["--messages", "50000", "--memories", "5000", "--loads", "5"] if args.quick else []),
    )
    qualities = (
        {b: run("retrieval_quality.py", args.locomo, "--backend", b) for b in BACKENDS}
        if args.locomo
        else None
    )
    print(
        json.dumps(
            {
                "append_throughput": append,
                "search_latency": searches,
                "recall_latency": recalls,
                "review_throughput": review,
                "compose_latency": composes,
                "ingest_throughput": ingests,
                "transcript_latency": transcript,
                "transfer_throughput": transfer,
                "hybrid_latency": hybrid,
                "worker_throughput": workers,
                "http_json": http_json,
                "observability_cost": observability,
                "console_first_view": console,
                "retrieval_quality": qualities,
            },
            indent=2,
        )
    )

    client: Any = search["client_ms"]
    server: Any = search["server_ms"]
    appended: Any = append
    print(f"\nmachine: {platform.machine()}, Python {platform.python_version()}")
    print("| measure | memoryd | baseline or target |")
    print("|---|---|---|")
    on, off = appended["memoryd"], appended["embeddings_off"]
    print(
        f"| AppendMessages, 1 message per call, {appended['concurrency']} callers, median of "
        f"{appended['rounds']} rounds | {statistics.median(on['rps']):.0f} calls/s, "
        f"p50 {on['p50_ms']} ms, p99 {on['p99_ms']} ms (embeddings off: "
        f"{statistics.median(off['rps']):.0f} calls/s) | do-nothing "
        f"grpc.aio server: {statistics.median(appended['baseline_rps']):.0f} calls/s |"
    )
    print(
        f"| ratio of the medians | **{on['ratio_of_medians']}** (embeddings off "
        f"{off['ratio_of_medians']}) | at least 0.5 |"
    )
    print(
        f"| acknowledged appends committed | {on['every_acknowledged_row_committed']} "
        f"({on['acknowledged']} acknowledged, {on['committed_rows']} rows) | all |"
    )
    print(
        f"| SearchHistory, {search['messages']} messages, {search['queries']} queries | "
        f"p50 **{client['all']['p50']} ms**, p99 **{client['all']['p99']} ms** at the client; "
        f"p50 {server['p50']} ms, p99 {server['p99']} ms in the server | p50 < 5 ms, "
        f"p99 < 25 ms |"
    )
    recalled: Any = recall
    print(
        f"| Recall, {recalled['messages']} messages and {recalled['memories']} memory rows, "
        f"{recalled['queries']} queries | p50 **{recalled['recall_client_ms']['all']['p50']} ms**, "
        f"p99 **{recalled['recall_client_ms']['all']['p99']} ms** at the client; p50 "
        f"{recalled['recall_server_ms']['p50']} ms, p99 {recalled['recall_server_ms']['p99']} ms "
        "in the server | p50 < 5 ms, p99 < 30 ms |"
    )
    prompt: Any = recalled["prompt_context_ghz_ms"]
    health: Any = recalled["health_check_ghz_ms"]
    print(
        f"| GetPromptContext, one at a time (ghz) | p50 **{prompt['p50_ms']} ms** at the client "
        f"(p50 {recalled['prompt_context_server_ms']['p50']} ms in the server) | p50 < 1 ms; "
        f"grpc health check on the same server: p50 {health['p50_ms']} ms |"
    )
    reviewed: Any = review
    print(
        f"| background reviews, {reviewed['conversations']} due conversations, fake model "
        f"answering at once, concurrency {reviewed['concurrency']} | "
        f"{reviewed['reviews_per_second']} reviews/s; own time per review p50 "
        f"**{reviewed['own_ms']['p50']} ms**, p99 {reviewed['own_ms']['p99']} ms | "
        "own time p50 < 10 ms |"
    )
    composed: Any = compose
    floor: Any = composed["same_answer_from_a_do_nothing_server_ghz_ms"]
    python: Any = composed["python_client_ms"]
    print(
        f"| ComposeContext, {composed['messages']} messages, {composed['context_window']}-token "
        f"window ({composed['answer_bytes']} bytes), one at a time (ghz) | p50 "
        f"**{composed['compose_ghz_ms']['p50']} ms**, p99 {composed['compose_ghz_ms']['p99']} ms "
        f"(p50 {composed['compose_server_ms']['p50']} ms in the server; Python client p50 "
        f"{python['compose_p50']} ms) | health check p50 "
        f"{composed['health_check_ghz_ms']['p50']} ms (Python client {python['health_p50']} ms); "
        f"the same answer from a do-nothing server p50 {floor['p50']} ms |"
    )
    ingested: Any = ingest
    print(
        f"| IngestMessages, {ingested['messages']} messages in batches of {ingested['batch']}, "
        f"{ingested['streams']} streams | {ingested['ingest_messages_per_second']} messages/s "
        f"(server peak RSS {ingested['server_peak_rss_mb']} MB) | raw APSW into the same schema: "
        f"{ingested['raw_messages_per_second']} messages/s; ratio "
        f"**{ingested['ratio']}**, target at least 0.7 |"
    )
    spoken: Any = transcript
    print(
        f"| StreamTranscript, {spoken['streams']} streams, {spoken['target_rate']:.0f} finals/s "
        f"asked | {spoken['finals_per_second']} finals/s; acknowledgement p50 "
        f"{spoken['ack_ms']['p50']} ms, p99 **{spoken['ack_ms']['p99']} ms** (server peak RSS "
        f"{spoken['server_peak_rss_mb']} MB) | p99 < 20 ms at 1,000 finals/s |"
    )
    moved: Any = transfer
    print(
        f"| memoryd import / export, {moved['records']} records | import "
        f"{moved['import_records_per_second']} records/s, export "
        f"{moved['export_records_per_second']} records/s (identical: "
        f"{moved['export_identical_to_the_file']}) | IngestMessages of the same messages: "
        f"{moved['ingest_messages_per_second']} messages/s; ratio "
        f"{moved['import_to_ingest_ratio']} |"
    )
    searched: Any = hybrid
    for mode in ("lexical", "semantic", "hybrid"):
        print(
            f"| SearchHistory {mode}, one conversation of {searched['messages']} messages, "
            f"{searched['queries']} queries | p50 **{searched[mode]['all']['p50']} ms**, p99 "
            f"{searched[mode]['all']['p99']} ms at the client (query embedding included) | "
            "hybrid p50 <= 10 ms, p99 <= 30 ms |"
        )
    print_backends(append, searches, recalls, composes, ingests)
    print_workers(workers)
    for backend, found in (qualities or {}).items():
        for name in ("memoryd hybrid", "memoryd lexical", "memoryd semantic"):
            row = found[name]["all ten"]
            print(
                f"| LoCoMo recall@5 / @10, {name} on {backend} | {row['5']} / **{row['10']}** | "
                "DRAGON 56.7 / 66.2; target hybrid >= 60 / 72 |"
            )
    return 0


def print_workers(workers: Any) -> None:
    """`serve --workers N` beside a do-nothing server of as many processes."""
    print(
        "\n| workers, backend | appends/s (ratio to do-nothing) | CPU per call | "
        "SearchHistory / GetPromptContext p50 under appends | cross-process pairs/s, stale |"
    )
    print("|---|---|---|---|---|")
    for section, found in workers.items():
        if not section.startswith("workers_"):
            continue
        for backend in ("sqlite", "postgres"):
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


def print_backends(append: Any, searches: Any, recalls: Any, composes: Any, ingests: Any) -> None:
    """SQLite and PostgreSQL side by side, with the targets PostgreSQL is held to."""
    print("\n| measure | SQLite | PostgreSQL | PostgreSQL against SQLite |")
    print("|---|---|---|---|")
    sqlite, postgres = append["memoryd"], append["memoryd_postgres"]
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
    for name, found, key in (
        ("SearchHistory", searches, "client_ms"),
        ("Recall", recalls, "recall_client_ms"),
    ):
        sizes = found["sqlite"]["messages"]
        one, other = found["sqlite"][key]["all"], found["postgres"][key]["all"]
        print(
            f"| {name}, {sizes} messages, p50 / p99 at the client | {one['p50']} / "
            f"{one['p99']} ms | {other['p50']} / {other['p99']} ms | "
            f"p50 **{other['p50'] / one['p50']:.2f}x**, target <= 2x |"
        )
    one, other = composes["sqlite"]["python_client_ms"], composes["postgres"]["python_client_ms"]
    print(
        f"| ComposeContext, p50 at the Python client | {one['compose_p50']} ms | "
        f"{other['compose_p50']} ms | {other['compose_p50'] / one['compose_p50']:.2f}x |"
    )
    one, other = ingests["sqlite"], ingests["postgres"]
    print(
        f"| IngestMessages (ratio to the raw driver's rate) | "
        f"{one['ingest_messages_per_second']} messages/s ({one['ratio']}) | "
        f"{other['ingest_messages_per_second']} messages/s ({other['ratio']}) | "
        f"{other['ingest_messages_per_second'] / one['ingest_messages_per_second']:.2f}x |"
    )


if __name__ == "__main__":
    sys.exit(main())
