"""Identifiers of any script and the maximum length map to prompt-file paths that fit, and a
prompt file that cannot be written never stops the server nor leaves GetPromptContext behind."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.server_process import ServerProcess
from tests.helpers import store

# The widest identifiers the contract allows: 256 characters, in 1- to 4-byte UTF-8, joined
# emoji (64 flags of 4 code points), and characters that must never climb out of the home.
WIDEST = [
    "o" * 256,
    "ü" * 256,
    "東" * 256,
    "😀" * 256,
    "\U0001f3f3\ufe0f\u200d\U0001f308" * 64,  # 64 rainbow flags, 4 code points each
    "../" * 85 + "x",
    "~" * 256,
]
NAME_LIMIT = 255  # bytes per path component on ext4, xfs, btrfs, tmpfs


async def prompt_text(stub: md.Stubs, agent_id: str, owner_id: str) -> str:
    response = await stub.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=agent_id, owner_id=owner_id)
    )
    return response.user_md


async def user_md_path(stub: md.Stubs, agent_id: str, owner_id: str) -> str:
    listed = await stub.resources.ListResources(
        md.ListResourcesRequest(agent_id=agent_id, type=md.RESOURCE_TYPE_USER_MD, scope_id=owner_id)
    )
    (resource,) = listed.resources
    return resource.path


async def test_maximum_length_identifiers_of_every_script_are_written_and_survive_a_restart(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    server = start_server(home).start()
    paths: dict[tuple[str, str], str] = {}
    async with md.connect(server.address) as channel:
        stub = md.Stubs(channel)
        for index, identifier in enumerate(WIDEST):
            # The same identifier as agent and as owner: both become path components.
            chat = md.Conversation(
                agent_id=identifier, owner_id=identifier, channel="t", chat_id=str(index)
            )
            await store(stub, chat, "name", "v1", md.CATEGORY_IDENTITY)
            assert await prompt_text(stub, identifier, identifier) == "## Identity\n- v1"
            await store(stub, chat, "name", "v2", md.CATEGORY_IDENTITY)
            assert await prompt_text(stub, identifier, identifier) == "## Identity\n- v2"
            path = await user_md_path(stub, identifier, identifier)
            assert all(len(part.encode()) <= NAME_LIMIT for part in Path(path).parts), path
            assert (home / path).resolve().is_relative_to(home / "memory")
            assert (home / path).read_text(encoding="utf-8") == "## Identity\n- v2"
            paths[identifier, identifier] = path
    assert len(set(paths.values())) == len(paths)  # distinct identifiers, distinct files
    assert server.events(Event.PROMPT_FILE_WRITE_FAILED) == []
    assert server.stop() == 0

    restarted = start_server(home).start()
    async with md.connect(restarted.address) as channel:
        stub = md.Stubs(channel)
        for (agent_id, owner_id), path in paths.items():
            assert await prompt_text(stub, agent_id, owner_id) == "## Identity\n- v2"
            assert (home / path).read_text(encoding="utf-8") == "## Identity\n- v2"
    assert restarted.events(Event.PROMPT_FILES_RESYNCED) == []


async def test_an_unwritable_prompt_file_neither_stops_start_up_nor_stales_the_context(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    blocker = home / "memory" / "blocked"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("a file where the agent's folder should be", encoding="utf-8")
    chat = md.Conversation(agent_id="blocked", channel="t", chat_id="1")

    server = start_server(home).start()
    async with md.connect(server.address) as channel:
        stub = md.Stubs(channel)
        await store(stub, chat, "name", "v1", md.CATEGORY_IDENTITY)
        assert await prompt_text(stub, "blocked", "") == "## Identity\n- v1"
        await store(stub, chat, "name", "v2", md.CATEGORY_IDENTITY)
        assert await prompt_text(stub, "blocked", "") == "## Identity\n- v2"
    server.wait_for_event(Event.PROMPT_FILE_WRITE_FAILED)  # logged off the event loop
    assert "Traceback" not in server.output
    assert server.stop() == 0

    restarted = start_server(home).start()
    assert restarted.events(Event.PROMPT_FILES_UNWRITTEN)[0]["files"] == 1
    async with md.connect(restarted.address) as channel:
        stub = md.Stubs(channel)
        assert await prompt_text(stub, "blocked", "") == "## Identity\n- v2"
    assert restarted.stop() == 0

    blocker.unlink()
    healed = start_server(home).start()
    assert healed.events(Event.PROMPT_FILES_RESYNCED)[0]["files"] == 1
    assert (blocker / "USER.md").read_text(encoding="utf-8") == "## Identity\n- v2"


@pytest.mark.parametrize(
    "recorded",
    [
        # What an earlier memoryd recorded for a 256 x "ü" owner: a name too long to create.
        "memory/main/owners/" + quote("ü" * 256, safe="-_@+=,") + "/USER.md",
        # An earlier encoding of "a~b", which left "~" as it was.
        "memory/main/owners/a~b/USER.md",
    ],
    ids=["too-long-for-the-filesystem", "older-encoding"],
)
@pytest.mark.sqlite_only("edits SQLite's file to record an old path")
async def test_a_resource_recorded_at_an_old_path_moves_to_its_path_at_start_up(
    start_server: type[ServerProcess], tmp_path: Path, recorded: str
) -> None:
    home = tmp_path / "home"
    owner_id = "ü" * 256 if "%C3%BC" in recorded else "a~b"
    server = start_server(home).start()
    async with md.connect(server.address) as channel:
        stub = md.Stubs(channel)
        chat = md.Conversation(owner_id=owner_id, channel="t", chat_id="1")
        await store(stub, chat, "name", "Ada", md.CATEGORY_IDENTITY)
        path = await user_md_path(stub, "main", owner_id)
    assert server.stop() == 0
    (home / path).unlink()
    database = sqlite3.connect(home / "memory.db")
    with database:
        database.execute("UPDATE resources SET resource_path = ?", (recorded,))
    database.close()
    if owner_id == "a~b":
        (home / recorded).parent.mkdir(parents=True)
        (home / recorded).write_text("## Identity\n- Ada", encoding="utf-8")

    restarted = start_server(home).start()
    resynced = restarted.events(Event.PROMPT_FILES_RESYNCED)[0]
    assert (resynced["files"], resynced["moved"]) == (1, 1)
    assert (home / path).read_text(encoding="utf-8") == "## Identity\n- Ada"
    assert not (owner_id == "a~b" and (home / recorded).exists())
    async with md.connect(restarted.address) as channel:
        assert await user_md_path(md.Stubs(channel), "main", owner_id) == path
