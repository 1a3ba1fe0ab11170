"""Schema migrations: numbered plain SQL files, forward only, applied at start-up.

`migrations/NNNN_name.sql` files ship inside the package as `memoryd.migrations` (SQLite's) and
`memoryd.migrations.postgres` (PostgreSQL's, numbered on their own). Each pending file runs in
one transaction together with its row in schema_migrations, so a crash leaves either the old
schema or the new one; on PostgreSQL, an advisory lock held by that transaction makes a second
server starting at the same moment wait, then find the migration recorded. Re-running is a
no-op. A database that has a version this code does not know (newer code wrote it) or whose
applied file has changed since is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import re
from collections.abc import Iterable

from memoryd.domain.timestamps import to_text, utc_now
from memoryd.errors import StartupError
from memoryd.storage.sql import postgres, write_transaction
from memoryd.storage.transaction import Transaction

SQLITE_PACKAGE = "memoryd.migrations"
POSTGRES_PACKAGE = "memoryd.migrations.postgres"
# pg_advisory_xact_lock's key while a migration runs: "memoryd" in ASCII, as an integer.
MIGRATION_LOCK = 0x6D656D6F727964

FILE_PATTERN = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    checksum   TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""


@dataclasses.dataclass(frozen=True, slots=True)
class Migration:
    """One numbered SQL file."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """sha256 of the file's text: an applied migration must never change."""
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def bundled_migrations(package: str = SQLITE_PACKAGE) -> list[Migration]:
    """The migrations of one backend shipped with this version of memoryd, in order."""
    folder = importlib.resources.files(package)
    found = []
    for entry in folder.iterdir():
        match = FILE_PATTERN.fullmatch(entry.name)
        if match:
            found.append(
                Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8"))
            )
    return check_sequence(found)


def migration_sql(version: int) -> str:
    """The text of one bundled migration (some are written to be run again on data an import
    brought in the old shape)."""
    return bundled_migrations()[version - 1].sql


def check_sequence(migrations: Iterable[Migration]) -> list[Migration]:
    """Migrations must be numbered 1, 2, 3, ... with no gap or repeat."""
    ordered = sorted(migrations, key=lambda migration: migration.version)
    for expected, migration in enumerate(ordered, start=1):
        if migration.version != expected:
            raise StartupError(
                f"migrations are not numbered 1..n: expected {expected:04d}, "
                f"found {migration.version:04d}_{migration.name}.sql"
            )
    return ordered


def migrate(
    connection: Transaction, migrations: list[Migration], name: str | None = None
) -> list[int]:
    """Bring the database (`name` in messages: SQLite's file by default) up to the last of
    `migrations`; returns the versions applied."""
    name = name or str(getattr(connection, "filename", "the database"))
    _bookkeeping(connection)
    applied = {
        version: (name, checksum)
        for version, name, checksum in connection.execute(
            "SELECT version, name, checksum FROM schema_migrations"
        )
    }
    known = {migration.version: migration for migration in migrations}
    newer = sorted(set(applied) - set(known))
    if newer:
        raise StartupError(
            f"database {name} has schema version {newer[-1]}, newer than this "
            f"memoryd supports ({len(known)}); upgrade memoryd or use another --home"
        )
    for version, (name, checksum) in sorted(applied.items()):
        if known[version].checksum != checksum:
            raise StartupError(
                f"migration {version:04d}_{name}.sql was changed after it was applied to "
                f"{name}; write a new migration instead of editing an old one"
            )

    done = []
    for migration in migrations:
        if migration.version in applied:
            continue
        # BEGIN IMMEDIATE: if two servers start at once, the second waits and then finds the
        # migration recorded.
        with write_transaction(connection):
            if postgres(connection):
                connection.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            recorded = connection.execute(
                "SELECT 1 FROM schema_migrations WHERE version = ?", (migration.version,)
            ).fetchall()
            if recorded:
                continue
            connection.execute(migration.sql)
            connection.execute(
                "INSERT INTO schema_migrations (version, name, checksum, applied_at) "
                "VALUES (?, ?, ?, ?)",
                (migration.version, migration.name, migration.checksum, to_text(utc_now())),
            )
        done.append(migration.version)
    return done


def schema_version(connection: Transaction) -> int:
    """The highest applied migration, 0 for a new database."""
    if not postgres(connection):  # PostgreSQL's is made by migrate, before any read
        _bookkeeping(connection)
    row = connection.execute("SELECT max(version) FROM schema_migrations").fetchall()[0]
    return int(row[0] or 0)


def _bookkeeping(connection: Transaction) -> None:
    connection.execute(BOOKKEEPING + ("" if postgres(connection) else " STRICT"))
