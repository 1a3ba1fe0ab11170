"""The database as a file: online backups, and the checks a copy must pass (on a snapshot).

A backup copies the database through SQLite's backup API from a read-only connection, in one
step: it is the snapshot of one read transaction, taken while the server goes on writing (WAL),
so it holds every write committed before it began. It is written beside the target under a
temporary name (0600), synced, then renamed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import apsw

from memoryd.storage.scrub import FTS_INDEXES
from memoryd.storage.sql import rows


def backup(source: Path, target: Path) -> int:
    """Copy the database at `source` to `target` (replacing it); returns its size in bytes."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(descriptor)
    try:
        reader = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
        copy = apsw.Connection(str(temporary))
        try:
            with copy.backup("main", reader, "main") as step:
                step.step(-1)
        finally:
            copy.close()
            reader.close()
        with temporary.open("rb+") as handle:
            os.fsync(handle.fileno())
        temporary.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return target.stat().st_size


def problems(connection: apsw.Connection) -> list[str]:
    """What is wrong with a database: SQLite's integrity check, every word index's own check,
    and rows that refer to rows that are not there. Empty when it is healthy."""
    found = [
        f"integrity: {row[0]}"
        for row in rows(connection, "PRAGMA integrity_check")
        if row[0] != "ok"
    ]
    for index in FTS_INDEXES:
        try:
            connection.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")
        except apsw.Error as error:
            found.append(f"word index {index}: {error}")
    for table, rowid, parent, _ in rows(connection, "PRAGMA foreign_key_check"):
        found.append(f"orphaned row: {table} rowid {rowid} refers to a missing {parent} row")
    return found


@contextlib.contextmanager
def snapshot(database: Path) -> Iterator[apsw.Connection]:
    """A private copy of the database (a backup beside it, deleted afterwards), open read-write:
    FTS5 checks itself through an INSERT, which a read-only connection refuses and which on the
    live database would hold the server's writer up for as long as the check runs."""
    copy = database.with_name(f".check-{secrets.token_hex(4)}.db")
    backup(database, copy)
    connection = apsw.Connection(str(copy))
    try:
        yield connection
    finally:
        connection.close()
        for leftover in (copy, Path(f"{copy}-wal"), Path(f"{copy}-shm")):
            with contextlib.suppress(OSError):
                leftover.unlink()
