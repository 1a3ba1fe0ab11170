"""Schema migrations: one numbered line of plain SQL files for both engines, forward only,
applied at start-up.

The files ship inside the package as `memoryd.migrations`. `NNNN_name.sql` is a migration both
engines run; where they differ, version NNNN has one file per engine instead,
`NNNN_name.sqlite.sql` and `NNNN_name.postgres.sql`. An engine's line may begin later than 1:
PostgreSQL's begins at 0014 (`0014_schema.postgres.sql` makes everything SQLite's 0001-0014
made, as PostgreSQL came after them), and from there every version has a file for it.

Each pending file runs in one transaction together with its row in schema_migrations, so a
crash leaves either the old schema or the new one; the engine's migration lock, held by that
transaction, makes a second server starting at the same moment wait, then find the migration
recorded. Re-running is a no-op. A database that has a version this code does not know (newer
code wrote it) or whose applied file has changed since is refused.

Before the line was one, PostgreSQL numbered its own files from 1: such a database's records
move, once, to the line's numbers (`_one_line`), their files and checksums unchanged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import re
from collections.abc import Iterable

from memoryd.domain.timestamps import to_text, utc_now
from memoryd.errors import StartupError
from memoryd.storage.engine import engine_of
from memoryd.storage.sql import one, write_transaction
from memoryd.storage.transaction import Transaction

PACKAGE = "memoryd.migrations"
# NNNN_name.sql (both engines) or NNNN_name.<engine>.sql (one engine's).
FILE_PATTERN = re.compile(r"(\d{4})_([a-z0-9_]+)(?:\.([a-z]+))?\.sql")
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


def bundled_migrations(engine: str = "sqlite") -> list[Migration]:
    """The migrations `engine` (an Engine's name) runs, shipped with this version of memoryd, in
    order: from its first file to the line's last, with no gap."""
    files = {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in importlib.resources.files(PACKAGE).iterdir()
        if entry.name.endswith(".sql")
    }
    return migration_line(files, engine)


def migration_line(files: dict[str, str], engine: str) -> list[Migration]:
    """The migrations `engine` runs of these files (by name, with their text): each version's
    shared file or the engine's own; the line numbered 1..n, and the engine's part of it from
    its first file to n."""
    line: set[int] = set()
    shared: dict[int, Migration] = {}
    own: dict[int, Migration] = {}
    for file_name, text in files.items():
        match = FILE_PATTERN.fullmatch(file_name)
        if not match:
            raise StartupError(f"{file_name} is not named NNNN_name.sql or NNNN_name.<engine>.sql")
        version, name, only = int(match.group(1)), match.group(2), match.group(3)
        line.add(version)
        if only is None:
            shared[version] = Migration(version, name, text)
        elif only == engine:
            own[version] = Migration(version, name, text)
    both = sorted(shared.keys() & own.keys())
    if both:
        raise StartupError(
            f"migration {both[0]:04d} has a file for both engines and one for {engine} alone"
        )
    check_sequence(Migration(version, "", "") for version in line)
    mine = {**shared, **own}
    return check_sequence(mine.values(), start=min(mine, default=1), end=max(line, default=0))


def latest_version() -> int:
    """The last version of the line: what a database is migrated to, on either engine."""
    return bundled_migrations()[-1].version


def check_sequence(
    migrations: Iterable[Migration], *, start: int = 1, end: int | None = None
) -> list[Migration]:
    """Migrations must be numbered start, start + 1, ... (up to `end`, when given) with no gap
    or repeat."""
    ordered = sorted(migrations, key=lambda migration: migration.version)
    for expected, migration in enumerate(ordered, start=start):
        if migration.version != expected:
            raise StartupError(
                f"migrations are not numbered {start}..n: expected {expected:04d}, "
                f"found {migration.version:04d}_{migration.name}.sql"
            )
    if end is not None and (ordered[-1].version if ordered else start - 1) != end:
        raise StartupError(f"the migrations end before {end:04d}, the line's last")
    return ordered


def migrate(
    connection: Transaction, migrations: list[Migration], name: str | None = None
) -> list[int]:
    """Bring the database (`name` in messages: SQLite's file by default) up to the last of
    `migrations`; returns the versions applied."""
    name = name or str(getattr(connection, "filename", "the database"))
    _bookkeeping(connection)
    applied = _applied(connection)
    if migrations and applied and min(applied) < migrations[0].version:
        _one_line(connection, migrations[0].version)
        applied = _applied(connection)
    known = {migration.version: migration for migration in migrations}
    newer = sorted(set(applied) - set(known))
    if newer:
        raise StartupError(
            f"database {name} has schema version {newer[-1]}, newer than this "
            f"memoryd supports ({max(known, default=0)}); upgrade memoryd or use another --home"
        )
    for version, (file_name, checksum) in sorted(applied.items()):
        if known[version].checksum != checksum:
            raise StartupError(
                f"migration {version:04d}_{file_name}.sql was changed after it was applied to "
                f"{name}; write a new migration instead of editing an old one"
            )

    done = []
    for migration in migrations:
        if migration.version in applied:
            continue
        # If two servers start at once, the second waits and then finds the migration recorded.
        with write_transaction(connection):
            engine_of(connection).lock_migrations(connection)
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
    if not engine_of(connection).has_table(connection, "schema_migrations"):
        return 0
    row = connection.execute("SELECT max(version) FROM schema_migrations").fetchall()[0]
    return int(row[0] or 0)


def _applied(connection: Transaction) -> dict[int, tuple[str, str]]:
    """The migrations recorded: (name, checksum) by version."""
    return {
        version: (name, checksum)
        for version, name, checksum in connection.execute(
            "SELECT version, name, checksum FROM schema_migrations"
        )
    }


def _one_line(connection: Transaction, first: int) -> None:
    """An engine whose files begin at `first` numbered them from 1 before the line was one: a
    database it migrated then records 1, 2, ... for first, first + 1, ...; those records move
    to the line's numbers (the files, and so their checksums, are the same). Read again under
    the migration lock: a server starting at the same moment may have moved them first."""
    with write_transaction(connection):
        engine_of(connection).lock_migrations(connection)
        lowest = one(connection, "SELECT min(version) FROM schema_migrations")[0]
        if lowest is not None and lowest < first:
            connection.execute("UPDATE schema_migrations SET version = version + ?", (first - 1,))


def _bookkeeping(connection: Transaction) -> None:
    connection.execute(BOOKKEEPING + engine_of(connection).bookkeeping_options)
