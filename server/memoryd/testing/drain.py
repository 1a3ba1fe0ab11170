"""A server stopped under load, as its callers see it: the round that tests/server/test_drain.py
asserts on and bench/drain_probe.py repeats.

Callers (6 connections, 8 on each) store memories and clear their conversations without pause;
once 300 calls are answered the server gets `stop` (SIGTERM, or SIGKILL to a supervisor, whose
workers the kernel then sends SIGTERM). The round ends when the process has exited and every
caller has seen that: what they saw, by status, and how many calls the server answered OK (its
RPC log).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import signal

import grpc

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.server_process import ServerProcess

CHANNELS = 6
CALLERS_PER_CHANNEL = 8
CALLS_BEFORE_THE_STOP = 300
# Each call's deadline: well past the server's grace period (10 s by default), so that how a call
# ends during a stop is the server's doing, never the client's clock on a loaded machine.
CALL_DEADLINE_SECONDS = 40.0


@dataclasses.dataclass(frozen=True, slots=True)
class Round:
    """What the callers saw, by status name, and the calls the server answered OK."""

    seen: dict[str, int]
    answered: int


def _channel(address: str, index: int, *, bare: bool) -> grpc.aio.Channel:
    option = ("grpc.memoryd_connection", index)  # one connection per channel
    if bare:
        return grpc.aio.insecure_channel(address, options=[("grpc.enable_retries", 0), option])
    return md.connect(address, options=[option])


async def _write(api: md.Stubs, conversation: md.Conversation, number: int) -> None:
    """A StoreMemory or a ClearConversation."""
    if number % 2:
        await api.memory.StoreMemory(
            md.StoreMemoryRequest(
                conversation=conversation,
                key=f"k{number}",
                value="v",
                category=md.CATEGORY_PREFERENCE,
            ),
            timeout=CALL_DEADLINE_SECONDS,
        )
    else:
        await api.conversations.ClearConversation(
            md.ClearConversationRequest(conversation=conversation), timeout=CALL_DEADLINE_SECONDS
        )


async def stop_under_load(server: ServerProcess, stop: signal.Signals, *, bare: bool) -> Round:
    """One round against a started `server`; `bare`: channels without the generated client's
    retry policy, to see what gRPC alone does."""
    seen: collections.Counter[str] = collections.Counter()
    busy = asyncio.Event()
    running = True

    async def caller(channel: grpc.aio.Channel, name: str) -> None:
        api = md.Stubs(channel)
        conversation = md.Conversation(channel="drain", chat_id=name)
        number = 0
        while running:
            number += 1
            try:
                await _write(api, conversation, number)
            except grpc.aio.AioRpcError as error:
                seen[error.code().name] += 1
                await asyncio.sleep(0.05)
                continue
            seen["OK"] += 1
            if seen["OK"] >= CALLS_BEFORE_THE_STOP:
                busy.set()

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
    return Round(dict(seen), answered)
