"""What callers see when memoryd stops under load: SIGTERM (or SIGKILL) to a supervisor of two
workers while 48 callers store memories and clear their conversations without pause.

    python bench/drain_probe.py [--rounds 10] [--stop term|kill] [--bare]

Each round starts a server on a fresh data directory and runs memoryd.testing.drain's round:
the callers (6 connections, 8 callers on each) get 300 calls answered, the server is stopped,
and the statuses the callers saw are counted beside the calls the server answered OK. With the
generated client (the default), the target is 0 CANCELLED and as many OK seen as answered: a
call CANCELLED before it started is retried, and none is run twice. `--bare` uses channels
without the client's retry policy, to show what gRPC does without it (CANCELLED for the calls a
stopping server had not started).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import tempfile
from pathlib import Path

from memoryd.testing.drain import stop_under_load
from memoryd.testing.server_process import ServerProcess


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--stop", choices=("term", "kill"), default="term")
    parser.add_argument("--bare", action="store_true")
    arguments = parser.parse_args()
    stop = signal.SIGTERM if arguments.stop == "term" else signal.SIGKILL
    cancelled = rounds_with_cancelled = mismatched = 0
    with tempfile.TemporaryDirectory() as folder:
        for index in range(arguments.rounds):
            server = ServerProcess(Path(folder) / f"home-{index}", workers=2).start()
            done = await stop_under_load(server, stop, bare=arguments.bare)
            print(f"round {index + 1}: seen {done.seen}, answered OK by the server {done.answered}")
            cancelled += done.seen.get("CANCELLED", 0)
            rounds_with_cancelled += bool(done.seen.get("CANCELLED"))
            mismatched += done.seen.get("OK", 0) != done.answered
    print(
        f"{arguments.rounds} rounds: {cancelled} CANCELLED ({rounds_with_cancelled} rounds), "
        f"{mismatched} rounds where the OK seen and the OK answered differ"
    )


if __name__ == "__main__":
    asyncio.run(main())
