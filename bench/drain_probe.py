"""What callers see when memoryd stops under load: SIGTERM (or SIGKILL) to a supervisor of two
workers while 48 callers store memories and clear their conversations without pause.

    python bench/drain_probe.py [--rounds 10] [--stop term|kill] [--bare]

Each round starts a server on a fresh data directory, lets the callers (6 connections, 8 callers
on each) get 300 calls answered, stops the server and counts the statuses the callers saw, and
the calls the server answered OK (its RPC log). With the generated client (the default), the
target is 0 CANCELLED and as many OK seen as answered: a call CANCELLED before it started is
retried, and none is run twice. `--bare` uses channels without the client's retry policy, to
show what gRPC does without it (CANCELLED for the calls a stopping server had not started).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import signal
import tempfile
from pathlib import Path

import grpc

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.server_process import ServerProcess

CHANNELS = 6
CALLERS_PER_CHANNEL = 8
CALLS_BEFORE_THE_STOP = 300


def _channel(address: str, index: int, *, bare: bool) -> grpc.aio.Channel:
    option = ("grpc.memoryd_connection", index)  # one connection per channel
    if bare:
        return grpc.aio.insecure_channel(address, options=[("grpc.enable_retries", 0), option])
    return md.connect(address, options=[option])


async def one_round(home: Path, stop: signal.Signals, *, bare: bool) -> tuple[dict[str, int], int]:
    server = ServerProcess(home, workers=2).start()
    seen: collections.Counter[str] = collections.Counter()
    busy = asyncio.Event()
    running = True

    async def caller(channel: grpc.aio.Channel, name: str) -> None:
        memory = md.MemoryServiceStub(channel)
        conversation = md.Conversation(channel="drain", chat_id=name)
        number = 0
        while running:
            number += 1
            try:
                if number % 2:
                    await memory.StoreMemory(
                        md.StoreMemoryRequest(
                            conversation=conversation,
                            key=f"k{number}",
                            value="v",
                            category=md.CATEGORY_PREFERENCE,
                        ),
                        timeout=10,
                    )
                else:
                    await memory.ClearConversation(
                        md.ClearConversationRequest(conversation=conversation), timeout=10
                    )
                seen["OK"] += 1
                if seen["OK"] >= CALLS_BEFORE_THE_STOP:
                    busy.set()
            except grpc.aio.AioRpcError as error:
                seen[error.code().name] += 1
                await asyncio.sleep(0.05)

    channels = [_channel(server.address, index, bare=bare) for index in range(CHANNELS)]
    callers = [
        asyncio.ensure_future(caller(channel, f"c{index}-{number}"))
        for index, channel in enumerate(channels)
        for number in range(CALLERS_PER_CHANNEL)
    ]
    await busy.wait()
    server.process.send_signal(stop)
    await asyncio.get_running_loop().run_in_executor(None, server.process.wait)
    running = False
    await asyncio.gather(*callers)
    for channel in channels:
        await channel.close()
    server.stop()
    answered = sum(1 for line in server.events(Event.RPC) if line["status"] == "OK")
    return dict(seen), answered


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
            seen, answered = await one_round(
                Path(folder) / f"home-{index}", stop, bare=arguments.bare
            )
            print(f"round {index + 1}: seen {seen}, answered OK by the server {answered}")
            cancelled += seen.get("CANCELLED", 0)
            rounds_with_cancelled += bool(seen.get("CANCELLED"))
            mismatched += seen.get("OK", 0) != answered
    print(
        f"{arguments.rounds} rounds: {cancelled} CANCELLED ({rounds_with_cancelled} rounds), "
        f"{mismatched} rounds where the OK seen and the OK answered differ"
    )


if __name__ == "__main__":
    asyncio.run(main())
