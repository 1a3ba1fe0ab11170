"""The machine-readable side of a refusal: google.rpc.Status details on every error status.

Each error of the tree (memoryd.errors) carries a Reason and, when one field of the request is at
fault, that field. The status sent to the client carries them in the `grpc-status-details-bin`
trailer, as every gRPC library reads it (grpcio-status's `rpc_status.from_call`, connect-es's
`ConnectError.findDetails`, grpc-go's `status.FromError(err).Details()`):
    google.rpc.ErrorInfo   always: `reason` (the slug), `domain` "memoryd", and `field` in its
                           metadata when there is one
    google.rpc.BadRequest  for INVALID_ARGUMENT naming a field: one FieldViolation (the field, the
                           reason, and the message as its description)
The status message stays the human one; programs branch on the reason, never on the text.
"""

from __future__ import annotations

from collections.abc import Mapping

from google.rpc.error_details_pb2 import BadRequest, ErrorInfo
from google.rpc.status_pb2 import Status

from memoryd.errors import Code, MemorydError, Reason

DOMAIN = "memoryd"
TRAILER = "grpc-status-details-bin"


def status_details(
    number: int,
    message: str,
    reason: Reason,
    *,
    field: str = "",
    invalid_argument: bool = False,
    metadata: Mapping[str, str] | None = None,
) -> bytes:
    """The serialized google.rpc.Status of a refusal with status `number` and `message`."""
    status = Status(code=number, message=message)
    info = ErrorInfo(reason=reason.value, domain=DOMAIN)
    info.metadata.update(metadata or {})
    if field:
        info.metadata["field"] = field
    status.details.add().Pack(info)
    if field and invalid_argument:
        violation = BadRequest.FieldViolation(field=field, description=message, reason=reason.value)
        status.details.add().Pack(BadRequest(field_violations=[violation]))
    return status.SerializeToString()


def of_error(number: int, message: str, error: MemorydError) -> bytes:
    """The details of one error of the tree, as its status carries them."""
    return status_details(
        number,
        message,
        error.reason,
        field=error.field,
        invalid_argument=error.code is Code.INVALID_ARGUMENT,
    )
