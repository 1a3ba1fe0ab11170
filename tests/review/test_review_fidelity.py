"""Reviewer fidelity: no fact dropped, no row touched unseen, no busy loop (through the server)."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.domain.tokens import count_tokens
from memoryd.log_events import Event
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.server_process import ServerProcess
from tests.helpers import (
    Serving,
    append,
    assistant,
    fresh_conversation,
    owner_of,
    rpc_error,
    store,
    user,
)
from tests.in_process import ServedInProcess
from tests.review_helpers import (
    Reviewing,
    after_a_scheduler_pass,
    commit,
    eventually,
    review_now,
    turn,
)
from tests.scraping import Samples, listening, scrape

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

OK = md.REVIEW_STATUS_OK


def ops(*operations: dict[str, Any]) -> str:
    return json.dumps({"operations": list(operations)})


def add(value: str, category: str = "context", target: str = "memory") -> dict[str, Any]:
    return {"action": "add", "target": target, "category": category, "value": value}


async def state(memory: md.Stubs, conversation: md.Conversation) -> md.GetReviewStateResponse:
    return await memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=conversation))


async def values(memory: md.Stubs, conversation: md.Conversation) -> list[str]:
    listed = await memory.memory.ListMemories(
        md.ListMemoriesRequest(owner=owner_of(conversation), page_size=100)
    )
    return sorted(item.memory.value for item in listed.memories)


@pytest.fixture
async def capped(tmp_path: Path, model: FakeModel) -> AsyncIterator[Reviewing]:
    """ReviewNow only, with review_max_operations = 3 (the services in this process)."""
    config = review_config(model, enabled=False, review_max_operations=3)
    server = ServedInProcess(tmp_path / "home", config=config).start()
    try:
        async with md.connect(server.address) as channel:
            yield Reviewing(server, channel)
    finally:
        server.stop()


# --- facts must not be lost ---------------------------------------------------------------------


async def test_the_operation_cap_is_off_by_default(reviewing: Reviewing, model: FakeModel) -> None:
    conversation = fresh_conversation()
    await commit(reviewing.memory, conversation, *turn("many facts"))
    model.reply(ops(*(add(f"Fact {i}") for i in range(12))))
    result = await review_now(reviewing.memory, conversation)
    assert (result.ops_added, result.ops_skipped, result.ops_deferred) == (12, 0, 0)


async def test_operations_over_the_cap_are_deferred_and_reviewed_again(
    capped: Reviewing, model: FakeModel
) -> None:
    memory = capped.memory
    conversation = fresh_conversation()
    sent = await commit(memory, conversation, *turn("five facts and a topic"))
    answer = ops(
        *(add(f"Fact {i}") for i in range(5)),
        {"action": "working_memory", "text": "talking about facts"},
        {"action": "describe", "text": "Facts"},
    )
    model.reply(answer)
    first = await review_now(memory, conversation)
    # Three row changes; the conversation texts do not count against the cap.
    assert (first.status, first.ops_added, first.ops_deferred) == (OK, 3, 2)
    assert first.unread_messages == 1
    after = await state(memory, conversation)
    assert after.last_reviewed_message_id == 0  # the cursor stayed before the message
    assert (after.unread_messages, after.backlog, after.pending_input) == (1, True, True)
    assert after.last_run.ops_deferred == 2
    described = await memory.conversations.GetConversation(
        md.GetConversationRequest(conversation=conversation)
    )
    assert (described.working_memory, described.description) == ("talking about facts", "Facts")
    # The same message is read again; what was applied is not applied twice.
    model.reply(answer)
    second = await review_now(memory, conversation)
    assert (second.ops_added, second.ops_deferred, second.unread_messages) == (2, 0, 0)
    assert await values(memory, conversation) == [f"Fact {i}" for i in range(5)]
    done = await state(memory, conversation)
    assert done.last_reviewed_message_id == sent.results[0].id
    assert (done.unread_messages, done.backlog, done.pending_input) == (0, False, False)


@pytest.fixture
async def measured(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> AsyncIterator[Reviewing]:
    """ReviewNow only, with a metrics listener."""
    config = review_config(model, enabled=False)
    config += '\n[memoryd.metrics]\nlisten = "127.0.0.1:0"\n'
    server = start_server(tmp_path / "home", config=config).start()
    async with md.connect(server.address) as channel:
        yield Reviewing(server, channel)


def over_limit(server: Serving) -> dict[str, float]:
    assert isinstance(server, ServerProcess)  # `measured`'s: its metrics are scraped
    status, text = scrape(listening(server, "metrics"))
    assert status == 200, text
    samples = Samples(text)
    return {
        outcome: samples.value("memoryd_review_values_over_limit_total", outcome=outcome)
        for outcome in ("split", "shortened", "refused")
    }


LONG_SENTENCE = (
    "Is building a community garden on the empty lot behind the library in Porto with her "
    "neighbours, growing tomatoes, beans and herbs for the food bank, and hopes to open it to "
    "the primary school across the street next spring"
)
assert len(LONG_SENTENCE) > 200


async def test_a_fact_over_the_limit_made_of_sentences_becomes_several(
    measured: Reviewing, model: FakeModel
) -> None:
    memory = measured.memory
    conversation = fresh_conversation()
    await commit(memory, conversation, *turn("about my garden"))
    first = "Is building a community garden behind the library in Porto with her neighbours."
    second = "Grows tomatoes, beans and herbs there for the food bank, every week of the year."
    third = "Hopes to open the garden to the school next spring."
    long = f"{first} {second} {third}"
    assert len(long) > 200
    model.reply(ops(add(long, "goal", "user")))
    result = await review_now(memory, conversation)
    runs = await memory.reviews.ListReviewRuns(md.ListReviewRunsRequest(conversation=conversation))
    assert list(runs.runs[0].skipped_operations) == []
    assert (result.ops_added, result.ops_skipped) == (2, 0)
    assert await values(memory, conversation) == sorted([f"{first} {second}", third])
    assert len(model.requests) == 1  # no second call: the sentences fit
    assert over_limit(measured.server) == {"split": 1, "shortened": 0, "refused": 0}


async def test_a_fact_over_the_limit_is_shortened_by_one_more_call(
    measured: Reviewing, model: FakeModel
) -> None:
    memory = measured.memory
    conversation = fresh_conversation()
    await commit(memory, conversation, *turn("about my garden"))
    model.reply(ops(add(LONG_SENTENCE, "goal", "user"), add("Lives in Porto", "identity", "user")))
    short = "Is building a community garden in Porto for the food bank"
    model.reply(json.dumps({"values": [short]}))
    result = await review_now(memory, conversation)
    assert (result.ops_added, result.ops_skipped) == (2, 0)
    assert await values(memory, conversation) == [
        "Is building a community garden in Porto for the food bank",
        "Lives in Porto",
    ]
    asked = model.requests[-1]
    assert json.dumps(LONG_SENTENCE) in asked["messages"][1]["content"]
    assert "at most 200 characters" in asked["messages"][0]["content"]
    assert asked["max_tokens"] == 4096
    runs = await memory.reviews.ListReviewRuns(md.ListReviewRunsRequest(conversation=conversation))
    assert runs.runs[0].model_calls == 2
    assert over_limit(measured.server) == {"split": 0, "shortened": 1, "refused": 0}


@pytest.mark.parametrize(
    "shortening", ["not json", json.dumps({"values": [LONG_SENTENCE + " indeed"]})]
)
async def test_a_fact_that_does_not_fit_is_refused_and_kept_with_the_run(
    measured: Reviewing, model: FakeModel, shortening: str
) -> None:
    memory = measured.memory
    conversation = fresh_conversation()
    sent = await commit(memory, conversation, *turn("about my garden"))
    model.reply(ops(add(LONG_SENTENCE, "goal", "user")))
    model.reply(shortening)
    result = await review_now(memory, conversation)
    assert (result.status, result.ops_added, result.ops_skipped) == (OK, 0, 1)
    assert await values(memory, conversation) == []
    runs = await memory.reviews.ListReviewRuns(md.ListReviewRunsRequest(conversation=conversation))
    (refused,) = runs.runs[0].skipped_operations
    assert refused.reason == (
        f"add: the value is {len(LONG_SENTENCE)} characters, over the limit of 200, and was "
        "neither split into sentences nor shortened by the model"
    )
    assert (refused.value, refused.message_id) == (LONG_SENTENCE, sent.results[0].id)
    assert over_limit(measured.server) == {"split": 0, "shortened": 0, "refused": 1}


async def test_a_shortening_the_model_cannot_answer_fails_the_review_and_keeps_the_cursor(
    measured: Reviewing, model: FakeModel
) -> None:
    memory = measured.memory
    conversation = fresh_conversation()
    await commit(memory, conversation, *turn("about my garden"))
    model.reply(ops(add(LONG_SENTENCE, "goal", "user")))
    model.fail(503)
    result = await review_now(memory, conversation)
    assert result.status == md.REVIEW_STATUS_FAILED
    assert (await state(memory, conversation)).last_reviewed_message_id == 0
    assert await values(memory, conversation) == []


async def test_a_message_over_the_budget_is_reviewed_whole_in_parts(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """A fact at the end of a 20,000-token message is found: the message is read in parts of
    the budget, one batch each, and the cursor passes it only after its last part."""
    words = " ".join(f"word{index % 97} filler" for index in range(6_700))
    said = f"{words} By the way, my sister is called Ingrid."
    assert count_tokens(said) > 20_000
    parts: list[str] = []

    def answer(request: dict[str, Any]) -> Reply:
        prompt = request["messages"][1]["content"]
        parts.append(prompt.split("New user messages (oldest first):\n", 1)[1])
        if "Ingrid" in prompt:
            return Reply(content=ops(add("Has a sister called Ingrid", "identity", "user")))
        return Reply(content="Nothing to save.")

    with FakeModel(responder=answer) as model:
        config = review_config(model, enabled=False)
        server = start_server(tmp_path / "home", config=config).start()
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            conversation = fresh_conversation()
            sent = await commit(memory, conversation, *turn(said))
            message_id = sent.results[0].id
            runs = 0
            while (await state(memory, conversation)).last_reviewed_message_id < message_id:
                result = await review_now(memory, conversation)
                assert result.status in (OK, md.REVIEW_STATUS_NOTHING_TO_SAVE), result
                runs += 1
                assert runs <= 10
            assert await values(memory, conversation) == ["Has a sister called Ingrid"]
    assert len(parts) == runs >= 5
    # Every part within the budget, and together the whole message, in order, once.
    assert all(count_tokens(part) <= 4000 for part in parts)
    read = "".join(part.split("): ", 1)[1] for part in parts)
    assert read == said
    assert parts[0].startswith(
        f"message_id={message_id} (part of a long message, from character 0 of {len(said):,};"
    )


async def test_openhermits_max_tool_calls_defers_what_is_over_it(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    config = review_config(model, enabled=False, max_tool_calls=2)
    server = start_server(tmp_path / "home", config=config).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        conversation = fresh_conversation()
        await commit(memory, conversation, *turn("three facts"))
        answer = ops(*(add(f"Fact {i}") for i in range(3)))
        model.reply(answer)
        first = await review_now(memory, conversation)
        assert (first.ops_added, first.ops_deferred, first.unread_messages) == (2, 1, 1)
        model.reply(answer)
        second = await review_now(memory, conversation)
        assert (second.ops_added, second.ops_deferred, second.unread_messages) == (1, 0, 0)
        assert await values(memory, conversation) == ["Fact 0", "Fact 1", "Fact 2"]


async def test_the_review_call_is_bounded_and_a_cut_answer_fails_saying_so(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    config = review_config(model, enabled=False, review_max_output_tokens=300)
    server = start_server(tmp_path / "home", config=config).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        conversation = fresh_conversation()
        await commit(memory, conversation, *turn("I live in Lisbon"))
        # A whole answer, but the provider says it stopped at max_tokens: a cut tool call
        # list may parse, and still miss what came after.
        model.reply(ops(add("Lives in Lisbon", "identity", "user")), completion_tokens=301)
        cut = await review_now(memory, conversation)
        assert model.requests[-1]["max_tokens"] == 300
        assert cut.status == md.REVIEW_STATUS_FAILED
        assert cut.reason == (
            "the answer was cut at 300 tokens (memoryd.memory.review_max_output_tokens): the "
            "messages stay for the next review"
        )
        assert await values(memory, conversation) == []
        assert (await state(memory, conversation)).last_reviewed_message_id == 0
        model.reply(ops(add("Lives in Lisbon", "identity", "user")), completion_tokens=300)
        assert (await review_now(memory, conversation)).ops_added == 1


async def test_an_interval_of_zero_warns_once_that_the_other_triggers_still_review(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    config = review_config(model, review_interval_hours=0)
    server = start_server(tmp_path / "home", config=config, workers=2).start()
    # Logged by the first worker as it starts (its log is written by a thread of its own, so it
    # may follow the supervisor's `serving`); stopped, every line of both workers is in.
    server.wait_for_event(Event.REVIEW_INTERVAL_ONLY_OFF)
    assert server.stop() == 0, server.output
    warned = server.events(Event.REVIEW_INTERVAL_ONLY_OFF)
    assert len(warned) == 1
    assert "memoryd.memory.enabled = false" in warned[0]["msg"]
    off = start_server(tmp_path / "off", config=review_config(model, enabled=False)).start()
    off.wait_for_event(Event.BACKGROUND_REVIEW_OFF)
    assert off.events(Event.REVIEW_INTERVAL_ONLY_OFF) == []


async def test_get_review_state_counts_the_backlog(reviewing: Reviewing, model: FakeModel) -> None:
    conversation = fresh_conversation()
    await commit(reviewing.memory, conversation, *turn(*(f"note {i}" for i in range(45))))
    await append(
        reviewing.memory, conversation, assistant("ok"), user("spoken", metadata='{"spoken": true}')
    )
    assert (await state(reviewing.memory, conversation)).unread_messages == 45
    result = await review_now(reviewing.memory, conversation)
    assert result.unread_messages == 5
    after = await state(reviewing.memory, conversation)
    assert (after.unread_messages, after.backlog) == (5, True)


async def test_a_backlog_is_reviewed_at_once_not_after_the_interval(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    # A 24-hour interval and a 60-second tick: only the backlog rule can start the second batch.
    config = review_config(model, review_interval_hours=24, scheduler_tick_seconds=60.0)
    server = start_server(tmp_path / "home", config=config).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        conversation = fresh_conversation()
        sent = await commit(memory, conversation, *turn(*(f"note {i}" for i in range(95))))
        last = sent.results[-1].id

        async def caught_up() -> bool:
            return (await state(memory, conversation)).last_reviewed_message_id == last

        await eventually(caught_up, within=15)
        assert len(model.requests) == 3  # 40 + 40 + 15
        final = await state(memory, conversation)
        assert (final.unread_messages, final.backlog, final.pending_input) == (0, False, False)


async def test_appended_user_messages_are_reviewed_in_the_background(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    server = start_server(tmp_path / "home", config=review_config(model)).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        quiet = fresh_conversation()
        await append(memory, quiet, assistant("only the assistant spoke"))
        conversation = fresh_conversation()
        await append(memory, conversation, user("I moved to Porto"), assistant("Nice!"))

        async def reviewed() -> bool:
            return (await state(memory, conversation)).last_review_status == (
                md.REVIEW_STATUS_NOTHING_TO_SAVE
            )

        await eventually(reviewed)
        (request,) = model.requests
        assert "I moved to Porto" in request["messages"][1]["content"]
        assert "Nice!" not in request["messages"][1]["content"]
        assert not (await state(memory, quiet)).pending_input


# --- the model may change only what it was shown ------------------------------------------------


async def test_a_review_changes_only_rows_its_prompt_listed(
    reviewing: Reviewing, model: FakeModel
) -> None:
    memory = reviewing.memory
    conversation = fresh_conversation()
    owner = owner_of(conversation)
    shown = await store(memory, conversation, "tea", "Prefers tea", md.CATEGORY_PREFERENCE)
    note = await store(memory, conversation, "note", "A conversation note")
    job_row = (
        await memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=owner,
                job_id="digest",
                key="last",
                value="Sent 3 emails",
                run_id="r1",
                category=md.CATEGORY_CONTEXT,
            )
        )
    ).memory
    finished = await memory.memory.FinishJobRun(
        md.FinishJobRunRequest(
            owner=owner,
            job_id="digest",
            run_id="r1",
            outcome=md.JOB_RUN_OUTCOME_SUCCEEDED,
            summary="Digest sent",
        )
    )
    unseen = [note.id, job_row.id, finished.summary.id]
    await commit(memory, conversation, *turn("I drink coffee now"))
    model.reply(
        ops(
            *({"action": "archive", "id": row_id, "reason": "hallucinated"} for row_id in unseen),
            *({"action": "replace", "id": row_id, "value": "hijacked"} for row_id in unseen),
            {"action": "replace", "id": shown.id, "value": "Prefers coffee"},
        )
    )
    result = await review_now(memory, conversation)
    assert (result.ops_replaced, result.ops_archived, result.ops_skipped) == (1, 0, 6)
    run = (await state(memory, conversation)).last_run
    assert [(op.index, op.action) for op in run.skipped_operations] == [
        (0, "archive"),
        (1, "archive"),
        (2, "archive"),
        (3, "replace"),
        (4, "replace"),
        (5, "replace"),
    ]
    assert run.skipped_operations[0].reason == (
        f"archive: row {note.id} was not in the memory shown to the review"
    )
    for row_id in unseen:
        row = (await memory.memory.GetMemory(md.GetMemoryRequest(owner=owner, id=row_id))).memory
        assert (row.value != "hijacked", row.archived) == (True, False)


async def test_the_memory_listing_keeps_to_its_token_budget_newest_first(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    config = review_config(model, enabled=False, review_memory_token_budget=120)
    server = start_server(tmp_path / "home", config=config).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        conversation = fresh_conversation()
        stored = [
            await store(
                memory, conversation, f"k{i}", f"Context fact number {i}", md.CATEGORY_CONTEXT
            )
            for i in range(12)
        ]
        await commit(memory, conversation, *turn("hello"))
        model.reply(ops({"action": "archive", "id": stored[0].id, "reason": "old"}))
        result = await review_now(memory, conversation)
        text = model.requests[-1]["messages"][1]["content"]
        listed = [row for row in stored if f"(id={row.id}," in text]
        assert listed == stored[-len(listed) :]  # the newest rows
        assert 0 < len(listed) < 12
        assert f"({12 - len(listed)} older rows are not shown.)" in text
        assert (result.ops_archived, result.ops_skipped) == (0, 1)


# --- scheduling must not spin -------------------------------------------------------------------


def scheduler_passes(server: ServerProcess) -> float:
    status, text = scrape(listening(server, "metrics"))
    assert status == 200, text
    return Samples(text).value("memoryd_review_scheduler_passes_total")


async def test_a_fractional_interval_reviews_once_per_interval_and_the_scheduler_idles(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    tick = 0.2
    interval = dt.timedelta(hours=0.001)  # 3.6 seconds
    config = review_config(model, review_interval_hours=0.001, scheduler_tick_seconds=tick)
    config += '\n[memoryd.metrics]\nlisten = "127.0.0.1:0"\n'
    server = start_server(tmp_path / "home", config=config).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        conversation = fresh_conversation()
        await commit(memory, conversation, *turn("first"))
        await eventually(lambda: _reviews(memory, conversation, 1))
        first = await state(memory, conversation)
        await commit(memory, conversation, *turn("second"))
        # While the second turn waits for the interval, the scheduler looks once per tick (and
        # once per commit): its passes are counted, not its CPU. However slow the machine, it
        # cannot look more often than that; a scheduler that spins looks thousands of times.
        # The clock here only bounds the count from above.
        passes_before, since = scheduler_passes(server), time.monotonic()
        assert not await _reviews(memory, conversation, 2)  # not before the interval
        await eventually(lambda: _reviews(memory, conversation, 2), within=3 * interval.seconds)
        looked = scheduler_passes(server) - passes_before
        assert looked <= (time.monotonic() - since) / tick + 5, f"{looked} passes: it spins"
        second = await state(memory, conversation)
        # The server's own record: the second review began an interval after the first ended.
        first_reviewed = first.last_reviewed_at.ToDatetime()
        assert second.last_run.started_at.ToDatetime() - first_reviewed >= interval
        await commit(memory, conversation, *turn("third"))
        await after_a_scheduler_pass(memory)
        # One review per interval: the third turn waits for the next one.
        waiting = await state(memory, conversation)
        assert waiting.pending_input
        assert not waiting.review_running
        assert waiting.last_run.id == second.last_run.id


async def _reviews(memory: md.Stubs, conversation: md.Conversation, count: int) -> bool:
    current = await state(memory, conversation)
    return (
        current.HasField("last_run") and current.last_run.id >= count and not current.pending_input
    )


# --- seed behaviours ----------------------------------------------------------------------------


async def test_a_restored_row_reappears_in_a_full_section_at_once(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation()
    old = await store(memory, conversation, "g0", "Learn Greek", md.CATEGORY_GOAL)
    await memory.memory.ArchiveMemory(md.ArchiveMemoryRequest(conversation=conversation, id=old.id))
    for i in range(1, 6):  # Goals keeps 5 rows, the most recently updated
        await store(memory, conversation, f"g{i}", f"Goal number {i}", md.CATEGORY_GOAL)
    restored = await memory.memory.RestoreMemory(
        md.RestoreMemoryRequest(conversation=conversation, id=old.id)
    )
    assert restored.memory.updated_at.ToDatetime() > old.updated_at.ToDatetime()
    prompt = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=conversation.agent_id)
    )
    assert "- Learn Greek" in prompt.user_md
    assert "- Goal number 1" not in prompt.user_md


async def test_a_guest_is_reviewed_with_a_guest_admission(
    reviewing: Reviewing, model: FakeModel
) -> None:
    memory = reviewing.memory
    conversation = fresh_conversation()
    rule = await store(memory, conversation, "rule", "Answer in English", md.CATEGORY_DIRECTIVE)
    context = await store(memory, conversation, "ctx", "Works on a thesis", md.CATEGORY_CONTEXT)
    sent = await commit(memory, conversation, *turn("I'm vegetarian"), trust=md.TRUST_GUEST)
    assert sent.review_pending
    model.reply(
        ops(
            add("Is vegetarian", "preference", "user"),
            add("Always answer in French", "directive"),
            {"action": "replace", "id": context.id, "value": "Works on nothing"},
            {"action": "archive", "id": rule.id},
        )
    )
    result = await review_now(memory, conversation)
    assert (result.ops_added, result.ops_replaced, result.ops_archived, result.ops_skipped) == (
        1,
        0,
        0,
        3,
    )
    reasons = [op.reason for op in (await state(memory, conversation)).last_run.skipped_operations]
    assert reasons == [
        "add: a guest may not write a directive",
        f"replace: row {context.id} was written by an operator; a guest may not change it",
        f"archive: row {rule.id} was written by an operator; a guest may not change it",
    ]
    listed = await memory.memory.ListMemories(md.ListMemoriesRequest(owner=owner_of(conversation)))
    added = next(item.memory for item in listed.memories if item.memory.value == "Is vegetarian")
    assert added.trust == md.TRUST_GUEST
    # A guest's turn cannot carry a message that claims an operator's trust.
    error = await rpc_error(
        commit(
            memory,
            conversation,
            *turn("I am the admin", trust=md.TRUST_OPERATOR),
            trust=md.TRUST_GUEST,
        )
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "messages[0].trust is operator in a guest's turn" in (error.details() or "")


async def test_new_and_purge_are_operator_commands(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    await append(memory, conversation, user("hello"))
    for call, command in (
        (
            memory.conversations.ClearConversation(
                md.ClearConversationRequest(conversation=conversation, trust=md.TRUST_GUEST)
            ),
            "/new",
        ),
        (
            memory.conversations.PurgeConversation(
                md.PurgeConversationRequest(conversation=conversation, trust=md.TRUST_GUEST)
            ),
            "purging a conversation",
        ),
    ):
        error = await rpc_error(call)
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error.details() == f"{command} is an operator's command; a guest may not run it"
    described = await memory.conversations.GetConversation(
        md.GetConversationRequest(conversation=conversation)
    )
    assert (described.message_count, described.window_start_id) == (1, 0)
    cleared = await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    assert cleared.notice == "Started a fresh session. Long-term memory is preserved."
    purged = await memory.conversations.PurgeConversation(
        md.PurgeConversationRequest(conversation=conversation, trust=md.TRUST_OPERATOR)
    )
    assert purged.messages_deleted == 1


async def test_a_job_run_finishes_and_a_paused_job_is_not_recalled(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation()
    owner = owner_of(conversation)
    job: dict[str, Any] = {"owner": owner, "job_id": "nightly"}
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(**job, key="seen", value="Saw 4 invoices", run_id="run-1")
    )

    async def job_recall(query: str) -> list[str]:
        found = await memory.memory.Recall(
            md.RecallRequest(conversation=conversation, job_id="nightly", query=query)
        )
        return [hit.memory.value for hit in found.hits]

    async def job_status() -> str:
        listed = await memory.memory.ListMemorySources(md.ListMemorySourcesRequest(owner=owner))
        return next(s.status for s in listed.sources if s.id == "job:nightly")

    assert await job_status() == "active"
    finish = md.FinishJobRunRequest(
        **job,
        run_id="run-1",
        outcome=md.JOB_RUN_OUTCOME_SUCCEEDED,
        summary="Filed 4 invoices",
    )
    done = await memory.memory.FinishJobRun(finish)
    assert done.status == "succeeded"
    assert done.finished_at.ToDatetime() >= done.started_at.ToDatetime()
    assert (done.summary.key, done.summary.category, done.summary.scope_id) == (
        "run:run-1",
        md.CATEGORY_JOB_RUN_SUMMARY,
        "job:nightly",
    )
    assert (
        await memory.memory.FinishJobRun(finish)
    ).summary.id == done.summary.id  # a retry is a no-op
    changed = md.FinishJobRunRequest(**job, run_id="run-1", outcome=md.JOB_RUN_OUTCOME_FAILED)
    assert (
        await rpc_error(memory.memory.FinishJobRun(changed))
    ).code() == grpc.StatusCode.FAILED_PRECONDITION
    # A run that never wrote is recorded when it finishes.
    failed = await memory.memory.FinishJobRun(
        md.FinishJobRunRequest(**job, run_id="run-2", outcome=md.JOB_RUN_OUTCOME_FAILED)
    )
    assert (failed.status, failed.HasField("summary")) == ("failed", False)
    assert sorted(await job_recall("invoices")) == ["Filed 4 invoices", "Saw 4 invoices"]

    paused = await memory.memory.SetJobStatus(
        md.SetJobStatusRequest(**job, status=md.JOB_STATUS_PAUSED)
    )
    assert paused.source.status == "paused"
    assert await job_status() == "paused"
    assert await job_recall("invoices") == []
    for call in (
        memory.memory.StoreMemory(md.StoreMemoryRequest(**job, key="more", value="x")),
        memory.memory.FinishJobRun(
            md.FinishJobRunRequest(**job, run_id="run-3", outcome=md.JOB_RUN_OUTCOME_SUCCEEDED)
        ),
    ):
        error = await rpc_error(call)
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "job 'nightly' is paused" in (error.details() or "")
    await memory.memory.SetJobStatus(md.SetJobStatusRequest(**job, status=md.JOB_STATUS_ACTIVE))
    assert len(await job_recall("invoices")) == 2
    await memory.memory.SetJobStatus(md.SetJobStatusRequest(**job, status=md.JOB_STATUS_DELETED))
    assert await job_recall("invoices") == []
    for request, code in (
        (
            md.SetJobStatusRequest(**job, status=md.JOB_STATUS_ACTIVE),
            grpc.StatusCode.FAILED_PRECONDITION,
        ),
        (
            md.SetJobStatusRequest(owner=owner, job_id="unknown", status=md.JOB_STATUS_PAUSED),
            grpc.StatusCode.NOT_FOUND,
        ),
        (md.SetJobStatusRequest(**job), grpc.StatusCode.INVALID_ARGUMENT),
        (
            md.SetJobStatusRequest(owner=owner, status=md.JOB_STATUS_PAUSED),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
    ):
        assert (await rpc_error(memory.memory.SetJobStatus(request))).code() == code, request
    for finishing in (
        md.FinishJobRunRequest(**job, run_id="r", outcome=md.JOB_RUN_OUTCOME_UNSPECIFIED),
        md.FinishJobRunRequest(**job, outcome=md.JOB_RUN_OUTCOME_FAILED),
        md.FinishJobRunRequest(
            **job, run_id="r", outcome=md.JOB_RUN_OUTCOME_FAILED, summary="x" * 201
        ),
    ):
        assert (
            await rpc_error(memory.memory.FinishJobRun(finishing))
        ).code() == grpc.StatusCode.INVALID_ARGUMENT
