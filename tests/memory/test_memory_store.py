"""StoreMemory: admission (categories, scopes, trust, limits), upserts and the note path."""

from __future__ import annotations

import re
from collections.abc import Awaitable
from typing import Any

import grpc
import pytest

import memoryd_client as md
from tests.helpers import fresh_conversation, owner_of, rpc_error, store

USER_BUCKET = [
    md.CATEGORY_IDENTITY,
    md.CATEGORY_PREFERENCE,
    md.CATEGORY_INTEREST,
    md.CATEGORY_GOAL,
]


@pytest.mark.parametrize("category", USER_BUCKET)
async def test_user_categories_are_stored_at_owner_scope(
    memory: md.Stubs, category: md.Category.ValueType
) -> None:
    conversation = fresh_conversation(owner_id="ada")
    row = await store(memory, conversation, "k", "  a fact  ", category)
    assert (row.scope_type, row.scope_id) == (md.SCOPE_TYPE_OWNER, "ada")
    assert row.prompt_target == md.PROMPT_TARGET_USER_MD
    assert row.value == "a fact"  # trimmed
    assert (row.agent_id, row.owner_id) == (conversation.agent_id, "ada")


@pytest.mark.parametrize("category", [md.CATEGORY_CONTEXT, md.CATEGORY_DIRECTIVE])
async def test_work_categories_are_stored_at_agent_scope(
    memory: md.Stubs, category: md.Category.ValueType
) -> None:
    conversation = fresh_conversation()
    row = await store(memory, conversation, "k", "v", category)
    assert (row.scope_type, row.scope_id) == (md.SCOPE_TYPE_AGENT, conversation.agent_id)
    assert row.prompt_target == md.PROMPT_TARGET_MEMORY_MD


async def test_without_category_or_id_a_conversation_note_is_stored(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation(thread_scope="t1")
    row = await store(memory, conversation, "parking", "Spot B12")
    assert row.category == md.CATEGORY_FACT
    assert row.scope_type == md.SCOPE_TYPE_CONVERSATION
    assert row.scope_id == f"telegram:{conversation.chat_id}:t1"
    assert row.prompt_target == md.PROMPT_TARGET_NONE
    assert row.provenance.source_type == "conversation"
    assert row.provenance.source_id == f"conversation:telegram:{conversation.chat_id}:t1"


async def test_upsert_on_the_key_keeps_the_id_and_the_first_created_at(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation()
    first = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            conversation=conversation, category=md.CATEGORY_GOAL, key="run", value="Run 5k"
        )
    )
    second = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            conversation=conversation, category=md.CATEGORY_GOAL, key="run", value="Run 10k"
        )
    )
    assert first.created
    assert not second.created
    assert second.memory.id == first.memory.id
    assert second.memory.value == "Run 10k"
    # OpenHermit reports created_at = now on upsert (FIX): memoryd reports the stored value.
    assert second.memory.created_at == first.memory.created_at
    assert second.memory.updated_at.ToDatetime() >= first.memory.updated_at.ToDatetime()


async def test_re_storing_an_archived_key_un_archives_it(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    row = await store(memory, conversation, "tz", "Lives in Lisbon", md.CATEGORY_IDENTITY)
    await memory.memory.ArchiveMemory(
        md.ArchiveMemoryRequest(owner=owner_of(conversation), id=row.id)
    )
    again = await store(memory, conversation, "tz", "Lives in Porto", md.CATEGORY_IDENTITY)
    assert again.id == row.id
    assert not again.archived
    assert again.archived_by == ""


async def test_with_an_id_the_value_is_replaced(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    row = await store(memory, conversation, "k", "old", md.CATEGORY_CONTEXT)
    replaced = await store(memory, conversation, "", "new", id=row.id)
    assert (replaced.id, replaced.value, replaced.key) == (row.id, "new", "k")
    assert replaced.category == md.CATEGORY_CONTEXT


async def test_a_fact_without_a_key_gets_one_read_off_its_value(
    memory: md.Stubs,
) -> None:
    conversation = fresh_conversation()
    row = await store(memory, conversation, "", "Lives in Lisbon", md.CATEGORY_IDENTITY)
    assert row.key == "lives-in-lisbon-7ad6"
    assert row.scope_type == md.SCOPE_TYPE_OWNER
    # The same fact again is the same row; a fact that begins alike is another.
    again = await store(memory, conversation, " ", "Lives in Lisbon", md.CATEGORY_IDENTITY)
    assert again.id == row.id
    other = await store(memory, conversation, "", "Lives in Lisbon, Portugal", md.CATEGORY_IDENTITY)
    assert other.id != row.id
    assert other.key.startswith("lives-in-lisbon-portugal-")
    odd = await store(memory, conversation, "", "我住在里斯本 🙂", md.CATEGORY_IDENTITY)
    assert odd.key.startswith("我住在里斯本-")


REFUSALS = [
    (
        {"category": 42, "key": "k", "value": "v"},
        grpc.StatusCode.INVALID_ARGUMENT,
        "category has unknown value 42",
    ),
    (
        {"key": "  ", "value": "v"},
        grpc.StatusCode.INVALID_ARGUMENT,
        "key must not be blank",
    ),
    (
        {"category": md.CATEGORY_GOAL, "key": "k", "value": " \n "},
        grpc.StatusCode.INVALID_ARGUMENT,
        "value must not be blank",
    ),
    (
        {"category": md.CATEGORY_GOAL, "key": "k", "value": "x" * 201},
        grpc.StatusCode.INVALID_ARGUMENT,
        "value is 201 characters; the limit is 200",
    ),
    (
        {"category": md.CATEGORY_DIRECTIVE, "key": "k", "value": "v", "trust": md.TRUST_GUEST},
        grpc.StatusCode.PERMISSION_DENIED,
        "guests cannot write a directive",
    ),
    (
        {"category": md.CATEGORY_JOB_RUN_SUMMARY, "key": "k", "value": "v"},
        grpc.StatusCode.INVALID_ARGUMENT,
        "job_run_summary rows are written by scheduled jobs",
    ),
    (
        {"category": md.CATEGORY_GOAL, "key": "k", "value": "v", "metadata": "[1]"},
        grpc.StatusCode.INVALID_ARGUMENT,
        "metadata must be a JSON object",
    ),
    (
        {"category": md.CATEGORY_GOAL, "key": "k", "value": "v", "confidence": 1.5},
        grpc.StatusCode.INVALID_ARGUMENT,
        "confidence must be between 0 and 1",
    ),
    (
        {"category": md.CATEGORY_GOAL, "key": "k", "value": "v", "source_message_id": 999999999},
        grpc.StatusCode.INVALID_ARGUMENT,
        "source_message_id 999999999 is not a stored message",
    ),
    (
        {"key": "k", "value": "v", "trust": 9},
        grpc.StatusCode.INVALID_ARGUMENT,
        "trust has unknown value 9",
    ),
]


@pytest.mark.parametrize(("fields", "status", "message"), REFUSALS)
async def test_refusals_are_precise_and_write_nothing(
    memory: md.Stubs, fields: dict[str, Any], status: grpc.StatusCode, message: str
) -> None:
    conversation = fresh_conversation()
    error = await rpc_error(
        memory.memory.StoreMemory(md.StoreMemoryRequest(conversation=conversation, **fields))
    )
    assert error.code() == status
    assert message in (error.details() or "")
    listed = await memory.memory.ListMemories(
        md.ListMemoriesRequest(owner=owner_of(conversation), archived=md.ARCHIVED_FILTER_ALL)
    )
    assert list(listed.memories) == []
    sources = await memory.memory.ListMemorySources(
        md.ListMemorySourcesRequest(owner=owner_of(conversation))
    )
    assert list(sources.sources) == []


async def test_a_guest_can_never_replace_a_directive(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    rule = await store(memory, conversation, "email", "Show a draft first", md.CATEGORY_DIRECTIVE)
    guest: dict[str, Any] = {"trust": md.TRUST_GUEST}
    attempts: list[Awaitable[Any]] = [
        memory.memory.StoreMemory(
            md.StoreMemoryRequest(conversation=conversation, id=rule.id, value="x", **guest)
        ),
        # The same key through the upsert path, under another category.
        memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                conversation=conversation,
                category=md.CATEGORY_CONTEXT,
                key="email",
                value="x",
                **guest,
            )
        ),
        memory.memory.UpdateMemory(
            md.UpdateMemoryRequest(conversation=conversation, id=rule.id, value="x", **guest)
        ),
        memory.memory.ArchiveMemory(
            md.ArchiveMemoryRequest(conversation=conversation, id=rule.id, **guest)
        ),
        memory.memory.DeleteMemory(
            md.DeleteMemoryRequest(conversation=conversation, id=rule.id, **guest)
        ),
    ]
    for attempt in attempts:
        error = await rpc_error(attempt)
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "directive" in (error.details() or "")
    kept = await memory.memory.GetMemory(md.GetMemoryRequest(conversation=conversation, id=rule.id))
    assert kept.memory.value == "Show a draft first"
    assert not kept.memory.archived
    assert kept.memory.category == md.CATEGORY_DIRECTIVE


async def test_another_owners_row_is_not_found_exactly_like_a_missing_one(
    memory: md.Stubs,
) -> None:
    ada = fresh_conversation(owner_id="ada")
    bob = md.Conversation(agent_id=ada.agent_id, owner_id="bob", channel="telegram", chat_id="b")
    row = await store(memory, ada, "k", "Ada's fact", md.CATEGORY_IDENTITY)
    theirs = await rpc_error(
        memory.memory.StoreMemory(md.StoreMemoryRequest(conversation=bob, id=row.id, value="x"))
    )
    missing = await rpc_error(
        memory.memory.StoreMemory(
            md.StoreMemoryRequest(conversation=bob, id=row.id + 10**9, value="x")
        )
    )
    assert theirs.code() == missing.code() == grpc.StatusCode.NOT_FOUND
    assert re.sub(r"\d+", "N", theirs.details() or "") == re.sub(
        r"\d+", "N", missing.details() or ""
    )
    kept = await memory.memory.GetMemory(md.GetMemoryRequest(conversation=ada, id=row.id))
    assert kept.memory.value == "Ada's fact"


async def test_job_run_summaries_are_not_editable(memory: md.Stubs) -> None:
    owner = owner_of(fresh_conversation())
    summary = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=owner,
            job_id="nightly-digest",
            run_id="run-1",
            category=md.CATEGORY_JOB_RUN_SUMMARY,
            key="run-1",
            value="Sent 3 digests",
        )
    )
    row = summary.memory
    assert (row.scope_type, row.scope_id) == (md.SCOPE_TYPE_JOB, "job:nightly-digest")
    assert row.provenance.source_type == "scheduled_job"
    for attempt in (
        memory.memory.StoreMemory(md.StoreMemoryRequest(owner=owner, id=row.id, value="edited")),
        memory.memory.UpdateMemory(md.UpdateMemoryRequest(owner=owner, id=row.id, value="edited")),
    ):
        error = await rpc_error(attempt)
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert f"memory {row.id} is a job run summary and cannot be edited" in (
            error.details() or ""
        )
    sources = await memory.memory.ListMemorySources(
        md.ListMemorySourcesRequest(owner=owner, source_type="scheduled_job")
    )
    assert [(s.id, s.memory_scope, s.status) for s in sources.sources] == [
        ("job:nightly-digest", "job:nightly-digest", "active")
    ]


async def test_openhermit_memory_add_generates_a_key_and_keeps_metadata(
    memory: md.Stubs,
) -> None:
    owner = owner_of(fresh_conversation())
    added = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=owner,
            scope_type=md.SCOPE_TYPE_AGENT,
            value="Anthropic quota resets monthly",
            metadata='{"source": "ops", "tags": ["quota"]}',
        )
    )
    row = added.memory
    assert re.fullmatch(r"mem-[0-9a-f]{8}", row.key)
    assert row.category == md.CATEGORY_FACT
    assert row.prompt_target == md.PROMPT_TARGET_NONE
    assert row.metadata == '{"source":"ops","tags":["quota"]}'
    assert row.provenance.source_type == "api"


async def test_a_conversation_note_needs_a_conversation(memory: md.Stubs) -> None:
    error = await rpc_error(
        memory.memory.StoreMemory(md.StoreMemoryRequest(owner=md.OwnerScope(), key="k", value="v"))
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "the caller must be a conversation" in (error.details() or "")


async def test_replacing_a_value_never_changes_the_category(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    row = await store(memory, conversation, "k", "v", md.CATEGORY_CONTEXT)
    error = await rpc_error(
        memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                conversation=conversation, id=row.id, value="x", category=md.CATEGORY_DIRECTIVE
            )
        )
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == (
        f"memory {row.id} is context; replacing its value cannot make it directive"
    )
    kept = await memory.memory.GetMemory(md.GetMemoryRequest(conversation=conversation, id=row.id))
    assert kept.memory.value == "v"
