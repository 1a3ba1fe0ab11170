"""`memoryd backup`, `restore` and `check` with the real CLI: a backup taken while the server is
under write load restores into a database that passes `memoryd check` and holds every write
acknowledged before the backup began; a restore refuses while a server holds the data directory
and refuses a damaged backup, changing nothing; `check` finds what is wrong."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import apsw
import pytest

import memoryd_client as md
from memoryd.storage.connection import SqliteConnection
from memoryd.testing.server_process import ServerProcess
from tests.helpers import Ran, run_memoryd

# SQLite's backup, restore and file checks; PostgreSQL's are in
# tests/storage/test_postgres_operations.py.
pytestmark = pytest.mark.sqlite_only("SQLite's backup, restore and file checks")


def memoryd(*args: str) -> Ran:
    """`memoryd ARGS` in this process, without the caller's MEMORYD_ variables."""
    return run_memoryd(
        *args, env={k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    )


def stored_ids(home: Path) -> set[int]:
    connection = SqliteConnection(str(home / "memory.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {row[0] for row in connection.execute("SELECT id FROM messages")}
    finally:
        connection.close()


async def test_a_backup_under_write_load_restores_healthy_with_every_earlier_write(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home").start()
    acknowledged: list[int] = []
    stop = asyncio.Event()
    warmed_up = asyncio.Event()

    async def load(channel_number: int) -> None:
        async with md.connect(server.address) as channel:
            chat = md.ConversationClient(
                channel, md.Conversation(channel="load", chat_id=f"c{channel_number}")
            )
            turn = 0
            while not stop.is_set():
                turn += 1
                done = await chat.append(
                    md.user("ada", f"message {turn} of writer {channel_number}")
                )
                acknowledged.extend(result.id for result in done.results)
                if len(acknowledged) >= 200:
                    warmed_up.set()

    writers = [asyncio.create_task(load(n)) for n in range(4)]
    await warmed_up.wait()
    before = set(acknowledged)
    target = tmp_path / "backups" / "memory.backup"
    target.parent.mkdir()
    made = await asyncio.to_thread(
        memoryd, "backup", str(target), "--home", str(server.home), "--json"
    )
    stop.set()
    await asyncio.gather(*writers)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["bytes"] == target.stat().st_size
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert len(acknowledged) > len(before)  # writes went on during the backup

    restored_home = tmp_path / "restored"
    done = memoryd("restore", str(target), "--home", str(restored_home))
    assert done.returncode == 0, done.stderr
    assert before <= stored_ids(restored_home)
    checked = memoryd("check", "--home", str(restored_home), "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["healthy"] is True
    assert report["messages"] >= len(before)
    # The restored directory serves.
    restarted = start_server(restored_home).start()
    async with md.connect(restarted.address) as channel:
        listed = await md.Stubs(channel).conversations.ListMessages(
            md.ListMessagesRequest(conversation=md.Conversation(channel="load", chat_id="c0"))
        )
        assert listed.messages


def test_restore_refuses_while_a_server_serves_and_refuses_a_damaged_backup(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    server = start_server(home).start()
    backup = tmp_path / "copy.db"
    assert memoryd("backup", str(backup), "--home", str(home)).returncode == 0
    busy = memoryd("restore", str(backup), "--home", str(home))
    assert busy.returncode == 1
    assert f"is serving {home}; stop it before restoring" in busy.stderr
    server.stop()

    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"this is not a database" * 100)
    before = (home / "memory.db").read_bytes()
    refused = memoryd("restore", str(damaged), "--home", str(home))
    assert refused.returncode == 1
    assert "is not a usable memoryd database, nothing was changed" in refused.stderr
    assert (home / "memory.db").read_bytes() == before

    replaced = memoryd("restore", str(backup), "--home", str(home))
    assert replaced.returncode == 0, replaced.stderr
    kept = sorted(home.glob("memory.db.replaced-*"))
    assert kept  # the database it replaced is kept, never deleted
    assert "the replaced database is kept as" in replaced.stdout


async def test_check_finds_an_edited_prompt_file_and_orphaned_rows(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    server = start_server(home).start()
    async with md.connect(server.address) as channel:
        chat = md.ConversationClient(channel, md.Conversation(channel="t", chat_id="c"))
        await chat.append(md.user("ada", "hello"))
        await chat.store(md.CATEGORY_PREFERENCE, "Likes tea", key="drink")
    healthy = memoryd("check", "--home", str(home))
    assert healthy.returncode == 0, healthy.stdout
    assert healthy.stdout.splitlines()[-1] == "healthy"
    server.stop()

    user_md = home / "memory" / "main" / "USER.md"
    user_md.write_text("edited by hand\n", encoding="utf-8")
    connection = SqliteConnection(str(home / "memory.db"))
    connection.execute("PRAGMA foreign_keys = OFF")
    connection.execute(
        "INSERT INTO memory_review_state (agent_id, owner_id, channel, chat_id, thread_scope) "
        "VALUES ('main', 'default', 'gone', 'nowhere', 'root')"
    )
    connection.close()
    found = memoryd("check", "--home", str(home))
    assert found.returncode == 1
    assert "USER.md of agent 'main', owner 'default': the file" in found.stdout
    assert "orphaned row: memory_review_state" in found.stdout
    assert found.stdout.splitlines()[-1] == "2 problem(s)"


async def test_a_purge_names_the_replaced_databases_that_may_hold_the_owner(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    marker = "zqreplacedowner"
    chat = md.Conversation(owner_id="victim", channel="telegram", chat_id="c")
    server = start_server(home).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await memory.conversations.AppendMessages(
            md.AppendMessagesRequest(conversation=chat, messages=[md.user("v", marker)])
        )
    backup = tmp_path / "copy.db"
    assert memoryd("backup", str(backup), "--home", str(home)).returncode == 0
    server.stop()
    assert memoryd("restore", str(backup), "--home", str(home)).returncode == 0
    replaced = sorted(path.name for path in home.glob("memory.db.replaced-*"))
    assert replaced
    (home / "memory" / "notes.txt").parent.mkdir(exist_ok=True)
    (home / "memory" / "notes.txt").write_text("an operator's file", encoding="utf-8")

    server = start_server(home).start()
    async with md.connect(server.address) as channel:
        receipt = await md.Stubs(channel).admin.PurgeOwner(md.PurgeOwnerRequest(owner_id="victim"))
    assert receipt.wal_truncated
    assert list(receipt.residual_files) == sorted([*replaced, "memory/notes.txt"])
    report = json.loads(memoryd("check", "--home", str(home), "--json").stdout)
    assert report["replaced_databases"] == replaced
    assert any("memoryd discard-replaced" in note for note in report["notes"])
    held = b"".join((home / name).read_bytes() for name in replaced)
    assert marker.encode() in held  # why the receipt names them

    discarded = memoryd("discard-replaced", "--home", str(home), "--json")
    assert discarded.returncode == 0, discarded.stderr
    assert sorted(Path(p).name for p in json.loads(discarded.stdout)["removed"]) == replaced
    assert not list(home.glob("memory.db.replaced-*"))
    files = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert marker.encode() not in files
