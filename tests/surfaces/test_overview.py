"""The operator's reads: GetServerInfo, ListOwners, ListConversations, GetMessage, ListReviewRuns,
through the real server on each backend: their counts, their pages and their refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess
from tests.review_helpers import commit, eventually, review_now, turn

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = [pytest.mark.slow, pytest.mark.storage]


def conversation(owner: str, chat: str, agent: str = "main") -> md.Conversation:
    return md.Conversation(agent_id=agent, owner_id=owner, channel="telegram", chat_id=chat)


async def test_the_overview_counts_agents_owners_and_conversations_and_pages_them(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    server = start_server(tmp_path / "home", config=review_config(model, enabled=False)).start()
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        for owner, chats in (("ada", ("a1", "a2")), ("bob", ("b1",)), ("cy", ("c1",))):
            for chat in chats:
                await commit(memory, conversation(owner, chat), *turn(f"hello from {owner}"))
        await commit(memory, conversation("zed", "z1", agent="other"), *turn("elsewhere"))
        await memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=md.OwnerScope(agent_id="main", owner_id="dora"),
                key="tea",
                value="Drinks tea",
                category=md.CATEGORY_PREFERENCE,
            )
        )
        info = await memory.admin.GetServerInfo(md.GetServerInfoRequest())
        assert [(a.agent_id, a.owners, a.conversations) for a in info.agents] == [
            ("main", 3, 4),
            ("other", 1, 1),
        ]
        assert info.backend in ("sqlite", "postgres")
        assert info.database_bytes > 0
        assert info.review_backlog == 5
        settings = json.loads(info.settings_json)
        assert settings["memoryd"]["providers"][0]["model"] == "fake-model-0"

        first = await memory.overview.ListOwners(md.ListOwnersRequest(agent_id="main", page_size=2))
        assert [o.owner_id for o in first.owners] == ["ada", "bob"]
        assert (first.owners[0].conversations, first.owners[0].active_memories) == (2, 0)
        second = await memory.overview.ListOwners(
            md.ListOwnersRequest(agent_id="main", page_size=2, page_token=first.next_page_token)
        )
        assert [(o.owner_id, o.conversations, o.active_memories) for o in second.owners] == [
            ("cy", 1, 0),
            ("dora", 0, 1),  # memory rows only: listed, without a conversation
        ]
        assert not second.owners[1].HasField("latest_conversation_at")
        assert second.next_page_token == ""

        # A message by id, for its owner only.
        first_id = (
            (
                await memory.conversations.ListMessages(
                    md.ListMessagesRequest(conversation=conversation("ada", "a1"))
                )
            )
            .messages[0]
            .id
        )
        found = await memory.conversations.GetMessage(
            md.GetMessageRequest(owner=md.OwnerScope(owner_id="ada"), id=first_id)
        )
        assert (found.message.content, found.message.conversation.chat_id) == (
            "hello from ada",
            "a1",
        )
        for request, code in (
            (
                md.GetMessageRequest(owner=md.OwnerScope(owner_id="bob"), id=first_id),
                grpc.StatusCode.NOT_FOUND,
            ),
            (
                md.GetMessageRequest(owner=md.OwnerScope(owner_id="ada")),
                grpc.StatusCode.INVALID_ARGUMENT,
            ),
            (
                md.GetMessageRequest(owner=md.OwnerScope(owner_id="ada"), id=-5),
                grpc.StatusCode.INVALID_ARGUMENT,
            ),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await memory.conversations.GetMessage(request)
            assert error.value.code() == code

        listed = await memory.conversations.ListConversations(
            md.ListConversationsRequest(owner=md.OwnerScope(agent_id="main", owner_id="ada"))
        )
        assert [c.conversation.chat_id for c in listed.conversations] == ["a1", "a2"]
        assert listed.conversations[0].conversation.thread_scope == "root"

        # A token of one listing is refused by another, or for another agent.
        for refused in (
            memory.overview.ListOwners(
                md.ListOwnersRequest(agent_id="other", page_token=first.next_page_token)
            ),
            memory.conversations.ListConversations(
                md.ListConversationsRequest(
                    owner=md.OwnerScope(owner_id="ada"), page_token=first.next_page_token
                )
            ),
            memory.overview.ListOwners(md.ListOwnersRequest(page_size=501)),
            memory.overview.ListOwners(md.ListOwnersRequest(agent_id="x" * 300)),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await refused
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_review_runs_are_listed_newest_first_in_pages_and_failures_reach_the_overview(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    server = start_server(tmp_path / "home", config=review_config(model, enabled=False)).start()
    chat = conversation("ada", "r1")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        for index in range(3):
            await commit(memory, chat, *turn(f"fact number {index}"))
            model.reply(
                json.dumps(
                    {"operations": [{"action": "archive", "id": 999 + index, "reason": "old"}]}
                )
            )
            await review_now(memory, chat)
        await commit(memory, chat, *turn("this review fails"))
        model.fail(500)
        await review_now(memory, chat)

        first = await memory.reviews.ListReviewRuns(
            md.ListReviewRunsRequest(conversation=chat, page_size=3)
        )
        assert [run.id for run in first.runs] == [4, 3, 2]
        assert first.runs[0].status == md.REVIEW_STATUS_FAILED
        assert first.runs[1].skipped_operations[0].reason == (
            "archive: row 1001 was not in the memory shown to the review"
        )
        rest = await memory.reviews.ListReviewRuns(
            md.ListReviewRunsRequest(
                conversation=chat, page_size=3, page_token=first.next_page_token
            )
        )
        assert ([run.id for run in rest.runs], rest.next_page_token) == ([1], "")

        info = await memory.admin.GetServerInfo(md.GetServerInfoRequest())
        assert info.review_failures_24h == 1
        (failure,) = info.recent_failures
        assert (failure.conversation.chat_id, failure.run.id) == ("r1", 4)
        assert failure.run.error

        with pytest.raises(grpc.aio.AioRpcError) as error:
            await memory.reviews.ListReviewRuns(
                md.ListReviewRunsRequest(
                    conversation=conversation("bob", "r1"), page_token=first.next_page_token
                )
            )
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_review_settings_are_saved_with_the_file_s_comments_and_applied_at_once(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    off: dict[str, Any] = {
        "review_interval_hours": 0,
        "turn_interval": 0,
        "idle_timeout_minutes": 0,
        "passive_turn_interval": 0,
    }
    config = "# the operator's own note\n" + review_config(model, **off)
    server = start_server(tmp_path / "home", config=config).start()
    chat = conversation("ada", "s1")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        info = await memory.admin.GetServerInfo(md.GetServerInfoRequest())
        assert (info.background_review, info.review_triggers.turn_interval) == (False, 0)
        path = Path(info.config_path)
        await commit(memory, chat, *turn("I moved to Porto"))
        model.reply(json.dumps({"operations": []}))
        saved = await memory.admin.UpdateReviewSettings(
            md.UpdateReviewSettingsRequest(
                triggers=md.ReviewTriggers(enabled=True, review_interval_hours=1.5, turn_interval=1)
            )
        )
        assert (saved.applied, saved.notice, saved.config_path) == (True, "", str(path))
        text = file_text(path)
        assert text.startswith("# the operator's own note\n")
        assert "review_interval_hours = 1.5" in text
        assert "turn_interval = 1\n" in text
        assert "scheduler_tick_seconds" in text  # the other settings are kept
        # Applied at once: the pending turn is now due, and the background review runs it.
        await eventually(lambda: _reviewed(memory, chat))
        info = await memory.admin.GetServerInfo(md.GetServerInfoRequest())
        assert info.background_review
        assert info.review_triggers.review_interval_hours == 1.5
        assert json.loads(info.settings_json)["memoryd"]["memory"]["turn_interval"] == 1

        for bad in (
            md.UpdateReviewSettingsRequest(),
            md.UpdateReviewSettingsRequest(triggers=md.ReviewTriggers(turn_interval=-1)),
            md.UpdateReviewSettingsRequest(
                triggers=md.ReviewTriggers(review_interval_hours=float("nan"))
            ),
            md.UpdateReviewSettingsRequest(triggers=md.ReviewTriggers(idle_timeout_minutes=1e9)),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await memory.admin.UpdateReviewSettings(bad)
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # A file marked read-only is not replaced: refused, and the server runs as before.
        read_only(path)
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await memory.admin.UpdateReviewSettings(
                md.UpdateReviewSettingsRequest(triggers=md.ReviewTriggers(enabled=False))
            )
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "cannot be written" in (error.value.details() or "")
        assert file_text(path) == text
        info = await memory.admin.GetServerInfo(md.GetServerInfoRequest())
        assert info.review_triggers.enabled


async def _reviewed(memory: md.Stubs, chat: md.Conversation) -> bool:
    state = await memory.reviews.GetReviewState(md.GetReviewStateRequest(conversation=chat))
    return state.HasField("last_run")


def file_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def read_only(path: Path) -> None:
    path.chmod(0o400)


async def test_a_review_s_prompt_and_answer_are_kept_when_asked_and_erased_with_the_owner(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    config = review_config(model, enabled=False, keep_review_exchanges=True)
    server = start_server(tmp_path / "home", config=config).start()
    chat = conversation("ada", "x1")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await commit(memory, chat, *turn("My sister is called Inês"))
        answer = json.dumps({"operations": [{"action": "archive", "id": 4242, "reason": "x"}]})
        model.reply(answer)
        await review_now(memory, chat)
        await commit(memory, chat, *turn("this one fails"))
        model.garbage()
        await review_now(memory, chat)

        runs = (
            await memory.reviews.ListReviewRuns(md.ListReviewRunsRequest(conversation=chat))
        ).runs
        assert [(run.id, run.exchange_kept) for run in runs] == [(2, True), (1, True)]
        kept = await memory.reviews.GetReviewExchange(
            md.GetReviewExchangeRequest(conversation=chat, run_id=1)
        )
        assert [m.role for m in kept.prompt] == ["system", "user"]
        assert "My sister is called Inês" in kept.prompt[1].content
        assert kept.answer == answer
        failed = await memory.reviews.GetReviewExchange(
            md.GetReviewExchangeRequest(conversation=chat, run_id=2)
        )
        assert "this one fails" in failed.prompt[1].content
        assert failed.answer == ""  # the provider's body was not an answer: none came back

        for request, code in (
            (md.GetReviewExchangeRequest(conversation=chat, run_id=9), grpc.StatusCode.NOT_FOUND),
            (
                md.GetReviewExchangeRequest(conversation=conversation("bob", "x1"), run_id=1),
                grpc.StatusCode.NOT_FOUND,
            ),
            (md.GetReviewExchangeRequest(conversation=chat), grpc.StatusCode.INVALID_ARGUMENT),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await memory.reviews.GetReviewExchange(request)
            assert error.value.code() == code

        # Purging a conversation erases its runs' exchanges with them (ON DELETE CASCADE).
        other = conversation("ada", "x2")
        await commit(memory, other, *turn("another chat"))
        model.reply(json.dumps({"operations": []}))
        other_run = (await review_now(memory, other)).review_run_id
        kept_before = await memory.reviews.GetReviewExchange(
            md.GetReviewExchangeRequest(conversation=other, run_id=other_run)
        )
        assert "another chat" in kept_before.prompt[1].content
        await memory.conversations.PurgeConversation(
            md.PurgeConversationRequest(conversation=other)
        )
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await memory.reviews.GetReviewExchange(
                md.GetReviewExchangeRequest(conversation=other, run_id=other_run)
            )
        assert error.value.code() == grpc.StatusCode.NOT_FOUND

        receipt = await memory.admin.PurgeOwner(md.PurgeOwnerRequest(owner_id="ada"))
        assert {row.table: row.rows for row in receipt.erased}["review_exchanges"] == 2
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await memory.reviews.GetReviewExchange(
                md.GetReviewExchangeRequest(conversation=chat, run_id=1)
            )
        assert error.value.code() == grpc.StatusCode.NOT_FOUND


async def test_exchanges_are_not_kept_by_default(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    server = start_server(tmp_path / "home", config=review_config(model, enabled=False)).start()
    chat = conversation("ada", "d1")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await commit(memory, chat, *turn("a fact"))
        model.reply(json.dumps({"operations": []}))
        await review_now(memory, chat)
        (run,) = (
            await memory.reviews.ListReviewRuns(md.ListReviewRunsRequest(conversation=chat))
        ).runs
        assert not run.exchange_kept
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await memory.reviews.GetReviewExchange(
                md.GetReviewExchangeRequest(conversation=chat, run_id=run.id)
            )
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
