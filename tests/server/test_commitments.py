"""The headers of a call not safe to repeat go out before a stop could cut it, and only then
(memoryd.api.commitment): the order of what a call sends, against a context that records it.
Through a real server: tests/server/test_drain.py."""

from __future__ import annotations

import asyncio

import pytest

from memoryd.api.commitment import Commitments


class Context:
    """What a gRPC servicer context does with the headers, recorded in `sent`."""

    def __init__(self, sent: list[str], *, ended: bool = False) -> None:
        self.sent = sent
        self.ended = ended

    async def send_initial_metadata(self, _metadata: object) -> None:
        await asyncio.sleep(0)  # the send is an operation on the call, awaited
        if self.ended:
            raise RuntimeError("the call has ended")  # what gRPC raises after the status
        self.sent.append("headers")


async def test_while_the_server_serves_a_call_runs_without_early_headers() -> None:
    sent: list[str] = []

    async def call() -> str:
        sent.append("ran")
        return "answer"

    assert await Commitments().run(Context(sent), call) == "answer"
    assert sent == ["ran"]


async def test_a_drain_sends_a_running_calls_headers_once_before_its_answer() -> None:
    commitments, sent = Commitments(), list[str]()
    running, release = asyncio.Event(), asyncio.Event()

    async def call() -> str:
        running.set()
        await release.wait()
        sent.append("answered")
        return "answer"

    answer = asyncio.ensure_future(commitments.run(Context(sent), call))
    await running.wait()
    draining = asyncio.ensure_future(commitments.drain())
    release.set()  # the call ends while its headers are being sent
    assert await answer == "answer"
    assert sent.count("headers") == 1  # sent before run() handed the answer over
    await draining
    assert sent.count("headers") == 1


async def test_a_call_that_comes_during_a_drain_gets_its_headers_before_it_runs() -> None:
    commitments, sent = Commitments(), list[str]()
    await commitments.drain()

    async def call() -> None:
        sent.append("ran")

    await commitments.run(Context(sent), call)
    assert sent == ["headers", "ran"]


async def test_a_failing_call_fails_after_its_headers_and_an_ended_call_needs_none() -> None:
    commitments, sent = Commitments(), list[str]()
    running = asyncio.Event()

    async def failing() -> None:
        running.set()
        await asyncio.sleep(0)
        raise ValueError("refused")

    async def ended() -> None:
        await asyncio.Event().wait()

    failed = asyncio.ensure_future(commitments.run(Context(sent), failing))
    gone = asyncio.ensure_future(commitments.run(Context([], ended=True), ended))
    await running.wait()
    await commitments.drain()  # the ended call's send fails: the drain goes on
    with pytest.raises(ValueError, match="refused"):
        await failed
    assert sent == ["headers"]
    gone.cancel()
