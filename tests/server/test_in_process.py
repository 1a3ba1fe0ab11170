"""The in-process services tests use (tests/in_process.py): a refused start is the test's error,
and a stopped one keeps what it acknowledged."""

from __future__ import annotations

from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.errors import StartupError
from tests.helpers import append, fresh_conversation, user
from tests.in_process import ServedInProcess


def test_a_refused_start_raises_in_the_tests_thread(tmp_path: Path) -> None:
    served = ServedInProcess(tmp_path / "home", config="[memoryd.server]\nlisten = 5\n")
    with pytest.raises(StartupError, match=r"memoryd\.server\.listen must be a string"):
        served.start()


async def test_what_was_acknowledged_is_there_after_a_stop(tmp_path: Path) -> None:
    conversation = fresh_conversation()
    first = ServedInProcess(tmp_path / "home").start()
    try:
        async with md.connect(first.address) as channel:
            await append(md.Stubs(channel), conversation, user("kept across a stop"))
    finally:
        first.stop()
    again = ServedInProcess(tmp_path / "home").start()
    try:
        async with md.connect(again.address) as channel:
            listed = await md.Stubs(channel).conversations.ListMessages(
                md.ListMessagesRequest(conversation=conversation)
            )
    finally:
        again.stop()
    assert [message.content for message in listed.messages] == ["kept across a stop"]
