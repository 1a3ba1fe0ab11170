"""GetActivity (what was stored and what the background did, by hour or day) and the operations
a review run applied (ReviewRun.applied_operations), through the real server on each backend."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess
from tests.helpers import rpc_error
from tests.review_helpers import commit, review_now, turn

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = [pytest.mark.slow, pytest.mark.storage]

UTC = dt.UTC


def conversation(owner: str, chat: str, agent: str = "main") -> md.Conversation:
    return md.Conversation(agent_id=agent, owner_id=owner, channel="telegram", chat_id=chat)


def ops(*operations: dict[str, Any]) -> str:
    return json.dumps({"operations": list(operations)})


def stamp(moment: dt.datetime) -> timestamp_pb2.Timestamp:
    found = timestamp_pb2.Timestamp()
    found.FromDatetime(moment)
    return found


def totals(response: md.GetActivityResponse) -> dict[str, int]:
    return {field.name: value for field, value in response.total.ListFields()}


async def test_activity_counts_what_happened_by_hour_and_day_in_each_scope(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    server = start_server(tmp_path / "home", config=review_config(model, enabled=False)).start()
    ada, ada2 = conversation("ada", "a1"), conversation("ada", "a2")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        compaction = md.Stubs(channel)
        await commit(memory, ada, *turn("I'm vegetarian", "and I live in Lisbon"))
        await commit(memory, ada2, *turn("hello"))
        await commit(memory, conversation("bob", "b1"), *turn("hi"))
        await commit(memory, conversation("zed", "z1", agent="other"), *turn("elsewhere"))
        # Three days ago, by the time it carries.
        past = dt.datetime.now(UTC).replace(minute=30, second=0, microsecond=0)
        past -= dt.timedelta(days=3)
        await memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=ada2,
                messages=[md.user("ada", "an old message", created_at=stamp(past))],
            )
        )
        model.reply(
            ops(
                {
                    "action": "add",
                    "target": "user",
                    "category": "preference",
                    "value": "Is vegetarian",
                },
                {
                    "action": "add",
                    "target": "user",
                    "category": "identity",
                    "value": "Lives in Lisbon",
                },
                {"action": "replace", "id": 999999, "value": "not shown to it"},
            ),
            prompt_tokens=300,
            completion_tokens=40,
        )
        reviewed = await review_now(memory, ada)
        assert (reviewed.ops_added, reviewed.ops_skipped) == (2, 1)
        model.fail(401)
        failed = await review_now(memory, ada2)
        assert failed.status == md.REVIEW_STATUS_FAILED
        await memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=ada, messages=[md.user("ada", " ".join(["trip"] * 300))] * 4
            )
        )
        model.reply("Nothing to save.")
        await review_now(memory, ada)
        model.reply("The user planned a trip.")
        done = await compaction.context.Compact(
            md.CompactRequest(conversation=ada, context_window=1200)
        )
        assert done.outcome == md.COMPACTION_OUTCOME_COMPACTED, done.message

        # One conversation, by the hour: 48 buckets, the last one now's.
        hourly = await memory.overview.GetActivity(
            md.GetActivityRequest(conversation=ada, bucket=md.ACTIVITY_BUCKET_HOUR)
        )
        assert hourly.bucket == md.ACTIVITY_BUCKET_HOUR
        assert len(hourly.points) == 48
        starts = [point.start_time.ToDatetime(tzinfo=UTC) for point in hourly.points]
        assert all(b - a == dt.timedelta(hours=1) for a, b in itertools.pairwise(starts))
        assert starts[-1] <= dt.datetime.now(UTC) < starts[-1] + dt.timedelta(hours=2)
        assert totals(hourly) == {
            "messages": 6,
            "compactions": 1,
            "review_runs": 2,
            "facts_added": 2,
            "facts_refused": 1,
            "model_tokens": 340 + 120,  # the second review's reply: 100 + 20 by default
        }
        assert sum(point.counts.messages for point in hourly.points[-2:]) == 6

        # The owner, by the day (the default): 30 days, the old message three days back.
        daily = await memory.overview.GetActivity(
            md.GetActivityRequest(owner=md.OwnerScope(agent_id="main", owner_id="ada"))
        )
        assert (daily.bucket, len(daily.points)) == (md.ACTIVITY_BUCKET_DAY, 30)
        by_day = {
            point.start_time.ToDatetime(tzinfo=UTC).date(): point.counts for point in daily.points
        }
        assert by_day[past.date()].messages == 1
        assert totals(daily) == {
            "messages": 8,
            "compactions": 1,
            "review_runs": 3,
            "review_failures": 1,
            "facts_added": 2,
            "facts_refused": 1,
            "model_tokens": 460,
            "model_errors": 1,
        }
        agent = await memory.overview.GetActivity(
            md.GetActivityRequest(agent=md.AgentScope(agent_id="main"))
        )
        assert totals(agent)["messages"] == 9
        everyone = await memory.overview.GetActivity(md.GetActivityRequest())
        assert totals(everyone)["messages"] == 10

        # A range of its own: only the old message's day.
        day = dt.datetime.combine(past.date(), dt.time(), UTC)
        ranged = await memory.overview.GetActivity(
            md.GetActivityRequest(
                conversation=ada2,
                start_time=stamp(day + dt.timedelta(hours=5)),
                end_time=stamp(day + dt.timedelta(hours=7)),
            )
        )
        assert [p.start_time.ToDatetime(tzinfo=UTC) for p in ranged.points] == [day]
        assert ranged.start_time.ToDatetime(tzinfo=UTC) == day
        assert ranged.end_time.ToDatetime(tzinfo=UTC) == day + dt.timedelta(days=1)
        assert totals(ranged) == {"messages": 1}

        # A purged conversation takes its activity with it; its agent's counts keep it, as
        # numbers that name no one.
        await memory.conversations.PurgeConversation(md.PurgeConversationRequest(conversation=ada2))
        agent = await memory.overview.GetActivity(
            md.GetActivityRequest(agent=md.AgentScope(agent_id="main"))
        )
        assert totals(agent)["messages"] == 9
        after = await memory.overview.GetActivity(
            md.GetActivityRequest(owner=md.OwnerScope(agent_id="main", owner_id="ada"))
        )
        assert totals(after) == {
            "messages": 6,
            "compactions": 1,
            "review_runs": 2,
            "facts_added": 2,
            "facts_refused": 1,
            "model_tokens": 460,
        }


async def test_activity_refuses_what_it_cannot_answer(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home").start()
    now = dt.datetime.now(UTC)
    bad = {
        "two scopes": md.GetActivityRequest(
            conversation=conversation("ada", "a1"), owner=md.OwnerScope(owner_id="ada")
        ),
        "a conversation without a chat": md.GetActivityRequest(
            conversation=md.Conversation(channel="telegram")
        ),
        "an owner id too long": md.GetActivityRequest(owner=md.OwnerScope(owner_id="x" * 300)),
        "a reversed range": md.GetActivityRequest(
            start_time=stamp(now), end_time=stamp(now - dt.timedelta(days=1))
        ),
        "reversed within one hour": md.GetActivityRequest(
            bucket=md.ACTIVITY_BUCKET_HOUR,
            start_time=stamp(now.replace(minute=30)),
            end_time=stamp(now.replace(minute=10)),
        ),
        "a start after now": md.GetActivityRequest(start_time=stamp(now + dt.timedelta(days=2))),
        "too many hours": md.GetActivityRequest(
            bucket=md.ACTIVITY_BUCKET_HOUR, start_time=stamp(now - dt.timedelta(days=91))
        ),
        "an unknown bucket": md.GetActivityRequest(bucket=99),  # type: ignore[arg-type]
        "the end of time": md.GetActivityRequest(
            end_time=timestamp_pb2.Timestamp(seconds=253402300799)
        ),
        "a time out of range": md.GetActivityRequest(
            start_time=timestamp_pb2.Timestamp(seconds=-(10**12))
        ),
    }
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        for name, request in bad.items():
            error = await rpc_error(memory.overview.GetActivity(request))
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, error.details())
        # The longest range allowed, empty.
        longest = await memory.overview.GetActivity(
            md.GetActivityRequest(
                bucket=md.ACTIVITY_BUCKET_HOUR,
                start_time=stamp(now - dt.timedelta(days=89)),
            )
        )
        assert len(longest.points) in (89 * 24 + 1, 89 * 24 + 2)
        assert totals(longest) == {}


async def test_a_runs_applied_operations_show_each_row_before_and_after(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    server = start_server(tmp_path / "home", config=review_config(model, enabled=False)).start()
    chat = conversation("ada", "ops")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await commit(memory, chat, *turn("I live in Lisbon and drink tea"))
        model.reply(
            ops(
                {
                    "action": "add",
                    "target": "user",
                    "category": "identity",
                    "value": "Lives in Lisbon",
                },
                {
                    "action": "add",
                    "target": "user",
                    "category": "preference",
                    "value": "Drinks tea",
                },
            )
        )
        first = await review_now(memory, chat)
        listed = await memory.memory.ListMemories(
            md.ListMemoriesRequest(owner=md.OwnerScope(owner_id="ada"))
        )
        rows = {item.memory.value: item.memory.id for item in listed.memories}
        city, tea = rows["Lives in Lisbon"], rows["Drinks tea"]

        await commit(memory, chat, *turn("I moved to Porto, and I stopped drinking tea"))
        model.reply(
            ops(
                {"action": "replace", "id": city, "value": "Lives in Porto"},
                {"action": "archive", "id": tea, "reason": "stopped"},
                {"action": "archive", "id": 424242},
            )
        )
        second = await review_now(memory, chat)
        assert (second.ops_replaced, second.ops_archived, second.ops_skipped) == (1, 1, 1)

        runs = (
            await memory.reviews.ListReviewRuns(md.ListReviewRunsRequest(conversation=chat))
        ).runs
        by_id = {run.id: run for run in runs}
        applied = [
            (op.index, op.action, op.memory_id, op.value_before, op.value_after)
            for op in by_id[second.review_run_id].applied_operations
        ]
        assert applied == [
            (0, "replace", city, "Lives in Lisbon", "Lives in Porto"),
            (1, "archive", tea, "Drinks tea", "Drinks tea"),
        ]
        assert [
            (op.action, op.memory_id, op.value_before, op.value_after)
            for op in by_id[first.review_run_id].applied_operations
        ] == [("add", city, "", "Lives in Lisbon"), ("add", tea, "", "Drinks tea")]
        state = await memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=chat))
        assert len(state.last_run.applied_operations) == 2

        # A row deleted takes its operations (and the values they quote) with it.
        await memory.memory.DeleteMemory(md.DeleteMemoryRequest(conversation=chat, id=city))
        runs = (
            await memory.reviews.ListReviewRuns(md.ListReviewRunsRequest(conversation=chat))
        ).runs
        kept = [(op.action, op.memory_id) for run in runs for op in run.applied_operations]
        assert sorted(kept) == [("add", tea), ("archive", tea)]
        assert "Lisbon" not in str(runs)
        assert "Porto" not in str(runs)
