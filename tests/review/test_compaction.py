"""CompactionService through the real server, with the fake model server: the composed context,
the reference's compactor scenarios, the four /compact outcomes, pre-flight and post-delivery
checks, the backoff, the checkpoint chain, and that nothing is lost."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.domain.compaction import PREFLIGHT_NOTICE
from memoryd.domain.model_calls import no_provider
from memoryd.domain.tokens import count_tokens
from memoryd.log_events import Event
from memoryd.storage.connection import SqliteConnection
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.server_process import ServerProcess
from tests.helpers import Serving, append, fresh_conversation, owner_of, rpc_error
from tests.in_process import ServedInProcess
from tests.memory.test_resources import cli
from tests.review_helpers import eventually, turn

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

SUMMARY = "The user is planning a trip to Lisbon in May and prefers trains."
WINDOW = 2000  # budget 1000, kept messages up to 500 tokens, limit 1700


class Compacting:
    """A started server (review off in the background), its stubs and its fake model."""

    def __init__(self, server: Serving, channel: Any, model: FakeModel) -> None:
        self.server = server
        self.memory = md.Stubs(channel)
        self.compaction = md.Stubs(channel)
        self.model = model

    async def compose(
        self, conversation: md.Conversation, **fields: Any
    ) -> md.ComposeContextResponse:
        fields.setdefault("context_window", WINDOW)
        return await self.compaction.context.ComposeContext(
            md.ComposeContextRequest(conversation=conversation, **fields)
        )

    async def compact(self, conversation: md.Conversation, **fields: Any) -> md.CompactResponse:
        fields.setdefault("context_window", WINDOW)
        return await self.compaction.context.Compact(
            md.CompactRequest(conversation=conversation, **fields)
        )

    async def state(self, conversation: md.Conversation) -> md.GetCompactionStateResponse:
        return await self.compaction.context.GetCompactionState(
            md.GetCompactionStateRequest(conversation=conversation)
        )


def summaries_or_nothing(request: dict[str, Any]) -> Reply:
    """The summary for a compaction's request; "Nothing to save." for a review's."""
    system = request["messages"][0]["content"]
    return Reply(content=SUMMARY if "compact a conversation" in system else "Nothing to save.")


async def start(
    start_server: type[ServerProcess], home: Path, model: FakeModel, **compaction: Any
) -> AsyncIterator[Compacting]:
    config = review_config(model, enabled=False, compaction=compaction or None)
    server = start_server(home, config=config).start()
    async with md.connect(server.address) as channel:
        yield Compacting(server, channel, model)


@pytest.fixture
async def compacting(tmp_path: Path) -> AsyncIterator[Compacting]:
    """memoryd's services in this process (tests/in_process.py), with a model that summarizes."""
    with FakeModel(responder=summaries_or_nothing) as model:
        config = review_config(model, enabled=False)
        server = ServedInProcess(tmp_path / "home", config=config).start()
        try:
            async with md.connect(server.address) as channel:
                yield Compacting(server, channel, model)
        finally:
            server.stop()


# Words that are one token each, with or without a leading space.
WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "table",
    "chair",
    "green",
    "house",
    "water",
    "light",
    "music",
    "paper",
    "world",
    "heart",
    "money",
    "party",
    "night",
    "power",
    "story",
    "field",
    "horse",
    "metal",
    "plant",
    "trade",
    "train",
]


def words(count: int, word: str = "apple") -> str:
    """A text of `count` tokens (one token per space-led word)."""
    text = " ".join([word] * count)
    assert count_tokens(text) == count
    return text


def filler(count: int, tokens: int, word: str = "apple") -> list[md.NewMessage]:
    """Assistant messages of `tokens` tokens each (no review reads them)."""
    return [
        md.NewMessage(role=md.ROLE_ASSISTANT, sender="bot", content=words(tokens, word))
        for _ in range(count)
    ]


def kinds(response: md.ComposeContextResponse) -> list[int]:
    return [part.kind for part in response.parts]


def compaction_requests(model: FakeModel) -> list[dict[str, Any]]:
    return [r for r in model.requests if "compact a conversation" in r["messages"][0]["content"]]


# --- ComposeContext ------------------------------------------------------------------------


async def test_compose_context_orders_blocks_then_messages_with_their_tokens(
    compacting: Compacting,
) -> None:
    conversation = fresh_conversation()
    owner = owner_of(conversation)
    await compacting.memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=owner,
            category=md.CATEGORY_PREFERENCE,
            key="drink",
            value="Drinks oat flat whites",
        )
    )
    for key, value in (("deploys", "Deploys go out on Tuesdays"), ("style", "Answers briefly")):
        await compacting.memory.memory.StoreMemory(  # agent-scope rows that MEMORY.md renders
            md.StoreMemoryRequest(owner=owner, category=md.CATEGORY_CONTEXT, key=key, value=value)
        )
    for key, value in (("launch", "Launch the beta in May"), ("hiring", "Hire two engineers")):
        await compacting.memory.memory.StoreMemory(  # agent-scope rows no prompt file renders
            md.StoreMemoryRequest(
                owner=owner,
                category=md.CATEGORY_GOAL,
                scope_type=md.SCOPE_TYPE_AGENT,
                key=key,
                value=value,
            )
        )
    compacting.model.reply(
        json.dumps({"operations": [{"action": "working_memory", "text": "Drafting the Q3 plan"}]})
    )
    await append(
        compacting.memory,
        conversation,
        md.NewMessage(role=md.ROLE_SYSTEM, sender="bot", content="You are a helpful assistant."),
        md.NewMessage(role=md.ROLE_USER, sender="ada", content="Where were we?"),
        md.NewMessage(role=md.ROLE_ASSISTANT, sender="bot", content="On the Q3 plan."),
    )
    await compacting.memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=conversation))

    composed = await compacting.compose(conversation)

    assert kinds(composed) == [
        md.CONTEXT_PART_KIND_MEMORY_CONTEXT,
        md.CONTEXT_PART_KIND_WORKING_MEMORY,
        md.CONTEXT_PART_KIND_RECENT_ENTRIES,
        md.CONTEXT_PART_KIND_MESSAGE,
        md.CONTEXT_PART_KIND_MESSAGE,
        md.CONTEXT_PART_KIND_MESSAGE,
    ]
    memory_block, working, entries, system, user, assistant = composed.parts
    prompt = await compacting.memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=owner.agent_id, owner_id=owner.owner_id)
    )
    assert memory_block.content == prompt.context_block
    assert "Drinks oat flat whites" in memory_block.content
    assert working.content.endswith("\nDrafting the Q3 plan")
    assert entries.content.endswith(
        "## hiring\nHire two engineers\n\n## launch\nLaunch the beta in May"
    )  # most recently updated first
    # A row in MEMORY.md is sent once: in the memory block, not again as a recent entry.
    everything = "\n".join(part.content for part in composed.parts)
    for value in ("Deploys go out on Tuesdays", "Answers briefly"):
        assert value in memory_block.content
        assert everything.count(value) == 1, value
    assert all(part.role == md.ROLE_SYSTEM for part in (memory_block, working, entries, system))
    assert (user.role, user.content, user.sender) == (md.ROLE_USER, "Where were we?", "ada")
    assert assistant.message_id > user.message_id > system.message_id > 0
    for part in composed.parts:
        assert part.tokens == count_tokens(part.content)
    assert composed.total_tokens == sum(part.tokens for part in composed.parts)
    assert composed.limit_tokens == int(0.85 * WINDOW)
    described = await compacting.memory.conversations.GetConversation(
        md.GetConversationRequest(conversation=conversation)
    )
    assert composed.history_version == described.history_version
    assert (composed.omitted_messages, composed.memory_withheld) == (0, False)

    guest = await compacting.compose(conversation, trust=md.TRUST_GUEST)
    assert guest.memory_withheld
    assert md.CONTEXT_PART_KIND_MEMORY_CONTEXT not in kinds(guest)
    assert md.CONTEXT_PART_KIND_RECENT_ENTRIES not in kinds(guest)
    assert "oat flat whites" not in json.dumps([part.content for part in guest.parts])


async def test_compose_context_of_a_conversation_where_nothing_was_said_is_its_memory(
    compacting: Compacting,
) -> None:
    """An assistant's first call, before anything was said: the memory block alone (it was
    NOT_FOUND before), and a conversation still unknown afterwards (composing writes nothing)."""
    conversation = fresh_conversation()
    await compacting.memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=owner_of(conversation),
            category=md.CATEGORY_IDENTITY,
            key="name",
            value="Is called Nora",
        )
    )
    composed = await compacting.compose(conversation)
    assert [part.kind for part in composed.parts] == [md.CONTEXT_PART_KIND_MEMORY_CONTEXT]
    assert "Is called Nora" in composed.parts[0].content
    assert composed.history_version == 0
    guest = await compacting.compose(conversation, trust=md.TRUST_GUEST)
    assert list(guest.parts) == []  # a guest never receives the memory block
    missing = await rpc_error(
        compacting.memory.conversations.GetConversation(
            md.GetConversationRequest(conversation=conversation)
        )
    )
    assert missing.code() == grpc.StatusCode.NOT_FOUND


async def test_compose_context_leaves_the_oldest_out_but_never_out_of_history(
    compacting: Compacting,
) -> None:
    conversation = fresh_conversation()
    texts = [words(100, WORDS[index]) for index in range(25)]  # 2,500 tokens: over 1,700
    await append(
        compacting.memory,
        conversation,
        *(md.NewMessage(role=md.ROLE_USER, sender="ada", content=text) for text in texts),
    )
    composed = await compacting.compose(conversation)
    assert composed.total_tokens <= composed.limit_tokens == 1700
    shown = [part.content for part in composed.parts]
    assert shown == texts[-17:]  # the newest that fit, oldest first
    assert (composed.omitted_messages, composed.omitted_tokens) == (8, 800)
    listed = await compacting.memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation, page_size=100)
    )
    assert [m.content for m in listed.messages] == texts


async def test_compose_context_refuses_a_window_too_small_for_its_blocks(
    compacting: Compacting,
) -> None:
    conversation = fresh_conversation()
    await append(
        compacting.memory,
        conversation,
        md.NewMessage(role=md.ROLE_SYSTEM, sender="bot", content=words(200)),
    )
    error = await rpc_error(compacting.compose(conversation, context_window=100))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        "the context limit is 85 tokens (threshold x context_window), but the system blocks "
        "and the session's leading system messages alone take 200; give a larger context_window"
    )


# --- Compact: the reference's scenarios and the four outcomes ------------------------------


async def test_compact_keeps_protected_system_messages_and_a_tool_call_with_its_result(
    compacting: Compacting,
) -> None:
    conversation = fresh_conversation()
    system = md.NewMessage(role=md.ROLE_SYSTEM, sender="bot", content="You are a travel agent.")
    old = [
        md.NewMessage(role=md.ROLE_USER, sender="ada", content=words(150, "trip")),
        md.NewMessage(role=md.ROLE_ASSISTANT, sender="bot", content=words(150, "sure")),
        md.NewMessage(role=md.ROLE_USER, sender="ada", content=words(150, "city")),
    ]
    # The budget keeps 500 tokens: the result (300) and the newest (100) fit, the call (200)
    # would not, but stays with its result.
    call = md.NewMessage(
        role=md.ROLE_ASSISTANT,
        sender="bot",
        content=words(200, "search"),
        metadata='{"tool_calls": [{"id": "c1"}]}',
    )
    result = md.NewMessage(
        role=md.ROLE_TOOL,
        sender="tool",
        content=words(300, "train"),
        metadata='{"tool_call_id": "c1"}',
    )
    newest = md.NewMessage(role=md.ROLE_ASSISTANT, sender="bot", content=words(100, "done"))
    stored = await append(compacting.memory, conversation, system, *old, call, result, newest)
    ids = [item.id for item in stored.results]

    compacted = await compacting.compact(conversation)

    before = 6 + 450 + 600  # the protected system message, then everything else
    after = 6 + count_tokens(SUMMARY) + 600
    assert count_tokens("You are a travel agent.") == 6
    assert compacted.outcome == md.COMPACTION_OUTCOME_COMPACTED
    assert compacted.message == f"Compacted: {before:,} -> {after:,} tokens."
    (request,) = compaction_requests(compacting.model)
    prompt = request["messages"][1]["content"]
    assert "at most 250 tokens" in request["messages"][0]["content"]  # max(1000 / 4, 64)
    assert request["reasoning_effort"] == "medium"
    for text in (words(150, "trip"), words(150, "sure"), words(150, "city")):
        assert f"] {text}" in prompt
    for text in ("You are a travel agent.", words(200, "search"), words(100, "done")):
        assert text not in prompt
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d user\] trip trip", prompt, re.MULTILINE)

    composed = await compacting.compose(conversation)
    assert (
        kinds(composed)
        == [md.CONTEXT_PART_KIND_CHECKPOINT_SUMMARY] + [md.CONTEXT_PART_KIND_MESSAGE] * 4
    )
    assert composed.parts[0].content == f"Conversation checkpoint summary:\n{SUMMARY}"
    assert composed.parts[0].message_id == 0
    assert [part.message_id for part in composed.parts[1:]] == [ids[0], ids[4], ids[5], ids[6]]
    state = await compacting.state(conversation)
    assert state.checkpoint.id == compacted.checkpoint_id
    assert (state.checkpoint.first_message_id, state.checkpoint.last_message_id) == (ids[1], ids[3])
    assert state.window_start_id == ids[4] - 1
    assert state.checkpoint.tokens == count_tokens(SUMMARY)
    assert state.checkpoint.revision == 1


async def test_compact_outcomes_nothing_changed_and_failed(compacting: Compacting) -> None:
    # Assistant messages only: no review runs before the compaction (it would take the scripted
    # replies).
    conversation = fresh_conversation()
    await append(
        compacting.memory,
        conversation,
        md.NewMessage(role=md.ROLE_ASSISTANT, sender="bot", content=words(40)),
    )
    nothing = await compacting.compact(conversation)
    assert (nothing.outcome, nothing.message) == (
        md.COMPACTION_OUTCOME_NOTHING_TO_COMPACT,
        "Nothing to compact (40 tokens).",
    )

    await append(
        compacting.memory,
        conversation,
        *filler(3, 400),
    )
    compacting.model.fail(500)
    failed = await compacting.compact(conversation)
    assert (failed.outcome, failed.message) == (
        md.COMPACTION_OUTCOME_FAILED,
        "Compaction failed: fake-0: HTTP 500",
    )
    compacting.model.reply("   ")
    empty = await compacting.compact(conversation)
    assert empty.message == "Compaction failed: the model answered with an empty summary"
    state = await compacting.state(conversation)
    assert state.last_error == "the model answered with an empty summary"
    assert not state.HasField("checkpoint")

    # The history moves while the model summarises: nothing is stored.
    compacting.model.reply(SUMMARY, delay_seconds=1.0)
    racing = asyncio.ensure_future(compacting.compact(conversation))
    await eventually(lambda: len(compaction_requests(compacting.model)) == 3)
    await append(
        compacting.memory,
        conversation,
        md.NewMessage(role=md.ROLE_USER, sender="ada", content="one more thing"),
    )
    changed = await racing
    assert (changed.outcome, changed.message) == (
        md.COMPACTION_OUTCOME_CONVERSATION_CHANGED,
        "Conversation changed while compacting; run /compact again.",
    )
    assert not (await compacting.state(conversation)).HasField("checkpoint")
    again = await compacting.compact(conversation)
    assert again.outcome == md.COMPACTION_OUTCOME_COMPACTED


async def test_compact_is_an_operators_command(compacting: Compacting) -> None:
    conversation = fresh_conversation()
    await append(
        compacting.memory,
        conversation,
        md.NewMessage(role=md.ROLE_USER, sender="ada", content="hi"),
    )
    error = await rpc_error(compacting.compact(conversation, trust=md.TRUST_GUEST))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error.details() == "/compact is an operator's command; a guest may not run it"
    missing = await rpc_error(compacting.compact(fresh_conversation()))
    assert missing.code() == grpc.StatusCode.NOT_FOUND


# --- Preflight, after delivery, backoff ----------------------------------------------------


async def test_preflight_compacts_on_the_recorded_peak_and_the_peak_is_reset(
    compacting: Compacting,
) -> None:
    conversation = fresh_conversation()
    await append(
        compacting.memory,
        conversation,
        *(md.NewMessage(role=md.ROLE_USER, sender="ada", content=words(300)) for _ in range(4)),
    )
    cold = await compacting.compaction.context.Preflight(
        md.PreflightRequest(conversation=conversation, context_window=WINDOW)
    )
    assert cold.outcome == md.COMPACTION_OUTCOME_SKIPPED
    assert cold.reason == "no prompt tokens recorded yet: CommitTurn reports the first measurement"
    # A turn measured at 1,600 of 4,000: under its own trigger (3,400), so nothing runs after it.
    await compacting.memory.conversations.CommitTurn(
        md.CommitTurnRequest(
            conversation=conversation,
            messages=turn("and then?"),
            usage=md.TurnUsage(peak_prompt_tokens=1600, context_window=4000),
        )
    )
    under = await compacting.compaction.context.Preflight(
        md.PreflightRequest(conversation=conversation)
    )
    assert under.outcome == md.COMPACTION_OUTCOME_SKIPPED
    assert under.reason == (
        "the last peak of 1,600 prompt tokens is under the trigger of 3,400, and the composed "
        "context leaves no message out"
    )
    # Against a 1,800-token window the same peak reaches the trigger (1,530).
    hot = await compacting.compaction.context.Preflight(
        md.PreflightRequest(conversation=conversation, context_window=1800)
    )
    assert (hot.outcome, hot.notice) == (md.COMPACTION_OUTCOME_COMPACTED, PREFLIGHT_NOTICE)
    assert (hot.peak_prompt_tokens, hot.trigger_tokens) == (1600, 1530)
    assert hot.tokens_after < hot.tokens_before
    state = await compacting.state(conversation)
    assert state.peak_prompt_tokens == 0
    reset = await compacting.compaction.context.Preflight(
        md.PreflightRequest(conversation=conversation, context_window=1800)
    )
    assert reset.outcome == md.COMPACTION_OUTCOME_SKIPPED


async def test_messages_the_composed_context_leaves_out_trigger_compaction(
    compacting: Compacting,
) -> None:
    """The issue's adapter: it sends the composed context plus a 50-token system prompt, so its
    peak (1,650) stays under the trigger (1,700) while ComposeContext leaves the oldest
    messages out. Omission triggers compaction too: nothing leaves the context unsummarised."""
    user = [
        md.NewMessage(role=md.ROLE_USER, sender="ada", content=words(160, WORDS[n]))
        for n in range(14)
    ]
    before_turn, after_turn = fresh_conversation(), fresh_conversation()
    for conversation in (before_turn, after_turn):
        await append(compacting.memory, conversation, *user)
        composed = await compacting.compose(conversation)
        assert (composed.omitted_messages, composed.total_tokens) == (4, 1600)

    # Preflight compacts before any peak is reported.
    flight = await compacting.compaction.context.Preflight(
        md.PreflightRequest(conversation=before_turn, context_window=WINDOW)
    )
    assert flight.outcome == md.COMPACTION_OUTCOME_COMPACTED, flight.reason
    assert compaction_requests(compacting.model)
    state = await compacting.state(before_turn)
    listed = await compacting.memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=before_turn, all_history=True, page_size=100)
    )
    assert state.checkpoint.first_message_id == listed.messages[0].id
    assert (await compacting.compose(before_turn)).omitted_messages == 0

    # After a turn whose peak is under the trigger, the check after delivery compacts.
    await compacting.memory.conversations.CommitTurn(
        md.CommitTurnRequest(
            conversation=after_turn,
            messages=[md.NewMessage(role=md.ROLE_ASSISTANT, sender="bot", content="ok")],
            usage=md.TurnUsage(peak_prompt_tokens=1600 + 50, context_window=WINDOW),
        )
    )

    async def checkpointed() -> bool:
        return (await compacting.state(after_turn)).HasField("checkpoint")

    await eventually(checkpointed)
    assert (await compacting.compose(after_turn)).omitted_messages == 0


async def test_commit_turn_compacts_in_the_background_without_waiting(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel(default=Reply(content=SUMMARY, delay_seconds=1.0)) as model:
        async for compacting in start(start_server, tmp_path / "home", model):
            conversation = fresh_conversation()
            await append(
                compacting.memory,
                conversation,
                *filler(6, 300),
            )
            committed = await compacting.memory.conversations.CommitTurn(
                md.CommitTurnRequest(
                    conversation=conversation,
                    messages=[md.NewMessage(role=md.ROLE_ASSISTANT, sender="bot", content="ok")],
                    usage=md.TurnUsage(peak_prompt_tokens=1900, context_window=WINDOW),
                )
            )
            assert committed.history_version > 0
            # Answered before the model (which takes a second) summarised anything.
            assert not (await compacting.state(conversation)).HasField("checkpoint")

            async def checkpointed(
                compacting: Compacting = compacting, conversation: md.Conversation = conversation
            ) -> bool:
                return (await compacting.state(conversation)).HasField("checkpoint")

            await eventually(checkpointed)
            state = await compacting.state(conversation)
            assert state.peak_prompt_tokens == 0
            composed = await compacting.compose(conversation)
            assert composed.total_tokens <= composed.limit_tokens


async def test_a_failure_backs_off_automatic_compaction_but_not_compact(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel(responder=summaries_or_nothing) as model:
        async for compacting in start(
            start_server, tmp_path / "home", model, failure_backoff_seconds=2.0
        ):
            conversation = fresh_conversation()
            await append(
                compacting.memory,
                conversation,
                *filler(4, 300),
            )
            await compacting.memory.conversations.CommitTurn(
                md.CommitTurnRequest(
                    conversation=conversation,
                    messages=turn("next"),
                    usage=md.TurnUsage(peak_prompt_tokens=100, context_window=WINDOW),
                )
            )
            request = md.PreflightRequest(conversation=conversation, context_window=110)
            model.fail(500)
            failed = await compacting.compaction.context.Preflight(request)
            assert failed.outcome == md.COMPACTION_OUTCOME_FAILED
            assert failed.reason == "Compaction failed: fake-0: HTTP 500"
            state = await compacting.state(conversation)
            waits = state.backoff_until.ToDatetime(tzinfo=dt.UTC) - dt.datetime.now(dt.UTC)
            assert dt.timedelta(seconds=0.5) < waits <= dt.timedelta(seconds=2)
            assert state.last_error == "fake-0: HTTP 500"
            waiting = await compacting.compaction.context.Preflight(request)
            assert waiting.outcome == md.COMPACTION_OUTCOME_SKIPPED
            assert waiting.reason.startswith(
                "a compaction failed; automatic compaction waits until "
            )

            async def retried(
                compacting: Compacting = compacting, request: md.PreflightRequest = request
            ) -> bool:
                done = await compacting.compaction.context.Preflight(request)
                return done.outcome == md.COMPACTION_OUTCOME_COMPACTED

            await eventually(retried, within=5)
            assert not (await compacting.state(conversation)).HasField("backoff_until")


# --- the chain, nothing lost ---------------------------------------------------------------


async def test_three_compactions_keep_one_chain_within_budget(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    summaries = iter(["first summary", "second summary", "third summary"])

    def answer(request: dict[str, Any]) -> Reply:
        return Reply(content=next(summaries))

    with FakeModel(responder=answer) as model:
        async for compacting in start(start_server, tmp_path / "home", model):
            conversation = fresh_conversation()
            stored: list[int] = []
            for round_ in range(3):
                done = await append(
                    compacting.memory,
                    conversation,
                    *(
                        md.NewMessage(
                            role=md.ROLE_ASSISTANT, sender="bot", content=words(300, WORDS[round_])
                        )
                        for _ in range(4)
                    ),
                )
                stored += [item.id for item in done.results]
                compacted = await compacting.compact(conversation)
                assert compacted.outcome == md.COMPACTION_OUTCOME_COMPACTED
                composed = await compacting.compose(conversation)
                assert composed.total_tokens <= composed.limit_tokens
                assert composed.omitted_messages == 0
            requests = compaction_requests(model)
            assert "Previous summary:\nfirst summary" in requests[1]["messages"][1]["content"]
            assert "Previous summary:\nsecond summary" in requests[2]["messages"][1]["content"]
            composed = await compacting.compose(conversation)
            assert composed.parts[0].content.endswith("third summary")
            state = await compacting.state(conversation)
            assert state.checkpoint.first_message_id == stored[0]
            assert state.checkpoint.revision == 3

            # Every message is still there: listed across all history, and found by search.
            listed = await compacting.memory.conversations.ListMessages(
                md.ListMessagesRequest(conversation=conversation, all_history=True, page_size=100)
            )
            assert [m.id for m in listed.messages if m.kind != "checkpoint_summary"] == stored
            assert [m.content for m in listed.messages if m.kind == "checkpoint_summary"] == [
                "first summary",
                "second summary",
                "third summary",
            ]
            found = await compacting.memory.conversations.SearchHistory(
                md.SearchHistoryRequest(conversation=conversation, query=WORDS[0])
            )
            assert found.hits


async def test_a_preference_only_in_the_compacted_part_reaches_user_md(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    def answer(request: dict[str, Any]) -> Reply:
        system = request["messages"][0]["content"]
        if "compact a conversation" in system:
            return Reply(content=SUMMARY)
        if "I drink only green tea" in request["messages"][1]["content"]:
            add = {
                "action": "add",
                "target": "user",
                "category": "preference",
                "value": "Drinks green tea",
            }
            return Reply(content=json.dumps({"operations": [add]}))
        return Reply(content="Nothing to save.")

    with FakeModel(responder=answer) as model:
        async for compacting in start(start_server, tmp_path / "home", model):
            conversation = fresh_conversation()
            await append(
                compacting.memory,
                conversation,
                md.NewMessage(role=md.ROLE_USER, sender="ada", content="I drink only green tea."),
                *filler(4, 300),
            )
            compacted = await compacting.compact(conversation)
            assert compacted.outcome == md.COMPACTION_OUTCOME_COMPACTED
            owner = owner_of(conversation)
            prompt = await compacting.memory.context.GetPromptContext(
                md.GetPromptContextRequest(agent_id=owner.agent_id, owner_id=owner.owner_id)
            )
            assert "Drinks green tea" in prompt.user_md
            review = await compacting.memory.reviews.GetReviewState(
                md.GetReviewStateRequest(conversation=conversation)
            )
            assert review.unread_messages == 0
            # reasoning_effort goes with the summary call only, never with the review's.
            summary_calls = compaction_requests(model)
            review_calls = [r for r in model.requests if r not in summary_calls]
            assert [r["reasoning_effort"] for r in summary_calls] == ["medium"]
            assert review_calls
            assert all("reasoning_effort" not in r for r in review_calls)


async def test_an_endpoint_that_refuses_reasoning_effort_still_compacts(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel(default=Reply(content=SUMMARY), refuse=frozenset({"reasoning_effort"})) as model:
        async for compacting in start(start_server, tmp_path / "home", model):
            conversation = fresh_conversation()
            await append(
                compacting.memory,
                conversation,
                *filler(4, 300),
            )
            compacted = await compacting.compact(conversation)
            assert compacted.outcome == md.COMPACTION_OUTCOME_COMPACTED
            refused, plain = model.requests[-2:]
            assert refused["reasoning_effort"] == "medium"
            assert "reasoning_effort" not in plain
            assert isinstance(compacting.server, ServerProcess)
            (logged,) = compacting.server.events(Event.MODEL_PARAMETER_REFUSED)
            assert logged["parameters"] == ["reasoning_effort"]


async def test_without_a_provider_compose_works_and_compaction_says_how_to_configure(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home").start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        compaction = md.Stubs(channel)
        conversation = fresh_conversation()
        await append(
            memory, conversation, md.NewMessage(role=md.ROLE_USER, sender="ada", content="hi")
        )
        composed = await compaction.context.ComposeContext(
            md.ComposeContextRequest(conversation=conversation, context_window=WINDOW)
        )
        assert [part.content for part in composed.parts] == ["hi"]
        for call in (
            compaction.context.Preflight(md.PreflightRequest(conversation=conversation)),
            compaction.context.Compact(md.CompactRequest(conversation=conversation)),
        ):
            error = await rpc_error(call)
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert error.details() == no_provider("compaction")
        missing = await rpc_error(
            compaction.context.ComposeContext(md.ComposeContextRequest(conversation=conversation))
        )
        assert missing.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (missing.details() or "").startswith("context_window is required")
        # Where nothing was said yet, there is nothing to fit: the memory alone, no window.
        owner = md.OwnerScope(agent_id=conversation.agent_id, owner_id="ada-new")
        await memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=owner, key="diet", value="Is vegetarian", category=md.CATEGORY_PREFERENCE
            )
        )
        untouched = md.Conversation(
            agent_id=conversation.agent_id, owner_id="ada-new", channel="cli", chat_id="new"
        )
        first = await compaction.context.ComposeContext(
            md.ComposeContextRequest(conversation=untouched)
        )
        assert ["Is vegetarian" in part.content for part in first.parts] == [True]
        assert (first.limit_tokens, first.context_window) == (0, 0)
        assert first.total_tokens == first.parts[0].tokens


async def test_the_command_line_prints_the_context_and_compacts(compacting: Compacting) -> None:
    conversation = fresh_conversation()
    await append(
        compacting.memory,
        conversation,
        md.NewMessage(role=md.ROLE_USER, sender="ada", content="Book the 9:40 train."),
        *filler(4, 300),
    )
    where = [
        "--agent",
        conversation.agent_id,
        "--conversation",
        f"{conversation.channel}:{conversation.chat_id}",
        "--window",
        str(WINDOW),
    ]
    shown = cli(compacting.server, "context", *where)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("--- user (message, 8 tokens)\nBook the 9:40 train.\n")
    assert shown.stdout.endswith("=== 1,208 of 1,700 tokens (context window 2,000)\n")

    compacted = cli(compacting.server, "compact", *where)
    assert compacted.returncode == 0, compacted.stderr
    assert compacted.stdout == f"Compacted: 1,208 -> {count_tokens(SUMMARY) + 300:,} tokens.\n"
    again = cli(compacting.server, "compact", *where, "--json")
    assert json.loads(again.stdout)["outcome"] == "COMPACTION_OUTCOME_NOTHING_TO_COMPACT"
    shown = cli(compacting.server, "context", *where, "--json")
    parts = json.loads(shown.stdout)["parts"]
    assert [part["kind"] for part in parts] == [
        "CONTEXT_PART_KIND_CHECKPOINT_SUMMARY",
        "CONTEXT_PART_KIND_MESSAGE",
    ]
    bad = cli(compacting.server, "compact", "--conversation", "telegram")
    assert bad.returncode == 2
    assert "--conversation must be CHANNEL:CHAT[:THREAD]" in bad.stderr


@pytest.mark.sqlite_only("edits SQLite's file to make rows of an older version")
async def test_messages_stored_before_token_counts_are_counted_at_start_up(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    server = start_server(home).start()
    conversation = fresh_conversation()
    texts = ["Hello there.", words(12, "river"), "Ünïcödé and emoji 🚆 count too."]
    async with md.connect(server.address) as channel:
        await append(
            md.Stubs(channel),
            conversation,
            *(md.NewMessage(role=md.ROLE_USER, sender="ada", content=text) for text in texts),
        )
    server.stop()
    database = SqliteConnection(str(home / "memory.db"))
    database.execute("UPDATE messages SET token_count = NULL")  # as before migration 0007
    database.close()

    restarted = start_server(home).start()
    assert restarted.events(Event.TOKENS_COUNTED)[0]["messages"] == 3
    async with md.connect(restarted.address) as channel:
        composed = await md.Stubs(channel).context.ComposeContext(
            md.ComposeContextRequest(conversation=conversation, context_window=WINDOW)
        )
    assert [(p.content, p.tokens) for p in composed.parts] == [(t, count_tokens(t)) for t in texts]
    again = start_server(tmp_path / "other").start()
    assert again.events(Event.TOKENS_COUNTED) == []  # nothing to count: nothing said


async def test_the_window_cap_bounds_the_composed_messages_too(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    env = {"MEMORYD_HISTORY_MAX_CONVERSATION_HISTORY": "3"}
    server = start_server(tmp_path / "home", env=env).start()
    async with md.connect(server.address) as channel:
        conversation = fresh_conversation()
        texts = [f"message {n}" for n in range(6)]
        await append(
            md.Stubs(channel),
            conversation,
            *(md.NewMessage(role=md.ROLE_USER, sender="ada", content=text) for text in texts),
        )
        composed = await md.Stubs(channel).context.ComposeContext(
            md.ComposeContextRequest(conversation=conversation, context_window=WINDOW)
        )
    assert [part.content for part in composed.parts] == texts[-3:]
    assert composed.omitted_messages == 3


async def test_a_failed_catch_up_review_leaves_the_messages_queued_and_compaction_goes_on(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    def answer(request: dict[str, Any]) -> Reply:
        if "compact a conversation" in request["messages"][0]["content"]:
            return Reply(content=SUMMARY)
        return Reply(status=500)  # every review fails

    with FakeModel(responder=answer) as model:
        async for compacting in start(start_server, tmp_path / "home", model):
            conversation = fresh_conversation()
            await append(
                compacting.memory,
                conversation,
                md.NewMessage(role=md.ROLE_USER, sender="ada", content="I moved to Porto."),
                *filler(4, 300),
            )
            before = await compacting.memory.conversations.GetConversation(
                md.GetConversationRequest(conversation=conversation)
            )
            compacted = await compacting.compact(conversation)
            assert compacted.outcome == md.COMPACTION_OUTCOME_COMPACTED
            review = await compacting.memory.reviews.GetReviewState(
                md.GetReviewStateRequest(conversation=conversation)
            )
            assert review.last_review_status == md.REVIEW_STATUS_FAILED
            assert review.unread_messages == 1  # still queued: the cursor is not the window
            after = await compacting.memory.conversations.GetConversation(
                md.GetConversationRequest(conversation=conversation)
            )
            assert (after.working_memory, after.description) == (
                before.working_memory,
                before.description,
            )
            listed = await compacting.memory.memory.ListMemories(
                md.ListMemoriesRequest(owner=owner_of(conversation))
            )
            assert list(listed.memories) == []  # compaction writes no long-term memory


async def test_a_kept_composition_is_never_stale(compacting: Compacting) -> None:
    conversation = fresh_conversation()
    owner = owner_of(conversation)
    await append(compacting.memory, conversation, *filler(2, 40))
    first = await compacting.compose(conversation)
    assert await compacting.compose(conversation) == first  # nothing changed: the same answer
    await compacting.memory.memory.StoreMemory(
        md.StoreMemoryRequest(owner=owner, category=md.CATEGORY_CONTEXT, key="k", value="v1")
    )
    stored = await compacting.compose(conversation)
    # The row renders into MEMORY.md: the memory block has it, and it is not repeated as a
    # recent entry.
    assert kinds(stored)[0] == md.CONTEXT_PART_KIND_MEMORY_CONTEXT
    assert "v1" in stored.parts[0].content
    assert md.CONTEXT_PART_KIND_RECENT_ENTRIES not in kinds(stored)
    guest = await compacting.compose(conversation, trust=md.TRUST_GUEST)
    assert kinds(guest) == [md.CONTEXT_PART_KIND_MESSAGE] * 2
    await compacting.memory.memory.UpdateMemory(
        md.UpdateMemoryRequest(owner=owner, scope_type=md.SCOPE_TYPE_AGENT, key="k", value="v2")
    )
    updated = (await compacting.compose(conversation)).parts[0].content
    assert "v2" in updated
    assert "v1" not in updated
    await append(compacting.memory, conversation, md.NewMessage(role=md.ROLE_USER, content="new"))
    appended = await compacting.compose(conversation)
    assert appended.parts[-1].content == "new"
    assert appended.history_version > first.history_version
    smaller = await compacting.compose(conversation, context_window=150)
    assert smaller.limit_tokens == 127
    assert (smaller.omitted_messages, smaller.omitted_tokens) == (1, 40)
    other = fresh_conversation()
    await append(compacting.memory, other, md.NewMessage(role=md.ROLE_USER, content="elsewhere"))
    assert [p.content for p in (await compacting.compose(other)).parts] == ["elsewhere"]


async def test_two_stores_in_one_process_answer_each_with_its_own_messages(
    tmp_path: Path,
) -> None:
    """Message ids are a store's own: two memoryds in one process (the services behind each,
    tests/in_process.py) never answer ComposeContext with each other's messages, though their
    first messages have the same id and their conversations the same name."""
    conversation = fresh_conversation()
    answers = []
    servers = [ServedInProcess(tmp_path / name).start() for name in ("one", "two")]
    try:
        for server, text in zip(
            servers, ("Book the 9:40 train.", "Water the plants."), strict=True
        ):
            async with md.connect(server.address) as channel:
                stubs = md.Stubs(channel)
                await append(stubs, conversation, md.NewMessage(role=md.ROLE_USER, content=text))
                composed = await stubs.context.ComposeContext(
                    md.ComposeContextRequest(conversation=conversation, context_window=WINDOW)
                )
                answers.append([(part.message_id, part.content) for part in composed.parts])
    finally:
        for server in servers:
            server.stop()
    assert answers == [[(1, "Book the 9:40 train.")], [(1, "Water the plants.")]]
