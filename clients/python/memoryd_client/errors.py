"""What a refusal says to a program: its reason and the field at fault.

memoryd attaches google.rpc.ErrorInfo (and, for a bad argument, google.rpc.BadRequest) to every
error status. `error_details` reads them from an `grpc.RpcError` (the asyncio client's
`AioRpcError` too):

    try:
        await chat.append(md.user("ada", text))
    except grpc.RpcError as error:
        details = md.error_details(error)
        if details and details.reason == "VALUE_TOO_LONG":
            ...  # details.field says which: "messages[0].content"

Reasons are stable within v1 (the list is in docs/api.md); the message is for people and may
change.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import grpc
from google.rpc.error_details_pb2 import BadRequest, ErrorInfo
from google.rpc.status_pb2 import Status

TRAILER = "grpc-status-details-bin"


@dataclasses.dataclass(frozen=True, slots=True)
class ErrorDetails:
    """The machine-readable part of one refusal."""

    reason: str
    # The request field at fault, as the proto names it ("messages[2].content"); "" when none.
    field: str
    # ErrorInfo's metadata (the field again, or an INTERNAL error's log reference).
    metadata: dict[str, str]


def error_details(error: grpc.RpcError) -> ErrorDetails | None:
    """The details memoryd attached to `error`, or None when it carries none (an error raised
    by grpc itself: a deadline, an unreachable server)."""
    trailing = _trailing(error)
    raw = next((value for key, value in trailing if key == TRAILER), None)
    if not isinstance(raw, bytes):
        return None
    status = Status.FromString(raw)
    info, violations = ErrorInfo(), BadRequest()
    found = False
    for detail in status.details:  # Unpack is False for a detail of another type
        if detail.Unpack(info):
            found = True
        else:
            detail.Unpack(violations)
    if not found:
        return None
    field = info.metadata.get("field", "")
    if not field and violations.field_violations:
        field = violations.field_violations[0].field
    return ErrorDetails(reason=info.reason, field=field, metadata=dict(info.metadata))


def _trailing(error: Any) -> tuple[tuple[str, Any], ...]:
    method = getattr(error, "trailing_metadata", None)
    if method is None:
        return ()
    return tuple(method() or ())
