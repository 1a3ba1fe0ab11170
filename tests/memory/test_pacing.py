"""The background embedder yields to the callers (memoryd.services.pacing): small steps with
rests while calls come, its full batch when none does, nothing while an import writes; every
call and every message of a stream counts as one, whatever the surface."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.domain.conversation import conversation_key
from memoryd.services.import_activity import ImportActivity
from memoryd.services.pacing import BUSY_CALLS, REST_FACTOR, CallerActivity, Pacing
from tests.helpers import acked, append, fresh_conversation, user
from tests.history.test_transcripts import PERSIST, device, opening, segment
from tests.in_process import ServedInProcess, use_cases
from tests.memory.test_backfill import said

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

EMBEDDED = '[memoryd.search]\nembeddings = "embedded"\nembedding_threads = 2\n'
KEY = conversation_key(
    agent_id="main", owner_id="ada", channel="chat", chat_id="pacing", thread_scope=""
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def calls(callers: CallerActivity, clock: Clock, count: int, seconds: float) -> None:
    """`count` calls spread evenly over the next `seconds`."""
    for _ in range(count):
        callers.called()
        clock.now += seconds / count


def busy(callers: CallerActivity) -> None:
    """Enough calls at once that the server counts as busy for at least half a second."""
    for _ in range(2 * BUSY_CALLS):
        callers.called()


def test_the_busy_rate_is_the_calls_of_the_last_second() -> None:
    clock = Clock()
    callers = CallerActivity(clock)
    assert not callers.busy  # no call yet
    calls(callers, clock, BUSY_CALLS - 5, 1.0)
    assert not callers.busy  # a steady rate just under the mark
    calls(callers, clock, BUSY_CALLS + 5, 1.0)
    assert callers.busy  # just over it, across a second of the clock
    calls(callers, clock, 1, 0.9)
    assert not callers.busy  # one call in the last 0.9 s
    clock.now = 2000.0
    callers.called()
    assert not callers.busy  # what came long before does not count


def test_steps_are_small_while_calls_come_and_full_when_few_do() -> None:
    clock = Clock()
    callers = CallerActivity(clock)
    paced = Pacing(ImportActivity(clock), callers, batch=64, small=2)
    calls(callers, clock, 10, 1.0)  # a console's polls
    assert paced.batch() == 64
    calls(callers, clock, 1000, 1.0)  # a busy server
    assert paced.batch() == 2
    clock.now += 1.01  # quiet since
    assert paced.batch() == 64


def test_an_endpoints_model_is_not_paced_by_calls_and_an_import_stops_every_step() -> None:
    clock = Clock()
    callers, imports = CallerActivity(clock), ImportActivity(clock)
    endpoint = Pacing(imports, callers, batch=64, small=None)
    busy(callers)
    assert endpoint.batch() == 64
    with imports.importing():
        assert endpoint.batch() == 0
        assert Pacing(imports, callers, batch=64, small=2).batch() == 0


async def test_the_rest_after_a_step_is_its_model_calls_time_and_only_while_calls_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    clock = Clock()
    callers = CallerActivity(clock)
    paced = Pacing(ImportActivity(clock), callers, batch=64, small=2, clock=clock)

    async def model_call() -> str:
        clock.now += 0.01  # what the model took
        return "vectors"

    monkeypatch.setattr(asyncio, "sleep", sleep)
    assert paced.batch() == 64
    assert await paced.timed(model_call()) == "vectors"
    await paced.rest()
    assert slept == []  # no caller: no rest
    assert paced.batch() == 64
    await paced.timed(model_call())
    busy(callers)  # calls came during a full batch
    await paced.rest()
    assert slept == []  # not three times a full batch: the next step is a small one
    assert paced.batch() == 2
    await paced.timed(model_call())
    clock.now += 5.0  # the step's reads and writes, waiting for the database
    busy(callers)
    await paced.timed(model_call())
    await paced.rest()
    assert slept == [pytest.approx(0.02 * REST_FACTOR)]
    assert paced.batch() == 2
    await paced.rest()  # no model call in that step
    assert slept[1:] == [0.0]
    unpaced = Pacing(ImportActivity(clock), callers, batch=64, small=None, clock=clock)
    assert unpaced.batch() == 64
    await unpaced.timed(model_call())
    await unpaced.rest()
    assert len(slept) == 2


async def test_the_embedded_model_takes_a_text_a_thread_while_calls_come(tmp_path: Path) -> None:
    async with use_cases(tmp_path / "home", config=EMBEDDED) as runtime:
        services = runtime.services

        async def pending() -> int:
            counts = (await services.embedding.status()).counts
            assert counts is not None
            return counts.pending_messages

        async def say_five() -> None:
            for part in range(5):
                await services.history.append(KEY, [said(f"the trip to Lisbon, part {part}")])
            assert await pending() == 5

        await say_five()
        assert await services.embedding.step()  # no call came: the whole batch
        assert await pending() == 0

        await say_five()
        busy(services.callers)
        assert await services.embedding.step()
        assert await pending() == 3  # two threads, a text each
        busy(services.callers)
        assert await services.embedding.step()
        assert await pending() == 1


async def test_each_call_and_each_message_of_a_stream_counts_as_a_caller(tmp_path: Path) -> None:
    served = ServedInProcess(tmp_path / "home", config=PERSIST).start()
    try:
        assert served.runtime is not None
        callers = served.runtime.services.callers
        async with md.connect(served.address) as channel:
            stub = md.Stubs(channel)
            before = callers.last
            await append(stub, fresh_conversation(), user("a unary call"))
            assert callers.last > before

            sent: asyncio.Queue[md.StreamTranscriptRequest] = asyncio.Queue()

            async def send() -> AsyncIterator[md.StreamTranscriptRequest]:
                while True:
                    yield await sent.get()

            call = stub.conversations.StreamTranscript(send())
            await sent.put(opening(device()))
            assert (await acked(call)).committed_seq == 0
            for seq in (1, 2):
                before = callers.last
                await sent.put(segment(seq, f"utterance {seq}"))
                assert (await acked(call)).committed_seq == seq
                assert callers.last > before  # the stream's message, not only its start
            call.cancel()
    finally:
        served.stop()
