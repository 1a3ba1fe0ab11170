"""The calls memoryd commits to before a stopping server could cut them: their response headers.

A server that stops (SIGTERM, a worker's rolling restart, a supervisor's stop) cancels the calls
that had reached it but not yet started: gRPC kills them when its shutdown begins
(grpc/grpc#41785), and their clients see CANCELLED, as they would for a call cut after its write
committed. Nothing on the wire tells the two apart, so a client cannot safely send a write again.

So every call that is not safe to repeat has its response headers sent before a stop can cut
it. Under gRPC's retry rules (gRFC A6) a call whose headers arrived is committed and never tried
again, and memoryd's clients try every unary call again on a CANCELLED without headers: such a
call never ran. A stopping server then shows its clients no CANCELLED for a call they can send
again. `Commitments` sends them: while the server serves, a call runs without them (they go
with its answer, in the same frame); when the server starts to stop, before gRPC's shutdown
begins, `drain` sends the headers of every such call running, and each call that comes after
gets its headers before it runs. A call waits for headers being sent to it before it answers.

Calls safe to repeat need neither: those the contract marks idempotent (idempotency_level
NO_SIDE_EFFECTS or IDEMPOTENT), and an AppendMessages whose every message carries a
client_message_id (the server stores each once). Sending the headers of every unkeyed append
before it ran cost one more frame per call: at least 110 to 150 microseconds of the server's
CPU a call, and a sixth of the appends per second, under 32 appending callers
(bench/commit_headers_cost.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import MethodDescriptor

_IDEMPOTENT = frozenset(
    (descriptor_pb2.MethodOptions.NO_SIDE_EFFECTS, descriptor_pb2.MethodOptions.IDEMPOTENT)
)
APPEND_METHOD = "/memoryd.v2.ConversationService/AppendMessages"

# Whether one request of a method must be committed to (its headers sent) before a stop.
Commits = Callable[[Any], bool]
T = TypeVar("T")


def _always(_request: Any) -> bool:
    return True


def _unkeyed_append(request: Any) -> bool:
    """An AppendMessages that would store a message again if repeated (one without a key)."""
    return not request.messages or not all(m.client_message_id for m in request.messages)


def committed_first(methods: Iterable[MethodDescriptor]) -> dict[str, Commits]:
    """Every unary call of these methods that is not safe to repeat, by path, with the test of
    the requests that are not (memoryd.api.contract.routed gives memoryd.v1's paths theirs)."""
    found: dict[str, Commits] = {}
    for method in methods:
        if method.client_streaming or method.server_streaming:
            continue
        options = descriptor_pb2.MethodOptions.FromString(method.GetOptions().SerializeToString())
        if options.idempotency_level in _IDEMPOTENT:
            continue
        path = f"/{method.containing_service.full_name}/{method.name}"
        found[path] = _unkeyed_append if path == APPEND_METHOD else _always
    return found


class Commitments:
    """The calls not safe to repeat running in this process, whose headers `drain` sends."""

    def __init__(self) -> None:
        self._draining = False
        # Each running call's context, with the sending of its headers once a drain began.
        self._running: dict[int, tuple[Any, asyncio.Future[None] | None]] = {}

    async def run(self, context: Any, call: Callable[[], Awaitable[T]]) -> T:
        """`call()` (a handler's coroutine) for a call not safe to repeat: its headers first
        when the server is stopping; else with them sent by a drain that begins meanwhile,
        which the answer then waits for."""
        if self._draining:
            await context.send_initial_metadata(())
            return await call()
        key = id(context)
        self._running[key] = (context, None)
        try:
            return await call()
        finally:
            _, sending = self._running.pop(key)
            if sending is not None:
                await sending

    async def drain(self) -> None:
        """The server starts to stop: send the headers of every such call running now, and of
        each one that comes later before it runs."""
        self._draining = True
        for key, (context, _) in list(self._running.items()):
            self._running[key] = (context, asyncio.ensure_future(_headers(context)))
        await asyncio.gather(*(sending for _, sending in self._running.values() if sending))


async def _headers(context: Any) -> None:
    """A running call's headers; a call that ended or was cancelled meanwhile needs none."""
    with contextlib.suppress(Exception):
        await context.send_initial_metadata(())
