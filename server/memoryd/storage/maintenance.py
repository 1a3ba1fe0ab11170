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

from memoryd.domain.conversation import OwnerKey
from memoryd.storage.connection import SqliteConnection
from memoryd.storage.engine import engine_of
from memoryd.storage.sql import rows
from memoryd.storage.transaction import Transaction


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


class Unreadable(Exception):
    """The file is not a database SQLite can read (or not one at all); the text says why."""


def problems(connection: Transaction) -> list[str]:
    """What is wrong with a database, by its engine's checks: empty when it is healthy."""
    return engine_of(connection).problems(connection)


def counts(connection: Transaction) -> tuple[int, int]:
    """How many messages and memory rows the database holds."""
    return (
        int(rows(connection, "SELECT count(*) FROM messages")[0][0]),
        int(rows(connection, "SELECT count(*) FROM memories")[0][0]),
    )


def prompt_file_owners(connection: Transaction) -> list[OwnerKey]:
    """Every owner that has memory rows or a prompt file, in order."""
    found = rows(
        connection,
        "SELECT agent_id, owner_id FROM memories UNION SELECT agent_id, scope_id FROM resources "
        "WHERE resource_type IN ('user_md', 'memory_md') ORDER BY 1, 2",
    )
    return [OwnerKey(agent_id, owner_id) for agent_id, owner_id in found]


@contextlib.contextmanager
def snapshot(database: Path) -> Iterator[Transaction]:
    """A private copy of the database (a backup beside it, deleted afterwards), open read-write:
    FTS5 checks itself through an INSERT, which a read-only connection refuses and which on the
    live database would hold the server's writer up for as long as the check runs. A file
    SQLite cannot read raises Unreadable, from the copy or from any read in the block."""
    copy = database.with_name(f".check-{secrets.token_hex(4)}.db")
    try:
        backup(database, copy)
        connection = SqliteConnection(str(copy))
    except apsw.Error as error:
        _remove(copy)
        raise Unreadable(str(error)) from error
    try:
        yield connection
    except apsw.Error as error:
        raise Unreadable(str(error)) from error
    finally:
        connection.close()
        _remove(copy)


def _remove(copy: Path) -> None:
    for leftover in (copy, Path(f"{copy}-wal"), Path(f"{copy}-shm")):
        with contextlib.suppress(OSError):
            leftover.unlink()
