"""WAL checkpoints run off the commit path (memoryd.storage.checkpoints), on real SQLite files."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import pytest

from memoryd.storage.checkpoints import Checkpointer
from memoryd.storage.connection import (
    ConnectionSettings,
    SqliteConnection,
    checkpoint_policy,
    open_connection,
    writer_policy,
)
from memoryd.storage.database import Database
from memoryd.storage.transaction import Transaction
from memoryd.storage.write_terms import WriterSettings
from tests.review_helpers import eventually

PAGE = 4096
# Each commit writes one row of this many bytes: more than a page of the WAL.
ROW_BYTES = 2 * PAGE


@pytest.fixture
def settings(tmp_path: Path) -> ConnectionSettings:
    return ConnectionSettings(
        path=tmp_path / "c.db", busy_timeout_ms=20, synchronous="normal", secure_delete=False
    )


def writing(settings: ConnectionSettings) -> SqliteConnection:
    connection = open_connection(settings, writer_policy(settings))
    connection.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL) STRICT")
    return connection


def commit_rows(connection: apsw.Connection, count: int) -> None:
    for _ in range(count):
        with connection:
            connection.execute("INSERT INTO blobs (body) VALUES (randomblob(?))", (ROW_BYTES,))


def wal_bytes(settings: ConnectionSettings) -> int:
    wal = Path(f"{settings.path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_a_watched_connection_never_checkpoints_in_its_commits(
    settings: ConnectionSettings,
) -> None:
    connection = writing(settings)
    connection.execute("PRAGMA wal_autocheckpoint = 10")
    commit_rows(connection, 30)
    # SQLite's own checkpoint ran in those commits: the WAL started over, small.
    assert wal_bytes(settings) < 30 * ROW_BYTES
    checkpointer = Checkpointer(lambda: open_connection(settings, checkpoint_policy(settings)))
    checkpointer.watch(connection)  # not started: nothing checkpoints now
    commit_rows(connection, 100)
    assert wal_bytes(settings) > 100 * ROW_BYTES
    assert checkpointer.checkpoints == 0
    connection.close()


async def test_the_checkpointer_copies_the_wal_on_its_own_thread(
    settings: ConnectionSettings,
) -> None:
    connection = writing(settings)
    opened_on: list[str] = []

    def connect() -> apsw.Connection:
        opened_on.append(threading.current_thread().name)
        return open_connection(settings, checkpoint_policy(settings))

    checkpointer = Checkpointer(connect, pages=10)
    checkpointer.watch(connection)
    checkpointer.start()
    try:
        commit_rows(connection, 20)
        await eventually(lambda: checkpointer.last[1] > 0)
        assert opened_on == ["memoryd-checkpoint"]
        assert checkpointer.in_commits == 0
    finally:
        checkpointer.close()
        connection.close()
    assert not [t for t in threading.enumerate() if t.name == "memoryd-checkpoint"]
    reopened = SqliteConnection(str(settings.path))
    assert reopened.execute("SELECT count(*) FROM blobs").fetchall() == [(20,)]
    reopened.close()


def test_a_writer_that_never_pauses_still_gets_its_wal_started_over(
    settings: ConnectionSettings,
) -> None:
    connection = writing(settings)
    # Not started: as if the thread's checkpoints never caught up with the commits.
    checkpointer = Checkpointer(
        lambda: open_connection(settings, checkpoint_policy(settings)), pages=10, limit=40
    )
    checkpointer.watch(connection)
    commit_rows(connection, 300)
    assert checkpointer.in_commits >= 5
    # The WAL never held much more than the limit: it started over each time.
    assert wal_bytes(settings) < 50 * (PAGE + 24)
    connection.close()


async def test_the_writer_of_a_database_has_its_wal_checkpointed_while_it_writes(
    settings: ConnectionSettings,
) -> None:
    database = Database.open(settings)
    with database.transaction() as connection:
        connection.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    writer = database.writer(WriterSettings(512, 0.0, 3, 0.05))
    writer.start()
    assert [t for t in threading.enumerate() if t.name == "memoryd-checkpoint"]
    try:
        before = settings.path.stat().st_size

        def insert(connection: Transaction) -> None:
            connection.execute("INSERT INTO blobs (body) VALUES (randomblob(?))", (ROW_BYTES,))

        # 1,200 pages and more: past the mark. In WAL mode only a checkpoint grows the file.
        for _ in range(600):
            await writer.run("insert", insert)
        await eventually(lambda: settings.path.stat().st_size > before + 500 * PAGE)
    finally:
        await writer.close()
    assert not [t for t in threading.enumerate() if t.name == "memoryd-checkpoint"]
