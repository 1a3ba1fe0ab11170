"""GetMemory, ListMemories, UpdateMemory, ArchiveMemory, RestoreMemory, DeleteMemory, and the
isolation of owners: no RPC ever shows or changes another owner's rows."""

from __future__ import annotations

import grpc

import memoryd_client as md
from tests.helpers import fresh_conversation, owner_of, rpc_error, store


async def test_get_by_id_and_by_scope_and_key(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    note = await store(memory, conversation, "  spot  ", "B12")
    assert note.key == "spot"
    by_id = await memory.memory.GetMemory(
        md.GetMemoryRequest(conversation=conversation, id=note.id)
    )
    by_key = await memory.memory.GetMemory(
        md.GetMemoryRequest(
            conversation=conversation, scope_type=md.SCOPE_TYPE_CONVERSATION, key=" spot "
        )
    )
    assert by_id.memory == by_key.memory == note
    missing = await rpc_error(
        memory.memory.GetMemory(
            md.GetMemoryRequest(
                conversation=conversation, scope_type=md.SCOPE_TYPE_OWNER, key="spot"
            )
        )
    )
    assert missing.code() == grpc.StatusCode.NOT_FOUND
    assert missing.details() == "memory 'spot' in owner scope default not found"
    blank = await rpc_error(memory.memory.GetMemory(md.GetMemoryRequest(conversation=conversation)))
    assert blank.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert blank.details() == "either id, or scope_type and key, are required"


async def test_list_filters_pages_and_previews(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    owner = owner_of(conversation)
    long_value = "z" * 150
    for index in range(5):
        await memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=owner,
                scope_type=md.SCOPE_TYPE_AGENT,
                key=f"project/{index}",
                value=long_value,
            )
        )
    await store(memory, conversation, "other", "v", md.CATEGORY_GOAL)
    first = await memory.memory.ListMemories(
        md.ListMemoriesRequest(owner=owner, key_prefix="project/", page_size=3, preview=True)
    )
    assert [item.memory.key for item in first.memories] == ["project/4", "project/3", "project/2"]
    assert all(
        item.preview == "z" * 120 + "..." and item.memory.value == "" for item in first.memories
    )
    second = await memory.memory.ListMemories(
        md.ListMemoriesRequest(
            owner=owner,
            key_prefix="project/",
            page_size=3,
            preview=True,
            page_token=first.next_page_token,
        )
    )
    assert [item.memory.key for item in second.memories] == ["project/1", "project/0"]
    assert second.next_page_token == ""
    foreign = await rpc_error(
        memory.memory.ListMemories(
            md.ListMemoriesRequest(owner=owner, key_prefix="x", page_token=first.next_page_token)
        )
    )
    assert foreign.code() == grpc.StatusCode.INVALID_ARGUMENT
    goals = await memory.memory.ListMemories(
        md.ListMemoriesRequest(owner=owner, categories=[md.CATEGORY_GOAL])
    )
    assert [item.memory.key for item in goals.memories] == ["other"]
    owners = await memory.memory.ListMemories(
        md.ListMemoriesRequest(owner=owner, scope_type=md.SCOPE_TYPE_OWNER)
    )
    assert [item.memory.value for item in owners.memories] == ["v"]
    # A LIKE wildcard in the prefix is an ordinary character.
    assert (
        list(
            (
                await memory.memory.ListMemories(
                    md.ListMemoriesRequest(owner=owner, key_prefix="project%")
                )
            ).memories
        )
        == []
    )


async def test_update_keeps_a_blank_value_and_merges_metadata(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    owner = owner_of(conversation)
    added = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=owner,
            scope_type=md.SCOPE_TYPE_AGENT,
            key="k",
            value="v1",
            metadata='{"a": 1, "b": 2}',
        )
    )
    updated = await memory.memory.UpdateMemory(
        md.UpdateMemoryRequest(
            owner=owner, id=added.memory.id, value="  ", metadata='{"b": 3, "c": 4}'
        )
    )
    assert updated.memory.value == "v1"
    assert updated.memory.metadata == '{"a":1,"b":3,"c":4}'
    missing = await rpc_error(
        memory.memory.UpdateMemory(
            md.UpdateMemoryRequest(
                owner=owner, scope_type=md.SCOPE_TYPE_AGENT, key="nope", value="x"
            )
        )
    )
    assert missing.code() == grpc.StatusCode.NOT_FOUND


async def test_archive_and_restore(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    row = await store(memory, conversation, "city", "Lives in Lisbon", md.CATEGORY_IDENTITY)
    archived = await memory.memory.ArchiveMemory(
        md.ArchiveMemoryRequest(conversation=conversation, id=row.id, reason="moved")
    )
    assert archived.memory.archived
    assert (archived.memory.archived_by, archived.memory.archive_reason) == ("operator", "moved")
    listed = await memory.memory.ListMemories(md.ListMemoriesRequest(conversation=conversation))
    assert list(listed.memories) == []
    archived_only = await memory.memory.ListMemories(
        md.ListMemoriesRequest(conversation=conversation, archived=md.ARCHIVED_FILTER_ARCHIVED)
    )
    assert [item.memory.id for item in archived_only.memories] == [row.id]
    edit = await rpc_error(
        memory.memory.UpdateMemory(
            md.UpdateMemoryRequest(conversation=conversation, id=row.id, value="x")
        )
    )
    assert edit.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert edit.details() == f"memory {row.id} is archived; restore it first"
    restored = await memory.memory.RestoreMemory(
        md.RestoreMemoryRequest(conversation=conversation, id=row.id)
    )
    assert restored.notice == f"restored memory {row.id}"
    assert not restored.memory.archived
    assert restored.memory.archive_reason == ""
    prompt = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=conversation.agent_id)
    )
    assert prompt.user_md == "## Identity\n- Lives in Lisbon"


async def test_delete_erases_the_row_and_is_idempotent(memory: md.Stubs) -> None:
    conversation = fresh_conversation()
    row = await store(memory, conversation, "k", "ephemeral platypus")
    first = await memory.memory.DeleteMemory(
        md.DeleteMemoryRequest(conversation=conversation, id=row.id)
    )
    second = await memory.memory.DeleteMemory(
        md.DeleteMemoryRequest(conversation=conversation, id=row.id)
    )
    assert (first.deleted, first.id, second.deleted, second.id) == (True, row.id, False, 0)
    gone = await rpc_error(
        memory.memory.GetMemory(md.GetMemoryRequest(conversation=conversation, id=row.id))
    )
    assert gone.code() == grpc.StatusCode.NOT_FOUND
    hits = await memory.memory.Recall(
        md.RecallRequest(conversation=conversation, query="platypus", mode=md.SEARCH_MODE_LEXICAL)
    )
    assert list(hits.hits) == []
    again = await store(memory, conversation, "k", "ephemeral platypus")
    assert again.id > row.id  # ids are never reused


async def test_two_owners_of_one_agent_never_see_each_others_rows(
    memory: md.Stubs,
) -> None:
    ada = fresh_conversation(owner_id="ada")
    bob = md.Conversation(
        agent_id=ada.agent_id, owner_id="bob", channel=ada.channel, chat_id=ada.chat_id
    )
    secret = await store(memory, ada, "secret", "Ada's secret heron", md.CATEGORY_IDENTITY)
    work = await store(memory, ada, "work", "Ada's heron project", md.CATEGORY_CONTEXT)
    note = await store(memory, ada, "note", "Ada's heron note")
    await store(memory, bob, "mine", "Bob's own fact", md.CATEGORY_IDENTITY)
    bob_owner = owner_of(bob)
    for row in (secret, work, note):
        for call in (
            memory.memory.GetMemory(md.GetMemoryRequest(conversation=bob, id=row.id)),
            memory.memory.GetMemory(md.GetMemoryRequest(owner=bob_owner, id=row.id)),
            memory.memory.UpdateMemory(
                md.UpdateMemoryRequest(conversation=bob, id=row.id, value="x")
            ),
            memory.memory.StoreMemory(
                md.StoreMemoryRequest(conversation=bob, id=row.id, value="x")
            ),
            memory.memory.ArchiveMemory(md.ArchiveMemoryRequest(conversation=bob, id=row.id)),
            memory.memory.RestoreMemory(md.RestoreMemoryRequest(conversation=bob, id=row.id)),
        ):
            assert (await rpc_error(call)).code() == grpc.StatusCode.NOT_FOUND
        deleted = await memory.memory.DeleteMemory(
            md.DeleteMemoryRequest(conversation=bob, id=row.id)
        )
        assert not deleted.deleted
    # The same conversation key under Bob sees none of Ada's notes either.
    assert (
        await memory.memory.GetMemory(md.GetMemoryRequest(conversation=ada, id=note.id))
    ).memory.value == "Ada's heron note"
    for scope in (md.RECALL_SCOPE_CURRENT, md.RECALL_SCOPE_OWNER, md.RECALL_SCOPE_ALL):
        for source in (md.RECALL_SOURCE_MEMORIES, md.RECALL_SOURCE_ALL):
            for query in ("heron", "hero", ""):
                hits = await memory.memory.Recall(
                    md.RecallRequest(conversation=bob, query=query, scope=scope, source=source)
                )
                assert all("Ada" not in hit.memory.value for hit in hits.hits)
    listed = await memory.memory.ListMemories(
        md.ListMemoriesRequest(conversation=bob, archived=md.ARCHIVED_FILTER_ALL)
    )
    assert [item.memory.value for item in listed.memories] == ["Bob's own fact"]
    prompt = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=ada.agent_id, owner_id="bob")
    )
    assert "Ada" not in prompt.context_block
    assert "Bob's own fact" in prompt.user_md
    sources = await memory.memory.ListMemorySources(md.ListMemorySourcesRequest(owner=bob_owner))
    assert len(sources.sources) == 1
    resources = await memory.resources.ListRevisions(
        md.ListRevisionsRequest(
            ref=md.ResourceRef(agent_id=ada.agent_id, type=md.RESOURCE_TYPE_USER_MD, scope_id="bob")
        )
    )
    for revision in resources.revisions:
        content = await memory.resources.GetRevision(
            md.GetRevisionRequest(ref=revision.ref, revision=revision.revision)
        )
        assert "Ada" not in content.revision.content
    # Ada still has everything.
    mine = await memory.memory.ListMemories(md.ListMemoriesRequest(conversation=ada))
    assert len(mine.memories) == 3


async def test_reads_by_id_never_see_a_stale_row(memory: md.Stubs) -> None:
    """GetMemory by id is served from the row cache; every kind of write must reach it."""
    conversation = fresh_conversation()
    row = await store(memory, conversation, "k", "first", md.CATEGORY_CONTEXT)

    async def get() -> md.Memory:
        response = await memory.memory.GetMemory(
            md.GetMemoryRequest(conversation=conversation, id=row.id)
        )
        return response.memory

    assert (await get()).value == "first"
    assert (await get()).value == "first"  # now cached
    await store(memory, conversation, "k", "second", md.CATEGORY_CONTEXT)  # upsert by key
    assert (await get()).value == "second"
    await store(memory, conversation, "", "third", id=row.id)  # replace by id
    assert (await get()).value == "third"
    await memory.memory.UpdateMemory(
        md.UpdateMemoryRequest(conversation=conversation, id=row.id, metadata='{"a": 1}')
    )
    assert (await get()).metadata == '{"a":1}'
    await memory.memory.ArchiveMemory(md.ArchiveMemoryRequest(conversation=conversation, id=row.id))
    assert (await get()).archived
    await memory.memory.RestoreMemory(md.RestoreMemoryRequest(conversation=conversation, id=row.id))
    assert not (await get()).archived
    await memory.memory.DeleteMemory(md.DeleteMemoryRequest(conversation=conversation, id=row.id))
    error = await rpc_error(get())
    assert error.code() == grpc.StatusCode.NOT_FOUND
