"""[memoryd.server] log_identifiers = "hashed": no agent, owner, conversation or model-session id
reaches the log in clear, the names are stable keyed hashes, and `memoryd log-name` finds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess
from tests.review_helpers import commit, review_now, turn

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage


def log_names(home: Path, *ids: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    done = subprocess.run(
        [sys.executable, "-m", "memoryd", "log-name", *ids, "--home", str(home), "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    )
    named: dict[str, str] = json.loads(done.stdout)
    return named


@pytest.mark.sqlite_only("reads SQLite's file and the CLI without the suite's database")
async def test_hashed_identifiers_keep_ids_out_of_the_log(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    chat = md.Conversation(
        agent_id="agent-zqa", owner_id="owner-zqo", channel="telegram", chat_id="chat-zqc"
    )
    with FakeModel() as model:
        config = review_config(model, enabled=False)
        config += '\n[memoryd.server]\nlog_identifiers = "hashed"\n'
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await commit(memory, chat, *turn("I live in Lisbon"))
            model.reply('{"operations": []}')
            await review_now(memory, chat)
        reviewed = server.wait_for_event(Event.REVIEW)
        called = server.wait_for_event(Event.MODEL_CALL)
        assert server.stop() == 0
    for secret in ("agent-zqa", "owner-zqo", "chat-zqc"):
        assert secret not in server.output
    names = log_names(server.home, "telegram:chat-zqc:root", "agent-zqa", "owner-zqo")
    assert reviewed["msg"].startswith(
        f"reviewed {names['telegram:chat-zqc:root']} (agent {names['agent-zqa']}, "
        f"owner {names['owner-zqo']})"
    )
    assert called["session_id"].startswith("h:")
    assert called["session_id"] == reviewed["session_id"]
    assert len(set(names.values())) == 3
