"""memoryd's files are its user's alone: the data directory 0700; the database, its WAL and
shared-memory files, the lock file and the prompt files 0600, even when the server was started
with a permissive umask; an existing data directory others can read is warned about."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.server_process import ServerProcess


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.sqlite_only("the modes of SQLite's database files")
async def test_files_are_private_whatever_the_umask(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "fresh" / "home"
    server = start_server(home, create_home=False, umask=0o000).start()
    async with md.connect(server.address) as channel:
        chat = md.ConversationClient(
            channel, md.Conversation(owner_id="ada", channel="telegram", chat_id="private")
        )
        await chat.append(md.user("ada", "secret"))
        await chat.store(md.CATEGORY_PREFERENCE, "Likes tea", key="drink")
    files = [
        home / name for name in ("memory.db", "memory.db-wal", "memory.db-shm", "memoryd.lock")
    ]
    prompt_files = sorted((home / "memory").rglob("*.md"))
    assert prompt_files  # USER.md and MEMORY.md of ada
    assert mode(home) == 0o700
    for path in files + prompt_files:
        assert mode(path) == 0o600, path
    for folder in (path for path in (home / "memory").rglob("*") if path.is_dir()):
        assert mode(folder) == 0o700, folder
    assert not server.events(Event.HOME_READABLE)


@pytest.mark.sqlite_only("the modes of SQLite's database files")
async def test_an_existing_readable_home_is_warned_about_and_old_files_are_tightened(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "old"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    first = start_server(home, umask=0o022).start()
    first.stop()
    database = home / "memory.db"
    database.chmod(0o644)  # as an older memoryd left it
    second = start_server(home, umask=0o022).start()
    (warning,) = second.events(Event.HOME_READABLE)
    assert warning["mode"] == "0o755"
    assert f"the data directory {home} can be read by other users" in warning["msg"]
    assert mode(database) == 0o600
    assert mode(home) == 0o755  # the operator's choice: warned about, not changed
