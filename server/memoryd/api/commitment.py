"""The calls memoryd commits to before it runs them: their response headers go out first.

A server that stops (SIGTERM, a worker's rolling restart, a supervisor's stop) cancels the calls
that had reached it but not yet started: gRPC kills them when its shutdown begins
(grpc/grpc#41785), and their clients see CANCELLED, as they would for a call cut after its write
committed. Nothing on the wire tells the two apart, so a client cannot safely send a write again.

So memoryd sends the response headers of every call that is not safe to repeat before it runs
it. Under gRPC's retry rules (gRFC A6) a call whose headers arrived is committed and never tried
again, and memoryd's clients try every unary call again on a CANCELLED without headers: such a
call never ran. A draining server then shows its clients no CANCELLED for a call they can send
again.

Calls safe to repeat go without: those the contract marks idempotent (idempotency_level
NO_SIDE_EFFECTS or IDEMPOTENT), and an AppendMessages whose every message carries a
client_message_id (the server stores each once). The headers cost one more frame per call,
which keyed appends never pay: at least 110 to 150 microseconds of the server's CPU a call, and
a sixth of the appends per second, measured under 32 appending callers
(bench/commit_headers_cost.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import MethodDescriptor

_IDEMPOTENT = frozenset(
    (descriptor_pb2.MethodOptions.NO_SIDE_EFFECTS, descriptor_pb2.MethodOptions.IDEMPOTENT)
)
APPEND_METHOD = "/memoryd.v2.ConversationService/AppendMessages"

# Whether one request of a method must be committed to (its headers sent) before it runs.
Commits = Callable[[Any], bool]


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
