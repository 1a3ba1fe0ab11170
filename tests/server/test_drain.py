"""A stopping server shows its clients no CANCELLED for a call they may send again.

gRPC kills the calls that reached a server but had not started when its shutdown begins
(grpc/grpc#41785). memoryd sends the headers of a call that is not safe to repeat before a stop
could cut it (memoryd.api.commitment), and its clients try again a call CANCELLED before its
headers.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.drain import stop_under_load
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, user
from tests.review_helpers import eventually

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

ROUNDS = 3


async def test_a_running_write_not_safe_to_repeat_gets_its_headers_when_the_server_stops(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    """ReviewNow waits for the model. While the server serves, its headers would go with its
    answer; the server's stop sends them at once, before gRPC's shutdown could cut the call,
    and the call still answers within the grace period."""
    server = start_server(tmp_path / "home", config=review_config(model, enabled=False)).start()
    conversation = md.Conversation(channel="t", chat_id="headers")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await append(memory, conversation, user("I moved to Lisbon last spring."))
        model.reply('{"operations": []}', delay_seconds=6)
        # Called as a stream, so that the headers reach the test as they come (a unary call
        # hands them over with the answer).
        review = channel.unary_stream(
            "/memoryd.v2.ReviewService/ReviewNow",
            request_serializer=md.ReviewNowRequest.SerializeToString,
            response_deserializer=md.ReviewNowResponse.FromString,
        )(md.ReviewNowRequest(conversation=conversation))
        await eventually(lambda: len(model.requests) == 1)  # the call runs
        server.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(review.initial_metadata(), 5.0)
        assert not review.done()  # the model still holds the answer
        (answer,) = [response async for response in review]
        assert len(answer.reviews) == 1
    assert server.stop() == 0


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
        done = await stop_under_load(server, stop, bare=False)
        assert set(done.seen) <= {"OK", "UNAVAILABLE"}, done
        assert done.seen["OK"] == done.answered, done
