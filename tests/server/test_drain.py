"""A stopping server shows its clients no CANCELLED for a call they may send again.

gRPC kills the calls that reached a server but had not started when its shutdown begins
(grpc/grpc#41785). memoryd sends the headers of a call that is not safe to repeat before it runs
it (memoryd.api.commitment), and its clients try again a call CANCELLED before its headers.
"""

from __future__ import annotations

import asyncio
import collections
import signal
from pathlib import Path

import grpc
import pytest

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, user
from tests.review_helpers import review_config

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

ROUNDS = 3
CHANNELS = 6
CALLERS_PER_CHANNEL = 8


async def test_a_write_not_safe_to_repeat_gets_its_headers_before_it_runs(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    """ReviewNow waits for the model: its headers come while it runs."""
    server = start_server(tmp_path / "home", config=review_config(model, enabled=False)).start()
    conversation = md.Conversation(channel="t", chat_id="headers")
    async with md.connect(server.address) as channel:
        memory = md.MemoryServiceStub(channel)
        await append(memory, conversation, user("I moved to Lisbon last spring."))
        model.reply('{"operations": []}', delay_seconds=3)
        # Called as a stream, so that the headers reach the test as they come (a unary call
        # hands them over with the answer).
        review = channel.unary_stream(
            "/memoryd.v1.MemoryService/ReviewNow",
            request_serializer=md.ReviewNowRequest.SerializeToString,
            response_deserializer=md.ReviewNowResponse.FromString,
        )(md.ReviewNowRequest(conversation=conversation))
        await asyncio.wait_for(review.initial_metadata(), 2.5)
        assert not review.done()
        (answer,) = [response async for response in review]
        assert len(answer.reviews) == 1


async def _round(server: ServerProcess, stop: signal.Signals) -> tuple[collections.Counter, int]:
    """Callers storing memories and clearing their conversations through the generated client
    until `stop` ends the server; what they saw, and how many calls the server answered OK."""
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
                        )
                    )
                else:
                    await memory.ClearConversation(
                        md.ClearConversationRequest(conversation=conversation)
                    )
                seen["OK"] += 1
                if seen["OK"] >= 300:
                    busy.set()
            except grpc.aio.AioRpcError as error:
                seen[error.code().name] += 1
                await asyncio.sleep(0.05)

    channels = [
        md.connect(server.address, options=[("grpc.memoryd_connection", index)])
        for index in range(CHANNELS)
    ]
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
    return seen, answered


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill"])
async def test_a_stop_under_load_cancels_no_call_of_the_generated_client(
    start_server: type[ServerProcess], tmp_path: Path, stop: signal.Signals
) -> None:
    """SIGTERM to a supervisor of two workers (or its death: the kernel then sends its workers
    SIGTERM) while 48 callers write without pause: every call either answered OK or refused
    UNAVAILABLE (the server is gone), none CANCELLED, and the client saw exactly the calls the
    server ran."""
    for index in range(ROUNDS):
        server = start_server(tmp_path / f"home-{index}", workers=2).start()
        seen, answered = await _round(server, stop)
        assert set(seen) <= {"OK", "UNAVAILABLE"}, seen
        assert seen["OK"] == answered, (seen, answered)
