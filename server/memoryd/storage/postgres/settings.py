"""How memoryd reaches PostgreSQL ([memoryd.storage] backend = "postgres"), importable without
the driver: the runtime and the services name these settings whichever backend runs."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class PostgresSettings:
    """How to reach PostgreSQL, and the policy of every connection."""

    dsn: str = dataclasses.field(repr=False)  # may hold a password: never printed
    pool_size: int
    statement_timeout_ms: int

    @property
    def target(self) -> str:
        """The server and database, for messages: never the password."""
        import psycopg  # noqa: PLC0415 - the driver is imported only when it is used
        from psycopg import conninfo  # noqa: PLC0415

        try:
            parts = conninfo.conninfo_to_dict(self.dsn)
        except psycopg.ProgrammingError:
            return "PostgreSQL (an unreadable connection string)"
        host = str(parts.get("host") or "localhost")
        port = str(parts.get("port") or "5432")
        name = str(parts.get("dbname") or parts.get("user") or "")
        return f"PostgreSQL database {name!r} on {host}:{port}"
