"""Operating memoryd on PostgreSQL, whichever backend the rest of the suite runs on: `check`
finds invalid indexes and orphaned rows, `backup` and `restore` point to PostgreSQL's own tools,
an erasure is followed by a VACUUM and a rebuild of the word indexes (no page keeps the words),
a PostgreSQL that goes away and comes back costs calls an UNAVAILABLE, never a restart of
memoryd, and loses nothing acknowledged, and a large scope's nearest vectors come from the
model's HNSW index."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import numpy as np
import psycopg
import pytest

import memoryd_client as md
from memoryd.domain.conversation import ConversationKey
from memoryd.domain.vectors import quantise, to_blob
from memoryd.log_events import Event
from memoryd.storage import vector_reads, vector_store
from memoryd.storage.migrations import bundled_migrations, latest_version
from memoryd.storage.postgres.database import PostgresDatabase
from memoryd.storage.postgres.settings import PostgresSettings
from memoryd.storage.write_terms import WriterSettings
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.postgres import TemporaryPostgres, database_dsn
from memoryd.testing.server_process import ServerProcess
from tests.backends import heap_tuples
from tests.helpers import append, prompt_files_lock, rpc_error, run_memoryd, store, user
from tests.review.test_compaction import SUMMARY, WINDOW, WORDS, words
from tests.review_helpers import commit, eventually, turn

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

T = TypeVar("T")


def on_postgres(dsn: str) -> dict[str, str]:
    """The variables that put a server (or a CLI command) on the database `dsn`."""
    return {"MEMORYD_STORAGE_BACKEND": "postgres", "MEMORYD_STORAGE_DSN": dsn}


def sql(dsn: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as connection:
        cursor = connection.execute(statement)
        return cursor.fetchall() if cursor.description else []


@pytest.fixture
def own_postgres() -> Iterator[TemporaryPostgres]:
    """A PostgreSQL of this test alone, which it may stop and start."""
    with TemporaryPostgres.running("test-pg-alone") as database:
        yield database


def test_a_test_postgres_outlives_another_pytest_session_starting(
    own_postgres: TemporaryPostgres, tmp_path: Path
) -> None:
    # Each pytest session resets its user's temporary folder to 0700 as it starts. Run by root,
    # PostgreSQL runs as another user, and its pg_ctl then could not reach its data there: an
    # outage test's pause() failed, and the session's database could only be killed.
    (tmp_path / "test_other.py").write_text("def test_other(tmp_path):\n    pass\n")
    environment = {name: value for name, value in os.environ.items() if "PYTEST" not in name}
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=tmp_path,
        env=environment,
        check=True,
        capture_output=True,
    )
    own_postgres.pause()
    own_postgres.resume()
    assert sql(own_postgres.dsn, "SELECT 1") == [(1,)]


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://memoryd:not-for-logs@[::1/memoryd",  # libpq quotes the whole URI
        "not-for-logs",  # ... or the piece it could not read
        "host=127.0.0.1 password='not-for-logs",
        "host=127.0.0.1 password=x not-for-logs=1",
    ],
)
def test_check_of_an_unreadable_connection_string_never_prints_a_password(
    tmp_path: Path, dsn: str
) -> None:
    (tmp_path / "home").mkdir()
    ran = run_memoryd("check", "--home", str(tmp_path / "home"), env=on_postgres(dsn))
    said = ran.stdout + ran.stderr
    assert ran.returncode != 0, said
    assert "an unreadable connection string" in said
    assert "not-for-logs" not in said


def test_an_unreachable_postgres_ends_the_start_with_one_line_and_no_password(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    dsn = "host=127.0.0.1 port=1 dbname=memoryd user=memoryd password=not-for-logs"
    server = start_server(tmp_path / "home", env=on_postgres(dsn))
    with pytest.raises(RuntimeError, match="exited with 1") as failed:
        server.start()
    assert "cannot connect to" in str(failed.value)
    assert "127.0.0.1" in str(failed.value)
    assert "not-for-logs" not in str(failed.value)
    assert "Traceback" not in str(failed.value)


async def test_check_finds_an_invalid_index_and_orphaned_rows(
    start_server: type[ServerProcess], tmp_path: Path, postgres_base: str
) -> None:
    dsn = database_dsn(postgres_base, tmp_path / "db")
    server = start_server(tmp_path / "home", env=on_postgres(dsn)).start()
    async with md.connect(server.address) as channel:
        chat = md.ConversationClient(channel, md.Conversation(channel="t", chat_id="c"))
        await chat.append(md.user("ada", "hello"))
        await chat.store(md.CATEGORY_PREFERENCE, "Likes tea", key="drink")
    home = ["--home", str(server.home)]
    healthy = run_memoryd("check", *home, env=on_postgres(dsn))
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.splitlines()[-1] == "healthy"
    assert "1 messages, 1 memory rows" in healthy.stdout
    # The parts of the check SQLite's older files may lack run on PostgreSQL too (its schema
    # versions count differently: they were once skipped), and so does log-name.
    report = json.loads(run_memoryd("check", *home, "--json", env=on_postgres(dsn)).stdout)
    assert report["erasures_waiting"] == []
    assert "embedding_models" in report
    named = run_memoryd("log-name", "ada", *home, "--json", env=on_postgres(dsn))
    assert named.returncode == 0, named.stderr
    assert set(json.loads(named.stdout)) == {"ada"}

    sql(dsn, "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'messages_words'::regclass")
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("SET session_replication_role = replica")  # foreign keys off
        connection.execute(
            "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, "
            "role, kind, content, trust, created_at) VALUES ('main', 'default', 'gone', "
            "'nowhere', 'root', 'ada', 'user', 'message', 'lost', 'operator', 'x')"
        )
    found = run_memoryd("check", *home, env=on_postgres(dsn))
    assert found.returncode == 1
    assert "problem: index messages_words is not valid" in found.stdout
    assert "REINDEX INDEX messages_words" in found.stdout
    assert "problem: orphaned rows: 1 messages of no conversation" in found.stdout
    assert found.stdout.splitlines()[-1] == "2 problem(s)"


def test_backup_and_restore_point_to_postgres_own_tools(tmp_path: Path, postgres_base: str) -> None:
    dsn = database_dsn(postgres_base, tmp_path / "db") + " password=not-for-logs"
    home = tmp_path / "home"
    home.mkdir()
    for command in ("backup", "restore"):
        done = run_memoryd(
            command, str(tmp_path / "copy.db"), "--home", str(home), env=on_postgres(dsn)
        )
        assert done.returncode == 1
        assert f"memoryd {command} copies SQLite's database file" in done.stderr
        assert "pg_dump" in done.stderr
        assert "not-for-logs" not in done.stderr


async def test_a_purge_is_followed_by_a_vacuum(
    start_server: type[ServerProcess], tmp_path: Path, postgres_base: str
) -> None:
    dsn = database_dsn(postgres_base, tmp_path / "db")
    server = start_server(tmp_path / "home", env=on_postgres(dsn)).start()
    conversation = md.Conversation(channel="t", chat_id="secret")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await append(
            memory, md.Conversation(channel="t", chat_id="kept"), user("the weather is fine")
        )
        await append(memory, conversation, user("my passport number is X1234567, zebrafoo"))
        assert _files_holding(dsn, b"zebrafoo")  # the probe finds the words before
        purged = await memory.conversations.PurgeConversation(
            md.PurgeConversationRequest(conversation=conversation)
        )
    # On PostgreSQL the receipt's wal_truncated says the scrub after the erasure ran: VACUUM,
    # then the word indexes rebuilt.
    assert purged.wal_truncated
    assert list(purged.residual_files) == []
    vacuumed = sql(dsn, "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'messages'")
    assert vacuumed[0][0] >= 1
    assert sql(dsn, "SELECT count(*) FROM pending_scrubs") == [(0,)]
    assert sql(dsn, "SELECT count(*) FROM messages WHERE content LIKE '%X1234567%'") == [(0,)]
    # No row version of any table or TOAST table, and no byte of any index, holds the words
    # any more, read through SQL (without the rebuild, the word index keeps "x1234567" and
    # "zebrafoo" as keys with no rows under them).
    for word in (b"X1234567", b"x1234567", b"zebrafoo"):
        assert _files_holding(dsn, word) == [], word


def _files_holding(dsn: str, word: bytes) -> list[str]:
    """The relations of the database that hold `word`, read through SQL after a checkpoint
    (pg_read_binary_file: the test's PostgreSQL is local and we are its superuser): in a tuple
    of a table's pages, as pageinspect's heap_page_items would show it (a page's free space
    may keep old bytes: they belong to no row), or anywhere in an index's file."""
    sql(dsn, "CHECKPOINT")
    found = []
    relations = sql(
        dsn,
        "SELECT c.relname, c.relkind, pg_read_binary_file(pg_relation_filepath(c.oid), 0, "
        "pg_relation_size(c.oid), true) FROM pg_class AS c JOIN pg_namespace AS n "
        "ON n.oid = c.relnamespace WHERE n.nspname IN ('public', 'pg_toast') "
        "AND c.relkind IN ('r', 'i', 't', 'm') AND pg_relation_size(c.oid) > 0",
    )
    for name, kind, data in relations:
        pieces = [bytes(data)] if kind == "i" else heap_tuples(bytes(data))
        if any(word in piece for piece in pieces):
            found.append(str(name))
    return found


async def _retried(call: Callable[[], Awaitable[T]]) -> T:
    """`call()`'s answer, called again while it is UNAVAILABLE (a client's retry), for 30 s."""
    deadline = time.monotonic() + 30
    codes = []
    while time.monotonic() < deadline:
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            codes.append(error.code())
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
        await asyncio.sleep(0.5)
    raise AssertionError(f"memoryd did not reconnect: {codes}")


async def test_postgres_going_away_answers_unavailable_then_recovers_without_a_restart(
    start_server: type[ServerProcess], tmp_path: Path, own_postgres: TemporaryPostgres
) -> None:
    dsn = database_dsn(own_postgres.dsn, tmp_path / "db")
    server = start_server(tmp_path / "home", env=on_postgres(dsn)).start()
    conversation = md.Conversation(channel="t", chat_id="outage")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        before = await append(memory, conversation, user("before the outage"))

        own_postgres.pause()
        write = await rpc_error(append(memory, conversation, user("during the outage")))
        assert write.code() == grpc.StatusCode.UNAVAILABLE
        assert "PostgreSQL" in (write.details() or "")
        assert "nothing was written" in (write.details() or "")
        read = await rpc_error(
            memory.conversations.SearchHistory(
                md.SearchHistoryRequest(query="outage", conversation=conversation)
            )
        )
        assert read.code() == grpc.StatusCode.UNAVAILABLE
        # Long enough for the background embedder to look for work and fail too.
        await asyncio.sleep(3)

        own_postgres.resume()
        after = await _retried(lambda: append(memory, conversation, user("after the outage")))
        listed = await memory.conversations.ListMessages(
            md.ListMessagesRequest(conversation=conversation, all_history=True)
        )
        # The embedder carried on: the message written after the outage gets its vector.
        deadline = time.monotonic() + 60
        while True:
            status = await memory.admin.GetEmbeddingStatus(md.GetEmbeddingStatusRequest())
            if status.pending_messages == 0 and status.embedded_messages == 2:
                break
            assert time.monotonic() < deadline, status
            await asyncio.sleep(0.2)
    assert [m.content for m in listed.messages] == ["before the outage", "after the outage"]
    assert after.results[0].id > before.results[0].id
    assert server.process.poll() is None  # the same process served throughout


async def test_every_read_answers_once_postgresql_is_back_though_it_left_while_they_idled(
    start_server: type[ServerProcess], tmp_path: Path, own_postgres: TemporaryPostgres
) -> None:
    """PostgreSQL restarts while no call comes: every reader connection of the pool is gone but
    does not know it yet. The first reads after it is back each find one such connection, and
    each answers (a read runs again on a new connection), to a caller that never retries. (A
    background task that met one such connection took it for a new outage.)"""
    dsn = database_dsn(own_postgres.dsn, tmp_path / "db")
    # No background work: nothing reads between the restart and the calls.
    config = '[memoryd.search]\nembeddings = "off"\n'
    server = start_server(tmp_path / "home", config=config, env=on_postgres(dsn)).start()
    conversation = md.Conversation(channel="t", chat_id="idle-readers")
    calls = 24  # the pool has 4 connections ([memoryd.storage] pool_size)

    async def burst(memory: md.Stubs) -> list[int]:
        answers = await asyncio.gather(
            *(
                memory.conversations.SearchHistory(
                    md.SearchHistoryRequest(query="idle", conversation=conversation), timeout=15
                )
                for _ in range(calls)
            )
        )
        return [len(answer.hits) for answer in answers]

    # A bare channel: the generated client would retry an UNAVAILABLE read and hide it.
    async with grpc.aio.insecure_channel(server.address) as channel:
        memory = md.Stubs(channel)
        await append(memory, conversation, user("an idle reader"))
        assert await burst(memory) == [1] * calls  # every reader connection opened
        own_postgres.pause()
        own_postgres.resume()
        assert await burst(memory) == [1] * calls


async def test_an_outage_is_one_warning_and_one_line_when_it_ends_never_a_crash(
    start_server: type[ServerProcess], tmp_path: Path, own_postgres: TemporaryPostgres
) -> None:
    """A review whose answer comes while PostgreSQL is down is interrupted, not crashed: the
    outage is one warning, its end one info line counting what it interrupted, and the review
    runs again when storage is back (its claim given back then, however long the outage)."""
    answering = threading.Event()
    asked = threading.Event()

    def answer(request: dict[str, Any]) -> Reply:
        asked.set()
        answering.wait(60)
        return Reply(content="Nothing to save.")

    with FakeModel(responder=answer) as model:
        # A claim goes stale only after the model's timeout (300 s here, as in production):
        # the review must run again once storage is back, not once its claim is stale.
        config = review_config(model, timeout=300, turn_interval=1, scheduler_tick_seconds=0.1)
        config += '\n[memoryd.search]\nembeddings = "off"\n'  # the review's the only write
        dsn = database_dsn(own_postgres.dsn, tmp_path / "db")
        server = start_server(tmp_path / "home", config=config, env=on_postgres(dsn)).start()
        conversation = md.Conversation(channel="t", chat_id="outage-review")
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await commit(memory, conversation, *turn("a fact for a review"))
            await asyncio.to_thread(asked.wait, 30)  # the review is at the model
            own_postgres.pause()
            answering.set()  # its answer comes while PostgreSQL is down
            await asyncio.to_thread(server.wait_for_event, Event.STORAGE_OUTAGE)
            # The review's write gave up (its retries spent): the review is interrupted.
            failed = await asyncio.to_thread(server.wait_for_event, Event.WRITE_FAILED)
            assert failed["work"] == ["review_apply"]

            def release_failed() -> bool:  # and giving its claim back failed too
                return ["review_release"] in [e["work"] for e in server.events(Event.WRITE_FAILED)]

            await eventually(release_failed, within=60)
            own_postgres.resume()
            recovered = await asyncio.to_thread(server.wait_for_event, Event.STORAGE_RECOVERED)

            async def reviewed() -> bool:
                state = await _retried(
                    lambda: memory.reviews.GetReviewState(
                        md.GetReviewStateRequest(conversation=conversation)
                    )
                )
                return state.last_review_status == md.REVIEW_STATUS_NOTHING_TO_SAVE

            await eventually(reviewed, within=60)
    assert len(server.events(Event.STORAGE_OUTAGE)) == 1
    assert recovered["interrupted"]["reviews"] >= 1
    assert server.events(Event.REVIEW_CRASHED) == []
    assert [record for record in server.events() if "exception" in record] == []
    assert len(model.requests) >= 2  # asked again after the outage


async def test_a_compaction_after_a_turn_that_meets_an_outage_is_no_traceback(
    start_server: type[ServerProcess], tmp_path: Path, own_postgres: TemporaryPostgres
) -> None:
    """A compaction after a turn whose summary comes while PostgreSQL is down is interrupted:
    the outage's one warning, counted in its end's line, and the next turn compacts."""
    answering = threading.Event()
    asked = threading.Event()

    def answer(request: dict[str, Any]) -> Reply:
        if "compact a conversation" not in request["messages"][0]["content"]:
            return Reply(content="Nothing to save.")
        asked.set()
        answering.wait(60)
        return Reply(content=SUMMARY)

    with FakeModel(responder=answer) as model:
        config = review_config(model, enabled=False)
        config += '\n[memoryd.search]\nembeddings = "off"\n'
        dsn = database_dsn(own_postgres.dsn, tmp_path / "db")
        server = start_server(tmp_path / "home", config=config, env=on_postgres(dsn)).start()
        conversation = md.Conversation(channel="t", chat_id="outage-compaction")
        hot = md.TurnUsage(peak_prompt_tokens=1650, context_window=WINDOW)
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await append(memory, conversation, *(user(words(160, WORDS[n])) for n in range(14)))
            ok = md.NewMessage(role=md.ROLE_ASSISTANT, sender="bot", content="ok")
            await memory.conversations.CommitTurn(
                md.CommitTurnRequest(conversation=conversation, messages=[ok], usage=hot)
            )
            await asyncio.to_thread(asked.wait, 30)  # the compaction is at the model
            own_postgres.pause()
            answering.set()  # its summary comes while PostgreSQL is down
            failed = await asyncio.to_thread(server.wait_for_event, Event.WRITE_FAILED)
            assert failed["work"] == ["compaction_store"]
            own_postgres.resume()
            await _retried(
                lambda: memory.conversations.CommitTurn(
                    md.CommitTurnRequest(conversation=conversation, messages=[ok], usage=hot)
                )
            )
            recovered = await asyncio.to_thread(server.wait_for_event, Event.STORAGE_RECOVERED)
    assert recovered["interrupted"]["compactions"] == 1
    assert len(server.events(Event.STORAGE_OUTAGE)) == 1
    assert server.events(Event.COMPACTION_FAILED) == []
    assert [record for record in server.events() if "exception" in record] == []


async def test_a_file_whose_write_met_an_outage_converges_when_postgresql_is_back(
    start_server: type[ServerProcess], tmp_path: Path, own_postgres: TemporaryPostgres
) -> None:
    """A change commits; before its USER.md is written (the test holds the prompt-file lock),
    its database goes away, so the newest revision cannot be read: the file is stale, and is
    rewritten from its revision within seconds of the database's return, with no restart."""
    home = tmp_path / "home"
    dsn = database_dsn(own_postgres.dsn, tmp_path / "db")
    server = start_server(home, env=on_postgres(dsn)).start()
    conversation = md.Conversation(agent_id="healing", channel="t", chat_id="outage-files")
    file = home / "memory" / "healing" / "USER.md"
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        row = await store(
            memory,
            conversation,
            "drink",
            "Prefers tea",
            md.CATEGORY_PREFERENCE,
            scope_type=md.SCOPE_TYPE_OWNER,
        )
        assert "Prefers tea" in file.read_text(encoding="utf-8")
        with prompt_files_lock(home):
            update = asyncio.ensure_future(
                memory.memory.UpdateMemory(
                    md.UpdateMemoryRequest(
                        conversation=conversation, id=row.id, value="Prefers coffee"
                    )
                )
            )

            # Read from PostgreSQL itself: the server's own reads wait for the write's end.
            await eventually(
                lambda: (
                    sql(dsn, f"SELECT value FROM memories WHERE id = {row.id}")
                    == [("Prefers coffee",)]
                )
            )
            # The database goes away: no connection to it is allowed, and those open are cut.
            name = dsn.rpartition("dbname=")[2].split()[0]
            sql(own_postgres.dsn, f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
            sql(
                own_postgres.dsn,
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
            )
        await asyncio.to_thread(server.wait_for_event, Event.PROMPT_FILE_WRITE_FAILED)
        assert "Prefers tea" in file.read_text(encoding="utf-8")  # stale, for now
        sql(own_postgres.dsn, f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
        await asyncio.to_thread(server.wait_for_event, Event.PROMPT_FILES_HEALED)
        with contextlib.suppress(grpc.aio.AioRpcError):
            await update
        answer = await _retried(
            lambda: memory.context.GetPromptContext(
                md.GetPromptContextRequest(agent_id="healing", owner_id=conversation.owner_id)
            )
        )
    assert file.read_text(encoding="utf-8") == answer.user_md
    assert "Prefers coffee" in answer.user_md
    assert [record for record in server.events() if "exception" in record] == []


async def test_two_memoryd_processes_serve_one_database_as_replicas(
    start_server: type[ServerProcess], tmp_path: Path, postgres_base: str
) -> None:
    """Two servers of their own (two data directories, two ports) over one database: what one
    acknowledges, the other reads at once, and ids follow commit order across both."""
    dsn = database_dsn(postgres_base, tmp_path / "db")
    first = start_server(tmp_path / "first", env=on_postgres(dsn)).start()
    second = start_server(tmp_path / "second", env=on_postgres(dsn)).start()
    assert second.events(Event.MIGRATED) == []  # the first migrated it
    conversation = md.Conversation(channel="telegram", chat_id="replicas")
    async with md.connect(first.address) as one, md.connect(second.address) as other:
        stubs = (md.Stubs(one), md.Stubs(other))
        ids = []
        for number in range(40):
            written = await append(stubs[number % 2], conversation, user(f"message {number}"))
            ids.append(written.results[0].id)
            window = await stubs[(number + 1) % 2].conversations.ListMessages(
                md.ListMessagesRequest(conversation=conversation, page_size=1)
            )
            assert window.messages[-1].content == f"message {number}"
        # A prompt file written through the first, then changed through the second: each
        # data directory keeps the files of its own writes, and `memoryd check` says so.
        row = await store(
            stubs[0],
            conversation,
            "drink",
            "Prefers tea",
            md.CATEGORY_PREFERENCE,
            scope_type=md.SCOPE_TYPE_OWNER,
        )
        await stubs[1].memory.UpdateMemory(
            md.UpdateMemoryRequest(conversation=conversation, id=row.id, value="Prefers coffee")
        )
    assert ids == sorted(ids)
    checked = {
        replica: run_memoryd("check", "--home", str(replica.home), env=on_postgres(dsn))
        for replica in (first, second)
    }
    for ran in checked.values():
        assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "written through another process" in checked[first].stdout
    assert "written through another process" not in checked[second].stdout
    # A file that is no revision at all is a problem on any replica.
    user_md = first.home / "memory" / "main" / "USER.md"
    user_md.write_text("edited by hand\n", encoding="utf-8")
    edited = run_memoryd("check", "--home", str(first.home), env=on_postgres(dsn))
    assert edited.returncode == 1
    assert "is not its current revision" in edited.stdout


def test_postgres_migrations_run_once_and_refuse_an_edited_or_newer_schema(
    start_server: type[ServerProcess], tmp_path: Path, postgres_base: str
) -> None:
    dsn = database_dsn(postgres_base, tmp_path / "db")
    home = tmp_path / "home"
    first = start_server(home, env=on_postgres(dsn)).start()
    bundled = [migration.version for migration in bundled_migrations("postgres")]
    assert first.wait_for_event("migrated")["versions"] == bundled
    first.stop()
    again = start_server(home, env=on_postgres(dsn)).start()
    assert again.events("migrated") == []
    again.stop()

    sql(dsn, "UPDATE schema_migrations SET checksum = 'edited' WHERE version = 14")
    edited = start_server(home, env=on_postgres(dsn))
    assert edited.wait_exit() != 0
    assert "migration 0014_schema.sql was changed after it was applied" in edited.output

    real = bundled_migrations("postgres")[0].checksum
    sql(dsn, f"UPDATE schema_migrations SET checksum = '{real}' WHERE version = 14")
    sql(
        dsn,
        "INSERT INTO schema_migrations (version, name, checksum, applied_at) "
        "VALUES (99, 'future', 'x', 'now')",
    )
    newer = start_server(home, env=on_postgres(dsn))
    assert newer.wait_exit() != 0
    assert f"has schema version 99, newer than this memoryd supports ({bundled[-1]})" in (
        newer.output
    )


def test_a_database_numbered_by_postgresqls_own_line_moves_to_the_one_line(
    start_server: type[ServerProcess], tmp_path: Path, postgres_base: str
) -> None:
    dsn = database_dsn(postgres_base, tmp_path / "db")
    home = tmp_path / "home"
    start_server(home, env=on_postgres(dsn)).start().stop()
    line = sql(dsn, "SELECT version, name, checksum FROM schema_migrations ORDER BY version")
    assert [row[0] for row in line] == list(range(14, latest_version() + 1))
    # As a memoryd of before the one line left it: PostgreSQL's files numbered from 1.
    sql(dsn, "UPDATE schema_migrations SET version = version - 13")
    assert sql(dsn, "SELECT min(version), max(version) FROM schema_migrations") == [
        (1, latest_version() - 13)
    ]
    again = start_server(home, env=on_postgres(dsn)).start()
    assert again.events("migrated") == []  # nothing ran twice
    assert again.events(Event.SERVING)[0]["schema_version"] == latest_version()
    again.stop()
    assert sql(dsn, "SELECT version, name, checksum FROM schema_migrations ORDER BY version") == (
        line
    )
    checked = run_memoryd("check", "--home", str(home), env=on_postgres(dsn))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"schema {latest_version()}," in checked.stdout


def test_check_names_erasures_waiting_for_postgresqls_vacuum(
    start_server: type[ServerProcess], tmp_path: Path, postgres_base: str
) -> None:
    dsn = database_dsn(postgres_base, tmp_path / "db")
    home = tmp_path / "home"
    start_server(home, env=on_postgres(dsn)).start().stop()
    # As an erasure leaves it while an export's snapshot keeps the VACUUM from its rows.
    sql(
        dsn,
        "INSERT INTO pending_scrubs (erased_at, what) "
        "VALUES ('2026-12-06T10:00:00.000Z', 'an owner')",
    )
    checked = run_memoryd("check", "--home", str(home), env=on_postgres(dsn))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 erasure(s) since 2026-12-06T10:00:00.000Z wait for a VACUUM" in checked.stdout
    assert "-wal" not in checked.stdout  # SQLite's note is not PostgreSQL's


def test_a_large_scope_is_searched_through_the_models_hnsw_index(
    tmp_path: Path, postgres_base: str
) -> None:
    dsn = database_dsn(postgres_base, tmp_path / "db")
    database = PostgresDatabase.open(
        PostgresSettings(dsn=dsn, pool_size=1, statement_timeout_ms=30_000)
    )
    chat = ConversationKey("main", "ada", "t", "c", "root")
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((3000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    quantised = quantise(vectors)
    try:
        with database.transaction() as connection:
            model = vector_store.model_row(connection, "p", "m", 32)
            connection.execute(
                "INSERT INTO conversations (agent_id, owner_id, channel, chat_id, thread_scope, "
                "history_version, search_scope, created_at) "
                "VALUES ('main', 'ada', 't', 'c', 'root', 0, 'x', 'x')"
            )
            connection.execute(
                "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, "
                "sender, role, kind, content, trust, created_at) SELECT 'main', 'ada', 't', "
                "'c', 'root', 'ada', 'user', 'message', 'm' || n, 'operator', 'x' "
                "FROM generate_series(1, 3000) AS n"
            )
            vector_store.store_message_vectors(
                connection,
                model.id,
                [
                    (row + 1, float(quantised.scales[row]), to_blob(quantised.components[row]))
                    for row in range(3000)
                ],
                3000,
            )
            connection.execute("ANALYZE messages, message_vectors")
        with database.transaction() as connection:
            found = vector_reads.indexed_nearest(connection, model, chat, vectors[41].tolist(), 5)
            connection.execute("SELECT pg_stat_force_next_flush()")
        assert found[0][0] == 42  # message 42 holds vector 41: itself, the nearest
        assert found[0][1] == pytest.approx(1.0, abs=0.01)
        assert [similarity for _, similarity in found] == sorted(
            (similarity for _, similarity in found), reverse=True
        )
        # Statistics reach other sessions once flushed: the index was walked, not the table.
        scans = sql(
            dsn,
            "SELECT idx_scan FROM pg_stat_user_indexes "
            f"WHERE indexrelname = 'message_vectors_nearest_{model.id}'",
        )
        assert scans == [(1,)]
    finally:
        database.close()


class _CommitSwallower:
    """A TCP proxy to PostgreSQL's Unix socket that, once armed, forwards a COMMIT, waits for
    PostgreSQL's answer, and then cuts the connection instead of passing the answer on: the
    commit happened, and the client cannot know. (The writer sends COMMIT's text every time: it
    is never a prepared statement.)"""

    def __init__(self, socket_folder: str) -> None:
        self._target = next(Path(socket_folder).glob(".s.PGSQL.*"))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.armed = threading.Event()
        self.swallowed = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX)
            server.connect(str(self._target))
            swallowing = threading.Event()  # this connection's next answer is to be swallowed
            for source, target, upstream in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pipe, args=(source, target, upstream, swallowing), daemon=True
                ).start()

    def _pipe(
        self,
        source: socket.socket,
        target: socket.socket,
        upstream: bool,
        swallowing: threading.Event,
    ) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if upstream and b"COMMIT" in data and self.armed.is_set():
                    self.armed.clear()
                    swallowing.set()  # before PostgreSQL can answer
                if not upstream and swallowing.is_set():
                    self.swallowed += 1  # PostgreSQL answered (committed): cut instead
                    break
                target.sendall(data)
        for side in (source, target):  # either end gone: the connection goes
            with contextlib.suppress(OSError):
                side.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()


async def test_a_commit_whose_answer_is_lost_is_found_committed_and_not_run_again(
    tmp_path: Path, postgres_base: str
) -> None:
    """The connection breaks after PostgreSQL committed a group but before memoryd heard so:
    the writer asks PostgreSQL (pg_xact_status) and answers the group as committed, instead of
    running it a second time."""
    dsn = database_dsn(postgres_base, tmp_path / "db")
    folder = dsn.split("host=", 1)[1].split()[0]
    proxy = _CommitSwallower(folder)
    proxied = dsn.replace(f"host={folder}", f"host=127.0.0.1 port={proxy.port} sslmode=disable")
    database = PostgresDatabase.open(
        PostgresSettings(dsn=proxied, pool_size=1, statement_timeout_ms=30_000)
    )
    writer = database.writer(
        WriterSettings(max_rows=1, max_wait_seconds=0, attempts=3, retry_delay_seconds=0)
    )
    writer.start()
    try:
        before = int(sql(dsn, "SELECT version FROM store_clock")[0][0])
        proxy.armed.set()
        await writer.run(
            "add 1000", lambda t: t.execute("UPDATE store_clock SET version = version + 1000")
        )
        assert proxy.swallowed == 1
        after = int(sql(dsn, "SELECT version FROM store_clock")[0][0])
        assert after == before + 1000  # once, not twice
        await writer.run(
            "add 1", lambda t: t.execute("UPDATE store_clock SET version = version + 1")
        )
        assert int(sql(dsn, "SELECT version FROM store_clock")[0][0]) == after + 1
    finally:
        await writer.close()
        proxy.close()
