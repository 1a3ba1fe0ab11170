"""How many connections each gRPC listener holds, and how long one may stay without a call.

Without a cap, connections that never call (no token needed: a TCP connect is enough) take every
descriptor of the process; the database, the embedding model and the log then fail, and new
clients wait until their deadline. So every gRPC listener gets, from gRPC itself:

- **a cap** on open connections (`grpc.max_allowed_incoming_connections`): beyond it, a new
  connection is closed at once, and the client retries. The main port's cap comes from the
  open-file limit (raised to the hard limit first): of what is left after a reserve, HTTP has
  half (memoryd.web.budget.ConnectionBudget), the health port a small fixed share, the main
  port the rest. The health port has its own cap, so a flood there never reaches the main port.
- **a handshake deadline** (`grpc.server_handshake_timeout_ms`): TLS done and HTTP/2 opened
  within it, or the connection is closed. A connection that sends nothing holds its place for
  at most that long.
- **an idle deadline** (`grpc.max_connection_idle_ms`): no call in progress for that long, and
  the server says GOAWAY; a client connects again for its next call, without an error.

Connections already made keep working whatever the flood: their calls need no new descriptor.
"""

from __future__ import annotations

import dataclasses
import logging

from memoryd.config import ServerSettings
from memoryd.errors import StartupError
from memoryd.log_events import Event
from memoryd.web.budget import MIN_CONNECTIONS, RESERVED_DESCRIPTORS, half_the_room, open_file_limit

log = logging.getLogger("memoryd.server")

# The health port answers probes: a few connections at a time, each asking once.
HEALTH_MAX_CONNECTIONS = 64
HEALTH_HANDSHAKE_SECONDS = 5.0
HEALTH_IDLE_SECONDS = 30.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GrpcLimits:
    """One gRPC listener's cap and deadlines."""

    max_connections: int
    handshake_seconds: float
    idle_seconds: float

    def options(self) -> list[tuple[str, int]]:
        """The grpc.aio.server options that enforce these limits."""
        return [
            ("grpc.max_allowed_incoming_connections", self.max_connections),
            ("grpc.server_handshake_timeout_ms", round(self.handshake_seconds * 1000)),
            ("grpc.max_connection_idle_ms", round(self.idle_seconds * 1000)),
        ]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ListenerLimits:
    """The limits of the main port and of the health port, under one open-file limit."""

    main: GrpcLimits
    health: GrpcLimits
    open_file_limit: int
    configured: bool

    @classmethod
    def for_process(cls, server: ServerSettings) -> ListenerLimits:
        """The limits under this process's open-file limit (its soft limit raised to the hard
        one first); StartupError when that limit leaves too few connections to serve."""
        soft, _hard = open_file_limit()
        room = half_the_room(soft) - HEALTH_MAX_CONNECTIONS
        if room < MIN_CONNECTIONS:
            least = RESERVED_DESCRIPTORS + 2 * (HEALTH_MAX_CONNECTIONS + MIN_CONNECTIONS)
            raise StartupError(
                f"the open-file limit is {soft}: too low to serve gRPC beside the database "
                f"(at least {least}; raise it with ulimit -n or LimitNOFILE=)"
            )
        configured = 0 < server.max_connections < room
        return cls(
            main=GrpcLimits(
                max_connections=server.max_connections if configured else room,
                handshake_seconds=server.handshake_timeout_seconds,
                idle_seconds=server.idle_timeout_seconds,
            ),
            health=GrpcLimits(
                max_connections=HEALTH_MAX_CONNECTIONS,
                handshake_seconds=HEALTH_HANDSHAKE_SECONDS,
                idle_seconds=HEALTH_IDLE_SECONDS,
            ),
            open_file_limit=soft,
            configured=configured,
        )

    def log(self) -> None:
        """The start-up line: the caps, where they come from, and the deadlines."""
        source = (
            "max_connections"
            if self.configured
            else f"from the open-file limit of {self.open_file_limit:,}"
        )
        log.info(
            "gRPC: at most %s connections open at once (%s), %d on the health port; a handshake "
            "within %gs, connections without a call closed after %gs",
            f"{self.main.max_connections:,}",
            source,
            self.health.max_connections,
            self.main.handshake_seconds,
            self.main.idle_seconds,
            extra={
                "event": Event.GRPC_LIMITS,
                "max_connections": self.main.max_connections,
                "health_max_connections": self.health.max_connections,
                "open_file_limit": self.open_file_limit,
                "handshake_timeout_seconds": self.main.handshake_seconds,
                "idle_timeout_seconds": self.main.idle_seconds,
            },
        )
