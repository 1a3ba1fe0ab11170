"""ListMessages: the window newest-first by page, oldest-first within a page; all-history walks."""

from __future__ import annotations

from pathlib import Path

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, assistant, user


async def list_all(
    memory: md.Stubs,
    conversation: md.Conversation,
    *,
    page_size: int,
    kinds: tuple[str, ...] = (),
    all_history: bool = False,
) -> list[list[str]]:
    """Walk every page of a conversation with fixed filters."""
    pages: list[list[str]] = []
    token = ""
    while True:
        response = await memory.conversations.ListMessages(
            md.ListMessagesRequest(
                conversation=conversation,
                page_size=page_size,
                page_token=token,
                kinds=list(kinds),
                all_history=all_history,
            )
        )
        ids = [m.id for m in response.messages]
        assert ids == sorted(ids), "each page is oldest first"
        pages.append([m.content for m in response.messages])
        token = response.next_page_token
        if not token:
            return pages


async def test_pages_walk_back_from_the_newest(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    await append(memory, conversation, *(user(f"m{i}") for i in range(7)))
    pages = await list_all(memory, conversation, page_size=3)
    assert pages == [["m4", "m5", "m6"], ["m1", "m2", "m3"], ["m0"]]
    # The default page size (50) returns everything at once.
    assert await list_all(memory, conversation, page_size=0) == [[f"m{i}" for i in range(7)]]


async def test_an_exact_multiple_of_the_page_size_has_no_empty_last_page(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    await append(memory, conversation, *(user(f"m{i}") for i in range(4)))
    assert await list_all(memory, conversation, page_size=2) == [["m2", "m3"], ["m0", "m1"]]


async def test_kind_filter(memory: md.Stubs, conversation: md.Conversation) -> None:
    await append(
        memory,
        conversation,
        user("a"),
        user("spoken", kind="voice_turn"),
        assistant("b"),
        user("tool", kind="tool_result"),
        user("spoken again", kind="voice_turn"),
    )
    assert await list_all(memory, conversation, page_size=1, kinds=("voice_turn",)) == [
        ["spoken again"],
        ["spoken"],
    ]
    assert await list_all(
        memory, conversation, page_size=10, kinds=("voice_turn", "chat_message")
    ) == [["a", "spoken", "b", "spoken again"]]


async def test_clear_starts_a_fresh_window_and_all_history_still_walks_everything(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    await append(memory, conversation, user("before 1"), user("before 2"))
    cleared = await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    assert cleared.notice == "Started a fresh session. Long-term memory is preserved."
    assert await list_all(memory, conversation, page_size=10) == [[]]
    await append(memory, conversation, user("after 1"), user("after 2"), user("after 3"))
    assert await list_all(memory, conversation, page_size=2) == [
        ["after 2", "after 3"],
        ["after 1"],
    ]
    assert await list_all(memory, conversation, page_size=2, all_history=True) == [
        ["after 2", "after 3"],
        ["before 2", "after 1"],
        ["before 1"],
    ]


async def test_a_walk_in_progress_is_not_shifted_by_a_clear(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    await append(memory, conversation, *(user(f"m{i}") for i in range(4)))
    first = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation, page_size=2)
    )
    await memory.conversations.ClearConversation(
        md.ClearConversationRequest(conversation=conversation)
    )
    await append(memory, conversation, user("new"))
    second = await memory.conversations.ListMessages(
        md.ListMessagesRequest(
            conversation=conversation, page_size=2, page_token=first.next_page_token
        )
    )
    assert [m.content for m in second.messages] == ["m0", "m1"]
    assert second.next_page_token == ""


async def test_reads_see_every_acknowledged_write(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    # The first read fills the hot cache; later appends must show up through it at once.
    assert await list_all(memory, conversation, page_size=5) == [[]]
    for index in range(30):
        await append(memory, conversation, user(f"m{index}"))
        listed = await memory.conversations.ListMessages(
            md.ListMessagesRequest(conversation=conversation, page_size=3)
        )
        expected = [f"m{i}" for i in range(max(0, index - 2), index + 1)]
        assert [m.content for m in listed.messages] == expected


async def test_max_conversation_history_caps_the_window(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    config = (
        "[memoryd.history]\nmax_conversation_history = 5\ncache_messages_per_conversation = 3\n"
    )
    server = start_server(tmp_path / "capped", config=config).start()
    conversation = md.Conversation(channel="telegram", chat_id="capped")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await append(memory, conversation, *(user(f"m{i}") for i in range(8)))
        assert await list_all(memory, conversation, page_size=2) == [
            ["m6", "m7"],
            ["m4", "m5"],
            ["m3"],
        ]
        assert await list_all(memory, conversation, page_size=10) == [
            ["m3", "m4", "m5", "m6", "m7"]
        ]
        assert await list_all(memory, conversation, page_size=10, all_history=True) == [
            [f"m{i}" for i in range(8)]
        ]
        described = await memory.conversations.GetConversation(
            md.GetConversationRequest(conversation=conversation)
        )
        assert (described.message_count, described.window_message_count) == (8, 5)


async def test_a_cap_within_the_cache_serves_whole_windows(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    config = "[memoryd.history]\nmax_conversation_history = 3\n"
    server = start_server(tmp_path / "small-cap", config=config).start()
    conversation = md.Conversation(channel="telegram", chat_id="small-cap")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        for index in range(6):
            await append(memory, conversation, user(f"m{index}"))
            window = await list_all(memory, conversation, page_size=2)
            expected = [f"m{i}" for i in range(max(0, index - 2), index + 1)]
            assert [content for page in reversed(window) for content in page] == expected
