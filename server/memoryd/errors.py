"""The one error tree of memoryd. Every error a caller can see is one of these.

    MemorydError                      (never raised itself)
    ├── InvalidArgument               INVALID_ARGUMENT   bad input; nothing was written
    ├── NotFound                      NOT_FOUND          no such row visible to the caller
    ├── Unauthenticated               UNAUTHENTICATED    no valid bearer token (tokens are set)
    ├── PermissionDenied              PERMISSION_DENIED  the caller may not do this (trust, job)
    ├── FailedPrecondition            FAILED_PRECONDITION the system is not in a state to do it
    ├── ResourceExhausted             RESOURCE_EXHAUSTED a configured limit is reached
    └── Unavailable                   UNAVAILABLE        retry later (storage busy, shutting down)

    StartupError                      the server cannot start (bad config, schema too new, ...)

Each RPC-facing error declares its status as a `Code`; the api layer maps codes to gRPC statuses
in exactly one place (memoryd.api.status). This module imports nothing from grpc so the domain
and storage layers can raise these errors freely.

An error also carries a `Reason` (a stable slug a program can act on) and, when one field of the
request is at fault, that `field` (as the proto names it, `messages[2].content`). The status
carries both as details (google.rpc.ErrorInfo, and google.rpc.BadRequest for a bad argument);
the message stays prose for people, with no reason prefix. Each class has a default reason, so
a raise that names none still carries one.
"""

from __future__ import annotations

import enum
from typing import ClassVar


class Code(enum.Enum):
    """Status codes, named exactly like grpc.StatusCode members."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    UNAVAILABLE = "UNAVAILABLE"
    INTERNAL = "INTERNAL"


class Reason(enum.StrEnum):
    """Why a call was refused, for programs (google.rpc.ErrorInfo.reason). Stable: a reason is
    never renamed within v1; new ones may be added."""

    # INVALID_ARGUMENT
    INVALID_REQUEST = "INVALID_REQUEST"  # the default: the message says what is wrong
    REQUIRED = "REQUIRED"  # a required field is unset or empty
    VALUE_TOO_LONG = "VALUE_TOO_LONG"  # a text or list is over its documented limit
    BLANK = "BLANK"  # a text is empty once trimmed
    OUT_OF_RANGE = "OUT_OF_RANGE"  # a number is outside its documented range
    UNKNOWN_ENUM_VALUE = "UNKNOWN_ENUM_VALUE"  # an enum number the contract does not define
    INVALID_IDENTIFIER = "INVALID_IDENTIFIER"  # whitespace at an end, or control characters
    INVALID_PAGE_TOKEN = "INVALID_PAGE_TOKEN"  # noqa: S105 - a reason, not a secret; forged, stale, or from another listing
    # NOT_FOUND
    NOT_FOUND = "NOT_FOUND"
    # UNAUTHENTICATED
    NO_VALID_TOKEN = "NO_VALID_TOKEN"  # noqa: S105 - a reason, not a secret
    # PERMISSION_DENIED
    NOT_PERMITTED = "NOT_PERMITTED"  # the default
    OPERATOR_ONLY = "OPERATOR_ONLY"  # a command a guest may not give
    # FAILED_PRECONDITION
    PRECONDITION_FAILED = "PRECONDITION_FAILED"  # the default
    NO_MODEL_PROVIDER = "NO_MODEL_PROVIDER"  # reviews and compaction need a configured model
    READ_ONLY = "READ_ONLY"  # the server is in read-only mode
    # RESOURCE_EXHAUSTED
    LIMIT_REACHED = "LIMIT_REACHED"
    # UNAVAILABLE
    RETRY_LATER = "RETRY_LATER"  # the default: storage busy, or the server stopping
    # INTERNAL
    INTERNAL = "INTERNAL"


class MemorydError(Exception):
    """Base of every error a caller may see; its message is shown to the caller verbatim."""

    code: ClassVar[Code] = Code.INTERNAL
    default_reason: ClassVar[Reason] = Reason.INTERNAL

    def __init__(self, message: str, *, reason: Reason | None = None, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.field = field


class InvalidArgument(MemorydError):
    """The request is malformed or breaks a documented limit. Nothing was written."""

    code = Code.INVALID_ARGUMENT
    default_reason = Reason.INVALID_REQUEST


class NotFound(MemorydError):
    """The named thing does not exist, or is not visible to this caller."""

    code = Code.NOT_FOUND
    default_reason = Reason.NOT_FOUND


class Unauthenticated(MemorydError):
    """Tokens are configured and the call carries none that is valid."""

    code = Code.UNAUTHENTICATED
    default_reason = Reason.NO_VALID_TOKEN


class PermissionDenied(MemorydError):
    """The caller is known but may not do this (a guest writing a directive, a job reading
    history)."""

    code = Code.PERMISSION_DENIED
    default_reason = Reason.NOT_PERMITTED


class FailedPrecondition(MemorydError):
    """The request is valid but the system is not in a state to carry it out."""

    code = Code.FAILED_PRECONDITION
    default_reason = Reason.PRECONDITION_FAILED


class ResourceExhausted(MemorydError):
    """A configured capacity is reached."""

    code = Code.RESOURCE_EXHAUSTED
    default_reason = Reason.LIMIT_REACHED


class Unavailable(MemorydError):
    """A transient failure: the caller may retry later."""

    code = Code.UNAVAILABLE
    default_reason = Reason.RETRY_LATER


class StartupError(Exception):
    """The server cannot start; the message says why and what to do."""
