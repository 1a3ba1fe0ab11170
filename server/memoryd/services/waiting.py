"""Waiting for an event with a timeout, in a background loop that must stop when cancelled.

`asyncio.wait_for` on Python 3.11 swallows a cancellation that arrives in the same loop
iteration as the event it waits for: it returns the result instead of raising. A background
loop built on it (the review scheduler, the embedder) then runs on, and a stop that awaits it
hangs until the process is killed (seen once in CI: a review finished as the server stopped).
`asyncio.timeout` tells its own expiry from a cancellation and never loses the latter.
"""

from __future__ import annotations

import asyncio
import contextlib


async def wait_at_most(event: asyncio.Event, seconds: float) -> bool:
    """Wait until `event` is set or `seconds` pass; whether it is set. A cancellation is
    always raised."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
    return event.is_set()
