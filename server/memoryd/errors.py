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


class MemorydError(Exception):
    """Base of every error a caller may see; its message is shown to the caller verbatim."""

    code: ClassVar[Code] = Code.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(MemorydError):
    """The request is malformed or breaks a documented limit. Nothing was written."""

    code = Code.INVALID_ARGUMENT


class NotFound(MemorydError):
    """The named thing does not exist, or is not visible to this caller."""

    code = Code.NOT_FOUND


class Unauthenticated(MemorydError):
    """Tokens are configured and the call carries none that is valid."""

    code = Code.UNAUTHENTICATED


class PermissionDenied(MemorydError):
    """The caller is known but may not do this (a guest writing a directive, a job reading
    history)."""

    code = Code.PERMISSION_DENIED


class FailedPrecondition(MemorydError):
    """The request is valid but the system is not in a state to carry it out."""

    code = Code.FAILED_PRECONDITION


class ResourceExhausted(MemorydError):
    """A configured capacity is reached."""

    code = Code.RESOURCE_EXHAUSTED


class Unavailable(MemorydError):
    """A transient failure: the caller may retry later."""

    code = Code.UNAVAILABLE


class StartupError(Exception):
    """The server cannot start; the message says why and what to do."""
