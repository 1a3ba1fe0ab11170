"""Reading a request's body in an ASGI application: whole, bounded, and never a part of it.

A client that goes away before its body is whole (or is cut off at its deadline,
memoryd.web.listener) has sent no request: ASGI then delivers `http.disconnect`, which carries no
body and no `more_body`, so a reader that only looked at those would take the part received
for the whole and run it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class Disconnected(Exception):
    """The client left before its request's body was whole: nothing of it may run."""


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None once it passes `limit` bytes; Disconnected when the client
    left first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)
