"""OpenHermit's review triggers, on by default, and its settings: `enabled`, `model` and
`passive_turn_interval`, through the real server with a fake model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.config import load_settings
from memoryd.errors import StartupError
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.server_process import ServerProcess
from tests.helpers import fresh_conversation
from tests.review_helpers import after_a_scheduler_pass, commit, eventually, review_now, turn

NOTHING = Reply(content=json.dumps({"operations": []}))


async def runs(memory: md.Stubs, conversation: md.Conversation) -> int:
    """How many reviews of the conversation have run (its latest run's id changes)."""
    state = await memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=conversation))
    return state.last_run.id if state.HasField("last_run") else 0


def test_the_triggers_are_on_by_default_at_openhermits_values(tmp_path: Path) -> None:
    memory = load_settings({}, home=str(tmp_path)).memory
    assert memory.enabled is True
    assert memory.model == ""
    assert (memory.turn_interval, memory.idle_timeout_minutes) == (5, 10.0)
    assert memory.passive_turn_interval == 20
    assert memory.review_interval_hours == 24.0
    # 0 turns one trigger off.
    off = load_settings(
        {"MEMORYD_MEMORY_TURN_INTERVAL": "0", "MEMORYD_MEMORY_PASSIVE_TURN_INTERVAL": "0"},
        home=str(tmp_path),
    ).memory
    assert (off.turn_interval, off.passive_turn_interval) == (None, None)


async def test_every_fifth_turn_and_every_twentieth_passive_message_is_reviewed(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """With the default triggers, after a first review (a new conversation is reviewed at
    once), the fifth turn and the twentieth message stored without a turn each bring the next,
    long before the 24-hour interval."""
    with FakeModel(default=NOTHING) as model:
        server = start_server(tmp_path / "home", config=review_config(model)).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            talk = fresh_conversation()
            await commit(memory, talk, *turn("hello"))
            await eventually(lambda: runs(memory, talk))
            first = await runs(memory, talk)
            for n in range(4):
                await commit(memory, talk, *turn(f"turn {n}"))
            await after_a_scheduler_pass(memory)
            assert await runs(memory, talk) == first
            await commit(memory, talk, *turn("turn 4"))
            await eventually(lambda: until_after(memory, talk, first))

            group = fresh_conversation()
            await memory.conversations.AppendMessages(
                md.AppendMessagesRequest(conversation=group, messages=turn("hi all"))
            )
            await eventually(lambda: runs(memory, group))
            first = await runs(memory, group)
            for n in range(19):
                await memory.conversations.AppendMessages(
                    md.AppendMessagesRequest(conversation=group, messages=turn(f"said {n}"))
                )
            await after_a_scheduler_pass(memory)
            assert await runs(memory, group) == first
            await memory.conversations.AppendMessages(
                md.AppendMessagesRequest(conversation=group, messages=turn("said 19"))
            )
            await eventually(lambda: until_after(memory, group, first))
            state = await memory.reviews.GetReviewState(
                md.GetReviewStateRequest(conversation=group)
            )
            assert state.unread_messages == 0


async def until_after(memory: md.Stubs, conversation: md.Conversation, run: int) -> bool:
    return await runs(memory, conversation) > run


async def test_an_interval_of_zero_leaves_the_turn_trigger(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """`review_interval_hours = 0` turns only the time trigger off (it used to silence all)."""
    with FakeModel(default=NOTHING) as model:
        config = review_config(model, review_interval_hours=0)
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            talk = fresh_conversation()
            for n in range(5):
                await commit(memory, talk, *turn(f"turn {n}"))
            await eventually(lambda: runs(memory, talk))


async def test_enabled_false_stops_background_review_and_leaves_review_now(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel(default=NOTHING) as model:
        config = review_config(model, enabled=False, turn_interval=1, scheduler_tick_seconds=0.05)
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversation = fresh_conversation()
            for n in range(3):
                await commit(memory, conversation, *turn(f"turn {n}"))
            # No scheduler runs to witness; twenty of its ticks pass instead.
            await asyncio.sleep(1.0)
            assert model.requests == []
            result = await review_now(memory, conversation)
            assert result.status == md.REVIEW_STATUS_NOTHING_TO_SAVE
            assert len(model.requests) == 1
    assert "background review is off" in server.output


@pytest.mark.parametrize(
    ("choice", "answered_by", "model_sent"),
    [("fake-1", 1, "fake-model-1"), ("small-model", 0, "small-model")],
)
async def test_reviews_use_the_model_setting(
    start_server: type[ServerProcess],
    tmp_path: Path,
    choice: str,
    answered_by: int,
    model_sent: str,
) -> None:
    """`model` names a provider (used first) or a model (run on the primary)."""
    with FakeModel(default=NOTHING) as primary, FakeModel(default=NOTHING) as other:
        config = review_config(primary, other, enabled=False, model=choice)
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversation = fresh_conversation()
            await commit(memory, conversation, *turn("I like tea"))
            await review_now(memory, conversation)
            state = await memory.reviews.GetReviewState(
                md.GetReviewStateRequest(conversation=conversation)
            )
    models = (primary, other)
    (request,) = models[answered_by].requests
    assert request["model"] == model_sent
    assert models[1 - answered_by].requests == []
    assert (state.last_run.provider, state.last_run.model) == (f"fake-{answered_by}", model_sent)


def test_a_review_model_without_providers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match=r"memoryd\.memory\.model is 'small', but no"):
        load_settings({"MEMORYD_MEMORY_MODEL": "small"}, home=str(tmp_path))
