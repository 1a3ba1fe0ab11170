"""The reviewer under load, with a failing primary, across a restart, and from the CLI."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.server_process import ServerProcess
from tests.helpers import fresh_conversation, owner_of
from tests.review_helpers import after_a_scheduler_pass, commit, eventually, turn

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

ADD = json.dumps(
    {
        "operations": [
            {"action": "add", "target": "user", "category": "goal", "value": "Run a marathon"}
        ]
    }
)


async def test_the_fallback_answers_when_the_primary_times_out(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel() as primary, FakeModel() as fallback:
        primary.reply("too late", delay_seconds=3)
        fallback.reply(ADD)
        config = review_config(primary, fallback, timeout=1.0, enabled=False)
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversation = fresh_conversation()
            await commit(memory, conversation, *turn("I'm training for a marathon"))
            response = await memory.reviews.ReviewNow(
                md.ReviewNowRequest(conversation=conversation)
            )
            (result,) = response.reviews
            assert (result.status, result.provider, result.ops_added) == (
                md.REVIEW_STATUS_OK,
                "fake-1",
                1,
            )
            state = await memory.reviews.GetReviewState(
                md.GetReviewStateRequest(conversation=conversation)
            )
            assert state.last_run.model_calls == 2
            assert state.last_run.provider == "fake-1"
            # The log lines are written by the log thread a moment after the calls.
            await eventually(lambda: len(server.events(Event.MODEL_CALL)) >= 2)
        calls = server.events(Event.MODEL_CALL)
        assert [(c["provider"], c["error"]) for c in calls] == [
            ("fake-0", "timed out"),
            ("fake-1", None),
        ]
        assert calls[0]["agent"] == "memory_reviewer"
        assert calls[1]["session_id"].startswith(
            f"memory_review:{conversation.agent_id}:telegram:{conversation.chat_id}:root:"
        )
        assert calls[1]["prompt_tokens"] == 100


async def review_interrupted_then_restarted(
    start_server: type[ServerProcess], home: Path, *, crash: bool
) -> tuple[ServerProcess, md.Conversation, FakeModel]:
    """A review waits on a slow model when the server stops (or is killed); then a restart."""
    conversation = fresh_conversation()
    with FakeModel(default=Reply(content=ADD, delay_seconds=30)) as model:
        server = start_server(home, config=review_config(model)).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await commit(memory, conversation, *turn("I'm training for a marathon"))

            async def running() -> bool:
                state = await memory.reviews.GetReviewState(
                    md.GetReviewStateRequest(conversation=conversation)
                )
                return state.review_running

            await eventually(running)
        if crash:
            server.process.send_signal(signal.SIGKILL)
            server.wait_exit()
        else:
            assert server.stop() == 0
    model = FakeModel(default=Reply(content=ADD)).start()
    return start_server(home, config=review_config(model)).start(), conversation, model


async def test_an_interrupted_review_runs_again_after_restart_without_duplicates(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    for crash in (False, True):
        restarted, conversation, model = await review_interrupted_then_restarted(
            start_server, tmp_path / f"home-{crash}", crash=crash
        )
        try:
            if crash:  # the dead server's claim is cleared at start-up, not waited out
                assert restarted.events(Event.REVIEW_CLAIMS_CLEARED)[0]["claims"] == 1
            async with md.connect(restarted.address) as channel:
                memory = md.Stubs(channel)

                request = md.GetReviewStateRequest(conversation=conversation)

                async def reviewed(
                    memory: md.Stubs = memory,
                    request: md.GetReviewStateRequest = request,
                ) -> bool:
                    state = await memory.reviews.GetReviewState(request)
                    return state.last_review_status == md.REVIEW_STATUS_OK

                await eventually(reviewed)
                listed = await memory.memory.ListMemories(
                    md.ListMemoriesRequest(owner=owner_of(conversation))
                )
                assert [item.memory.value for item in listed.memories] == ["Run a marathon"]
                # Nothing new: no second review.
                first = await memory.reviews.GetReviewState(request)
                await after_a_scheduler_pass(memory)
                again = await memory.reviews.GetReviewState(request)
                assert not again.review_running
                assert again.last_run.id == first.last_run.id
                assert len(model.requests) == 2  # the first review and the witness's
        finally:
            model.stop()


async def test_many_due_conversations_are_reviewed_with_bounded_concurrency(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel(default=Reply(content="Nothing to save.", delay_seconds=0.05)) as model:
        config = review_config(model, review_concurrency=3)
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversations = [fresh_conversation() for _ in range(200)]
            await asyncio.gather(
                *(commit(memory, c, *turn(f"note {i}")) for i, c in enumerate(conversations))
            )

            async def all_reviewed() -> bool:
                states = await asyncio.gather(
                    *(
                        memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=c))
                        for c in conversations
                    )
                )
                return all(s.last_review_status == md.REVIEW_STATUS_NOTHING_TO_SAVE for s in states)

            await eventually(all_reviewed, within=60)
        assert len(model.requests) == 200
        assert model.max_in_flight == 3


async def test_the_review_command(start_server: type[ServerProcess], tmp_path: Path) -> None:
    with FakeModel(default=Reply(content=ADD)) as model:
        server = start_server(tmp_path / "home", config=review_config(model, enabled=False)).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            first = md.Conversation(channel="telegram", chat_id="42", thread_scope="a:b")
            second = md.Conversation(channel="slack", chat_id="7")
            for conversation in (first, second):
                await commit(memory, conversation, *turn("I'm training for a marathon"))

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "memoryd",
                    "memory",
                    "review",
                    "--now",
                    *args,
                    "--address",
                    server.address,
                ],
                capture_output=True,
                text=True,
                check=False,
                timeout=30,
            )

        only = run("--conversation", "telegram:42:a:b", "--json")
        assert only.returncode == 0, only.stderr
        document = json.loads(only.stdout)
        assert document["checked"] == 1
        assert document["reviews"][0]["conversation"]["thread_scope"] == "a:b"
        assert document["reviews"][0]["status"] == "REVIEW_STATUS_OK"
        everything = run()
        assert everything.stdout == "memory review completed: 1 conversation(s) checked\n"
        nothing = run()
        assert nothing.stdout == "memory review completed: 0 conversation(s) checked\n"
        bad = run("--conversation", "telegram")
        assert bad.returncode == 2
        assert "CHANNEL:CHAT[:THREAD]" in bad.stderr


async def test_a_failed_review_backs_off_before_the_scheduler_retries(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel(default=Reply(content=ADD)) as model:
        model.garbage()
        config = review_config(model, review_failure_backoff_ms=1500)
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversation = fresh_conversation()
            request = md.GetReviewStateRequest(conversation=conversation)
            await commit(memory, conversation, *turn("I'm training for a marathon"))

            async def failed() -> bool:
                return (await memory.reviews.GetReviewState(request)).failure_count == 1

            await eventually(failed)
            failed_at = (
                await memory.reviews.GetReviewState(request)
            ).last_review_failed_at.ToDatetime()

            async def recovered() -> bool:
                return (
                    await memory.reviews.GetReviewState(request)
                ).last_review_status == md.REVIEW_STATUS_OK

            await eventually(recovered)
            retried = (
                await memory.reviews.GetReviewState(request)
            ).last_run.started_at.ToDatetime()
            assert retried - failed_at >= dt.timedelta(milliseconds=1500)  # the server's record
            assert len(model.requests) == 2


async def test_turn_interval_triggers_a_review_before_the_interval(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel() as model:
        config = review_config(model, turn_interval=2)
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversation = fresh_conversation()
            await commit(memory, conversation, *turn("one"))  # never reviewed: due at once
            request = md.GetReviewStateRequest(conversation=conversation)

            async def first_review_recorded() -> bool:
                # Recorded, not only asked: a review that records after "two" is committed
                # leaves input behind (a backlog), which is reviewed again at once.
                state = await memory.reviews.GetReviewState(request)
                return state.last_run.id == 1 and not state.review_running

            await eventually(first_review_recorded)
            assert len(model.requests) == 1
            await commit(memory, conversation, *turn("two"))
            await after_a_scheduler_pass(memory)
            # One turn since: the 24 h interval holds (the second request is the witness's).
            waiting = await memory.reviews.GetReviewState(request)
            assert waiting.pending_input
            assert not waiting.review_running
            assert waiting.last_run.id == 1
            await commit(memory, conversation, *turn("three"))
            await eventually(lambda: len(model.requests) == 3)


async def test_one_review_per_conversation_at_a_time(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel(default=Reply(content="Nothing to save.", delay_seconds=1)) as model:
        config = review_config(model, enabled=False)
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversation = fresh_conversation()
            await commit(memory, conversation, *turn("hello"))
            request = md.ReviewNowRequest(conversation=conversation)
            first, second = await asyncio.gather(
                memory.reviews.ReviewNow(request), memory.reviews.ReviewNow(request)
            )
        statuses = sorted(r.reviews[0].status for r in (first, second))
        assert statuses == [md.REVIEW_STATUS_NOTHING_TO_SAVE, md.REVIEW_STATUS_SKIPPED]
        skipped = next(
            r.reviews[0] for r in (first, second) if r.reviews[0].status == md.REVIEW_STATUS_SKIPPED
        )
        assert skipped.reason.startswith("concurrent_run")
        assert len(model.requests) == 1


async def test_idle_timeout_triggers_a_review_before_the_interval(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel() as model:
        config = review_config(model, idle_timeout_minutes=0.02)  # 1.2 s
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversation = fresh_conversation()
            await commit(memory, conversation, *turn("one"))
            await eventually(lambda: len(model.requests) == 1)
            await commit(memory, conversation, *turn("two"))
            listed = await memory.conversations.ListMessages(
                md.ListMessagesRequest(conversation=conversation)
            )
            said = listed.messages[-1]

            async def second_run() -> md.ReviewRun | None:
                state = await memory.reviews.GetReviewState(
                    md.GetReviewStateRequest(conversation=conversation)
                )
                # The model's request comes before the run's record: wait for the record.
                return state.last_run if state.last_run.max_message_id == said.id else None

            await eventually(second_run)
            run = await second_run()
            assert run is not None
            assert len(model.requests) == 2
            # The server's record: the review began once the conversation had been idle.
            idle = run.started_at.ToDatetime() - said.created_at.ToDatetime()
            assert idle >= dt.timedelta(seconds=1.2)
