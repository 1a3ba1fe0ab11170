"""A background loop that waits on an event with a timeout stops when cancelled, even when the
cancellation comes as the event is set (the review scheduler's and the embedder's loops)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import pytest

from memoryd.services.waiting import wait_at_most

Wait = Callable[[asyncio.Event], Awaitable[object]]


async def _loop_stops_when_cancelled(wait: Wait) -> bool:
    """Whether a loop waiting with `wait` ends when cancelled in the tick its event is set."""
    event = asyncio.Event()

    async def loop() -> None:
        while True:
            await wait(event)
            event.clear()

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)  # the loop is waiting now
    event.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1.0)
    if task not in done:
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
        return False
    return task.cancelled()


async def test_a_cancellation_as_the_event_is_set_stops_the_loop() -> None:
    assert await _loop_stops_when_cancelled(lambda event: wait_at_most(event, 10.0))


async def test_the_wait_ends_with_the_event_or_the_timeout() -> None:
    event = asyncio.Event()
    assert await wait_at_most(event, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_at_most(event, 10.0) is True


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 fixed asyncio.wait_for")
async def test_probe_wait_for_loses_that_cancellation_on_python_3_11() -> None:
    # Why wait_at_most exists: the same loop on asyncio.wait_for runs on after its cancellation.
    assert not await _loop_stops_when_cancelled(lambda event: asyncio.wait_for(event.wait(), 10.0))
