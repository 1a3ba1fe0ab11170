"""ClearConversation (/new), PurgeConversation (erasure) and GetConversation."""

from __future__ import annotations

import grpc

import memoryd_client as md
from memoryd.storage.connection import SqliteConnection
from memoryd.testing.server_process import ServerProcess
from tests.backends import on_postgres, postgres_rows
from tests.helpers import append, fresh_conversation, owner_of, rpc_error, store, user


async def describe(memory: md.Stubs, conversation: md.Conversation) -> md.GetConversationResponse:
    """GetConversation."""
    return await memory.conversations.GetConversation(
        md.GetConversationRequest(conversation=conversation)
    )


async def test_get_conversation_reports_counts_times_window_and_version(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    appended = await append(memory, conversation, user("one"), user("two"))
    first, second = appended.results
    state = await describe(memory, conversation)
    assert state.conversation.chat_id == conversation.chat_id
    assert state.conversation.thread_scope == "root"
    assert (state.message_count, state.window_message_count) == (2, 2)
    assert state.first_message_at == first.created_at
    assert state.last_message_at == second.created_at
    assert state.last_message_id == second.id
    assert state.window_start_id == 0
    assert not state.HasField("window_started_at")
    assert state.history_version == appended.history_version


async def test_history_version_changes_whenever_the_window_changes(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    versions = [(await append(memory, conversation, user("a"))).history_version]
    versions.append((await append(memory, conversation, user("b"))).history_version)
    # A duplicate retry stores nothing: the version stays.
    retry = await append(memory, conversation, user("c", client_message_id="k"))
    versions.append(retry.history_version)
    assert (
        await append(memory, conversation, user("c", client_message_id="k"))
    ).history_version == (retry.history_version)
    cleared = await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    versions.append(cleared.history_version)
    assert versions == sorted(set(versions)), versions
    assert (await describe(memory, conversation)).history_version == cleared.history_version


async def test_clear_moves_the_window_and_keeps_every_message(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    appended = await append(memory, conversation, user("old 1"), user("old 2"))
    cleared = await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    assert cleared.notice == "Started a fresh session. Long-term memory is preserved."
    assert cleared.window_start_id == appended.results[-1].id
    await append(memory, conversation, user("new"))
    state = await describe(memory, conversation)
    assert (state.message_count, state.window_message_count) == (3, 1)
    assert state.window_start_id == cleared.window_start_id
    assert state.HasField("window_started_at")
    # Clearing twice with nothing new does not move the window back or lose anything.
    again = await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    assert again.window_start_id > cleared.window_start_id
    assert (await describe(memory, conversation)).message_count == 3


async def test_clear_of_an_unknown_conversation_starts_it(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    cleared = await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    assert cleared.window_start_id == 0
    state = await describe(memory, conversation)
    assert (state.message_count, state.history_version) == (0, cleared.history_version)


async def test_purge_erases_rows_and_index_entries(
    memory: md.Stubs, conversation: md.Conversation, server: ServerProcess
) -> None:
    secret = "my passport number is X1234567 zebrafish"
    neighbour = md.Conversation(channel=conversation.channel, chat_id=conversation.chat_id + "-n")
    await append(memory, conversation, user(secret), user("second"), user("third"))
    await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    await append(memory, conversation, user("after clear zebrafish"))
    await append(memory, neighbour, user("the neighbour keeps zebrafish"))

    purged = await memory.conversations.PurgeConversation(
        md.PurgeConversationRequest(conversation=conversation)
    )
    assert (purged.messages_deleted, purged.conversation_deleted) == (4, True)

    for query in ("zebrafish", "passport", "X1234567", "ebrafis", "1234"):
        response = await memory.conversations.SearchHistory(
            md.SearchHistoryRequest(query=query, agent=md.AgentScope())
        )
        contents = [hit.message.content for hit in response.hits]
        assert secret not in contents
        assert "after clear zebrafish" not in contents
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation, all_history=True)
    )
    assert list(listed.messages) == []
    assert (await rpc_error(describe(memory, conversation))).code() == grpc.StatusCode.NOT_FOUND
    # The neighbour is untouched.
    response = await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(
            query="zebrafish", conversation=neighbour, mode=md.SEARCH_MODE_LEXICAL
        )
    )
    assert [h.message.content for h in response.hits] == ["the neighbour keeps zebrafish"]

    # Purging again removes nothing and succeeds.
    again = await memory.conversations.PurgeConversation(
        md.PurgeConversationRequest(conversation=conversation)
    )
    assert (again.messages_deleted, again.conversation_deleted) == (0, False)

    # Both full-text indexes agree with the remaining rows, and the secret's words are gone from
    # the word index's vocabulary.
    if on_postgres():
        terms = {
            row[0]
            for row in postgres_rows(
                server.home, "SELECT word FROM ts_stat('SELECT words FROM messages')"
            )
        }
        assert "x1234567" not in terms
        assert "zebrafish" in terms  # the neighbour's
        leftovers = postgres_rows(
            server.home, "SELECT count(*) FROM messages WHERE content LIKE '%%X1234567%%'"
        )
        assert leftovers == [(0,)]
        return
    database = SqliteConnection(str(server.home / "memory.db"))
    database.set_busy_timeout(5000)
    try:
        for table in ("messages_fts", "messages_trigram"):
            database.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")
        database.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, messages_fts, row)")
        terms = {row[0] for row in database.execute("SELECT term FROM temp.vocab")}
        assert "x1234567" not in terms
        assert "zebrafish" in terms  # the neighbour's
        leftovers = database.execute(
            "SELECT count(*) FROM messages WHERE content LIKE '%X1234567%'"
        ).fetchall()
        assert leftovers == [(0,)]
    finally:
        database.close()


async def test_a_purged_conversation_starts_afresh(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    before = await append(memory, conversation, user("first life", client_message_id="k1"))
    await memory.conversations.PurgeConversation(
        md.PurgeConversationRequest(conversation=conversation)
    )
    after = await append(memory, conversation, user("second life", client_message_id="k1"))
    assert after.results[0].outcome == md.APPEND_OUTCOME_STORED
    # Ids and versions are never reused.
    assert after.results[0].id > before.results[0].id
    assert after.history_version > before.history_version
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation)
    )
    assert [m.content for m in listed.messages] == ["second life"]


async def test_purge_erases_the_conversations_memory_rows_and_re_renders(
    memory: md.Stubs, server: ServerProcess
) -> None:
    conversation = fresh_conversation()
    owner = owner_of(conversation)
    sent = await append(memory, conversation, user("I moved to Porto last week"))
    message_id = sent.results[0].id
    note = await store(memory, conversation, "parking", "Spot B12 in the garage")
    await store(
        memory,
        conversation,
        "sprint",
        "Sprint goal is the billing rewrite",
        md.CATEGORY_CONTEXT,
        scope_type=md.SCOPE_TYPE_CONVERSATION,
    )
    city = await store(
        memory,
        conversation,
        "city",
        "Lives in Porto",
        md.CATEGORY_IDENTITY,
        source_message_id=message_id,
    )
    before = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=conversation.agent_id)
    )
    assert before.memory_md == "## Context\n- Sprint goal is the billing rewrite"
    purged = await memory.conversations.PurgeConversation(
        md.PurgeConversationRequest(conversation=conversation)
    )
    assert (purged.messages_deleted, purged.conversation_deleted, purged.memories_deleted) == (
        1,
        True,
        2,
    )
    after = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(agent_id=conversation.agent_id)
    )
    assert after.memory_md == ""
    assert after.user_md == "## Identity\n- Lives in Porto"
    memory_md = server.home / "memory" / conversation.agent_id / "MEMORY.md"
    assert memory_md.read_text(encoding="utf-8") == ""
    gone = await rpc_error(memory.memory.GetMemory(md.GetMemoryRequest(owner=owner, id=note.id)))
    assert gone.code() == grpc.StatusCode.NOT_FOUND
    for query in ("garage", "billing", "moved last week"):
        hits = await memory.memory.Recall(
            md.RecallRequest(
                conversation=conversation,
                query=query,
                scope=md.RECALL_SCOPE_ALL,
                source=md.RECALL_SOURCE_ALL,
                mode=md.SEARCH_MODE_LEXICAL,
            )
        )
        assert list(hits.hits) == [], query
    # The owner's fact stays, without its link to the erased message.
    kept = await memory.memory.GetMemory(md.GetMemoryRequest(owner=owner, id=city.id))
    assert kept.memory.value == "Lives in Porto"
    assert kept.memory.provenance.source_message_id == 0
    revisions = await memory.resources.ListRevisions(
        md.ListRevisionsRequest(
            ref=md.ResourceRef(agent_id=conversation.agent_id, type=md.RESOURCE_TYPE_MEMORY_MD)
        )
    )
    assert revisions.revisions[0].mutation_source == "conversation_purge"
