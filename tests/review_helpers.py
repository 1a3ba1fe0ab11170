"""Servers configured with the fake model, and helpers for the reviewer tests.

review_config (the config of such a server) lives in memoryd.testing.configs, for the benchmarks
too; it is imported here for the tests."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from tests.helpers import Serving, fresh_conversation
from tests.in_process import ServedInProcess


@pytest.fixture
def model() -> Iterator[FakeModel]:
    """A fake chat-completions server."""
    with FakeModel() as fake:
        yield fake


class Reviewing:
    """A started server and its stub."""

    def __init__(self, server: Serving, channel: grpc.aio.Channel) -> None:
        self.server = server
        self.channel = channel
        self.memory = md.Stubs(channel)


@pytest.fixture
async def reviewing(tmp_path: Path, model: FakeModel) -> AsyncIterator[Reviewing]:
    """memoryd's services in this process (tests/in_process.py), configured with no background
    review (enabled = false): tests run reviews with ReviewNow."""
    server = ServedInProcess(tmp_path / "home", config=review_config(model, enabled=False))
    server.start()
    try:
        async with md.connect(server.address) as channel:
            yield Reviewing(server, channel)
    finally:
        server.stop()


def turn(
    *texts: str, trust: md.Trust.ValueType = md.TRUST_UNSPECIFIED, **fields: Any
) -> list[md.NewMessage]:
    """User messages of one turn."""
    return [
        md.NewMessage(role=md.ROLE_USER, sender="ada", content=text, trust=trust, **fields)
        for text in texts
    ]


async def commit(
    memory: md.Stubs,
    conversation: md.Conversation,
    *messages: md.NewMessage,
    trust: md.Trust.ValueType = md.TRUST_UNSPECIFIED,
    echo: bool = False,
) -> md.CommitTurnResponse:
    """CommitTurn with these messages (the stored rows echoed when `echo`)."""
    return await memory.conversations.CommitTurn(
        md.CommitTurnRequest(
            conversation=conversation,
            messages=list(messages),
            trust=trust,
            echo_messages=echo,
        )
    )


async def review_now(memory: md.Stubs, conversation: md.Conversation) -> md.ConversationReview:
    """ReviewNow for one conversation; its result."""
    response = await memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=conversation))
    (result,) = response.reviews
    return result


async def eventually(check: Callable[[], object], within: float = 10.0) -> None:
    """Poll a check until it holds: a plain predicate, or a coroutine function."""
    deadline = time.monotonic() + within
    while True:
        outcome = check()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() > deadline:
            pytest.fail("condition not met in time")
        await asyncio.sleep(0.05)


async def after_a_scheduler_pass(memory: md.Stubs) -> None:
    """Return once the background scheduler has made a pass that began after this call.

    A fresh conversation (never reviewed, so due at once) is committed and waited for: every
    conversation that was due before it has been claimed by then. A test that checks that a
    conversation was *not* reviewed checks its state after this, instead of sleeping.
    """
    witness = fresh_conversation()
    await commit(memory, witness, *turn("a witness of the scheduler's pass"))

    async def reviewed() -> bool:
        state = await memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=witness))
        return state.HasField("last_run")

    await eventually(reviewed)
