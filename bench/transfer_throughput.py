"""(h) `memoryd export` / `memoryd import`: records/s of both, beside IngestMessages.

    python bench/transfer_throughput.py [--messages 100000]

An export file of 200 conversations and `--messages` corpus messages is written, then imported
into an empty server with the real CLI (`memoryd import`, timed from the command's start to its
end, so the CLI's own start-up and file reading count) and exported again (`memoryd export`);
the second export must equal the file byte for byte. The baseline, in the same run: the same
messages sent to another empty server with IngestMessages in batches of 1,000 (requests built
before the clock starts, as in bench/ingest_throughput.py). Reported: records/s of import and
export, messages/s of IngestMessages, the import's ratio to it, and the servers' peak RSS. No
target is set; an import does more per record (exact values compared when a row exists).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ingest_throughput import ingest_rate, messages, peak_rss_mb

from memoryd.testing.server_process import ServerProcess

STAMP = "2026-11-30T00:00:00.000000Z"


def line(document: dict[str, object]) -> str:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def export_file(path: Path, items: list[tuple[str, str]]) -> int:
    """Write an export of `items` (chat_id, content); returns the number of records."""
    chats = sorted({chat for chat, _ in items})
    lines = [line({"format": "memoryd-export", "version": 1, "agent_id": "", "owner_id": ""})]
    lines += [
        line(
            {
                "record": "conversation",
                "agent_id": "main",
                "owner_id": "default",
                "channel": "bench",
                "chat_id": chat,
                "thread_scope": "root",
                "window_start_id": 0,
                "window_started_at": None,
                "session_start_id": 0,
                "checkpoint_id": 0,
                "history_version": 1,
                "working_memory": "",
                "description": "",
                "peak_prompt_tokens": None,
                "context_window": None,
                "completed_turns": 0,
                "compaction_failed_at": None,
                "compaction_error": None,
                "created_at": STAMP,
            }
        )
        for chat in chats
    ]
    for number, (chat, text) in enumerate(items, start=1):
        lines.append(
            line(
                {
                    "record": "message",
                    "id": number,
                    "agent_id": "main",
                    "owner_id": "default",
                    "channel": "bench",
                    "chat_id": chat,
                    "thread_scope": "root",
                    "sender": "ada",
                    "role": "user",
                    "kind": "chat_message",
                    "content": text,
                    "metadata_json": "{}",
                    "trust": "operator",
                    "client_message_id": None,
                    "created_at": STAMP,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines) - 1


def timed_cli(server: ServerProcess, *args: str) -> float:
    """Seconds the CLI command took (it must succeed)."""
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "memoryd", *args, "--address", server.address],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args()
    items = messages(args.messages, random.Random(2031))
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        source = folder / "export.jsonl"
        records = export_file(source, items)
        target = ServerProcess(folder / "target").start()
        try:
            imported = timed_cli(target, "import", str(source))
            again = folder / "again.jsonl"
            exported = timed_cli(target, "export", str(again))
            identical = again.read_bytes() == source.read_bytes()
            transfer_rss = peak_rss_mb(target.process.pid)
        finally:
            target.stop()
        baseline = ServerProcess(folder / "baseline").start()
        try:
            ingested, _ = asyncio.run(ingest_rate(baseline.address, items, 1000, 1))
            ingest_rss = peak_rss_mb(baseline.process.pid)
        finally:
            baseline.stop()
    result = {
        "benchmark": "transfer_throughput",
        "records": records,
        "import_records_per_second": round(records / imported),
        "export_records_per_second": round(records / exported),
        "export_identical_to_the_file": identical,
        "ingest_messages_per_second": round(ingested),
        "import_to_ingest_ratio": round(records / imported / ingested, 3),
        "server_peak_rss_mb": {"transfer": round(transfer_rss, 1), "ingest": round(ingest_rss, 1)},
    }
    print(json.dumps(result, indent=2))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
