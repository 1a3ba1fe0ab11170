"""(h) `memoryd export` / `memoryd import`: records/s of both, beside IngestMessages.

    python bench/transfer_throughput.py [--messages 100000]

`--messages` corpus messages in 200 conversations are sent to an empty server with
IngestMessages in batches of 1,000 (requests built before the clock starts, as in
bench/ingest_throughput.py): that rate is the baseline. The server's data is then exported with
the real CLI (`memoryd export`, timed from the command's start to its end, so the CLI's own
start-up and file writing count), imported into another empty server (`memoryd import`) and
exported from there again; the two exports must be equal byte for byte. The fixture is made by
the code it measures, so it always has the current export format. Reported: records/s of import
and export, messages/s of IngestMessages, the import's ratio to it, and the servers' peak RSS.
No target is set; an import does more per record (exact values compared when a row exists).
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
        source, again = folder / "export.jsonl", folder / "again.jsonl"
        origin = ServerProcess(folder / "origin").start()
        try:
            ingested, _ = asyncio.run(ingest_rate(origin.address, items, 1000, 1))
            ingest_rss = peak_rss_mb(origin.process.pid)
            exported = timed_cli(origin, "export", str(source))
        finally:
            origin.stop()
        records = sum(1 for _ in source.open(encoding="utf-8")) - 1  # the header is no record
        target = ServerProcess(folder / "target").start()
        try:
            imported = timed_cli(target, "import", str(source))
            timed_cli(target, "export", str(again))
            identical = again.read_bytes() == source.read_bytes()
            transfer_rss = peak_rss_mb(target.process.pid)
        finally:
            target.stop()
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
