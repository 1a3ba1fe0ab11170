"""What every HTTP listener of a process may hold: its deadlines (`HttpLimits`) and one shared cap
on open connections (`ConnectionBudget`), set below the open-file limit (half of it, less a
reserve) so that gRPC, the database and the model always have descriptors
(memoryd.web.listener)."""

from __future__ import annotations

import contextlib
import dataclasses
import resource
from collections.abc import Callable

from memoryd.errors import StartupError

# Descriptors kept out of the HTTP budget whatever the limit: the database and its WAL, the log,
# the listening sockets, the model's and the embedder's files.
RESERVED_DESCRIPTORS = 64


# The fewest connections any limit leaves (a limit too low for this stops the start instead).
MIN_CONNECTIONS = 8


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class HttpLimits:
    """How long a connection may take over each part of a request (how many may be open is the
    process's `ConnectionBudget`)."""

    header_seconds: float = 10.0
    body_seconds: float = 30.0
    idle_seconds: float = 30.0


def open_file_limit() -> tuple[int, int]:
    """The process's open-file limit (soft, hard), after raising the soft one to the hard one:
    each connection is a descriptor, and a soft limit below the hard one only makes a busy
    server fail sooner. (Go's runtime does the same at start.)"""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
    return soft, hard


def half_the_room(soft_limit: int) -> int:
    """Half of the descriptors an open-file limit leaves after the reserve: HTTP's share; gRPC's
    listeners share the other half (memoryd.serving.grpc_limits)."""
    return (soft_limit - RESERVED_DESCRIPTORS) // 2


class ConnectionBudget:
    """The HTTP connections this process may hold open, across all its HTTP listeners: half of
    what the open-file limit leaves after a reserve, or `configured` when that is lower."""

    def __init__(self, cap: int, limit: int, *, configured: bool = False) -> None:
        self.cap = cap
        self.limit = limit
        self.configured = configured
        self.open = 0
        self._waiting: list[Callable[[], None]] = []

    @classmethod
    def for_process(cls, configured: int = 0) -> ConnectionBudget:
        """The budget under this process's open-file limit (raised to its hard limit first)."""
        soft, _hard = open_file_limit()
        room = half_the_room(soft)
        if room < MIN_CONNECTIONS:
            raise StartupError(
                f"the open-file limit is {soft}: too low to serve HTTP beside gRPC (at least "
                f"{RESERVED_DESCRIPTORS + 2 * MIN_CONNECTIONS}; raise it with ulimit -n)"
            )
        if 0 < configured < room:
            return cls(configured, soft, configured=True)
        return cls(room, soft)

    def take(self) -> bool:
        """Take a connection's place; False at the cap."""
        if self.open >= self.cap:
            return False
        self.open += 1
        return True

    def give_back(self) -> None:
        """A connection closed: its place goes to a listener waiting for one."""
        self.open -= 1
        if self._waiting:
            self._waiting.pop(0)()

    def wait(self, resume: Callable[[], None]) -> None:
        """Call `resume` once a place is free."""
        self._waiting.append(resume)

    def describe(self) -> str:
        """For the start-up log: the cap and where it comes from."""
        if self.configured:
            return f"at most {self.cap:,} HTTP connections open at once (max_connections)"
        return (
            f"at most {self.cap:,} HTTP connections open at once (half of the open-file limit "
            f"of {self.limit:,}, less {RESERVED_DESCRIPTORS}: gRPC and the database keep the rest)"
        )
