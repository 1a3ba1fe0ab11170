"""Where the configured store is: SQLite's file in the data directory, or PostgreSQL's server.
The settings of one or the other name the engine (memoryd.storage.engine.engine_for)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from memoryd.config.secret_files import read_secret_file
from memoryd.config.serving_settings import StorageSettings
from memoryd.data_directory import DATABASE_FILE
from memoryd.errors import StartupError
from memoryd.storage.connection import ConnectionSettings
from memoryd.storage.postgres.settings import PostgresSettings

# Where the database is: SQLite's file and policy, or PostgreSQL's connection string and policy.
DatabaseLocation = ConnectionSettings | PostgresSettings


def store_settings(
    storage: StorageSettings, home: Path, env: Mapping[str, str]
) -> DatabaseLocation:
    """Where the configured database is: SQLite's file in the data directory, or PostgreSQL's
    connection string (from dsn, or the variable dsn_env names)."""
    if storage.backend == "postgres":
        dsn = storage.dsn or env.get(storage.dsn_env, "")
        if not dsn:
            raise StartupError(
                f"memoryd.storage.dsn_env names {storage.dsn_env}, which is not set (or empty); "
                "set it to PostgreSQL's connection string"
            )
        if storage.password_file:
            dsn = with_password(
                dsn, read_secret_file(storage.password_file, "memoryd.storage.password_file")
            )
        return PostgresSettings(
            dsn=dsn, pool_size=storage.pool_size, statement_timeout_ms=storage.statement_timeout_ms
        )
    return ConnectionSettings(
        path=home / DATABASE_FILE,
        busy_timeout_ms=storage.busy_timeout_ms,
        synchronous=storage.synchronous,
        secure_delete=storage.secure_delete,
    )


def with_password(dsn: str, password: str) -> str:
    """The connection string with this password (in place of any it had), in libpq's keyword
    form; StartupError when libpq cannot read the string."""
    from psycopg import conninfo  # noqa: PLC0415 - PostgreSQL's driver, only when it is used

    try:
        return conninfo.make_conninfo(dsn, password=password)
    except Exception:  # noqa: BLE001 - psycopg's ProgrammingError: its message quotes the string
        raise StartupError(
            "memoryd.storage.dsn (or the variable dsn_env names) cannot be read as a "
            "connection string"
        ) from None
