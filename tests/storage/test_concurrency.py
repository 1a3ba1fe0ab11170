"""Many concurrent writers: nothing lost, nothing duplicated, ids in order. How well commits are
grouped is a figure of bench/append_throughput.py (rows per commit), not an assertion: it
depends on how a loaded machine schedules the writer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.server_process import ServerProcess
from tests.helpers import append, user

TASKS = 64
APPENDS_PER_TASK = 25
CONVERSATIONS = 8


async def test_concurrent_appends_lose_and_duplicate_nothing(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    # Embeddings off: the background embedder's writes would count in the writer's jobs.
    server = start_server(
        tmp_path / "home", config='[memoryd.search]\nembeddings = "off"\n'
    ).start()
    conversations = [md.Conversation(channel="load", chat_id=f"c{i}") for i in range(CONVERSATIONS)]
    acknowledged: dict[str, list[tuple[int, str]]] = {c.chat_id: [] for c in conversations}

    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)

        async def writer(task: int) -> None:
            conversation = conversations[task % CONVERSATIONS]
            last_id = 0
            for index in range(APPENDS_PER_TASK):
                content = f"task {task} message {index}"
                response = await append(memory, conversation, user(content))
                stored = response.results[0]
                # One caller's writes get strictly increasing ids.
                assert stored.id > last_id
                last_id = stored.id
                acknowledged[conversation.chat_id].append((stored.id, content))

        await asyncio.gather(*(writer(task) for task in range(TASKS)))

        total = 0
        for conversation in conversations:
            stored: list[tuple[int, str]] = []
            token = ""
            while True:
                page = await memory.conversations.ListMessages(
                    md.ListMessagesRequest(
                        conversation=conversation, page_size=1000, page_token=token
                    )
                )
                stored = [(m.id, m.content) for m in page.messages] + stored
                token = page.next_page_token
                if not token:
                    break
            ids = [message_id for message_id, _ in stored]
            assert ids == sorted(set(ids)), "ids strictly increase within a conversation"
            assert sorted(stored) == sorted(acknowledged[conversation.chat_id])
            total += len(stored)
        assert total == TASKS * APPENDS_PER_TASK

    assert server.stop() == 0
    (stopped,) = server.events(Event.STOPPED)
    writer_stats = stopped["writer"]
    assert writer_stats["jobs"] == TASKS * APPENDS_PER_TASK  # one job per call, none repeated


async def test_the_same_client_id_from_many_callers_is_stored_once(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    responses = await asyncio.gather(
        *(
            append(memory, conversation, user(f"attempt {i}", client_message_id="once"))
            for i in range(40)
        )
    )
    outcomes = [r.results[0].outcome for r in responses]
    assert outcomes.count(md.APPEND_OUTCOME_STORED) == 1
    assert outcomes.count(md.APPEND_OUTCOME_DUPLICATE) == 39
    assert len({r.results[0].id for r in responses}) == 1
    listed = await memory.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation)
    )
    assert len(listed.messages) == 1


async def test_reads_during_writes_never_see_partial_calls(
    memory: md.Stubs, conversation: md.Conversation
) -> None:
    stop = asyncio.Event()

    async def write() -> None:
        for batch in range(40):
            await append(memory, conversation, *(user(f"b{batch}-{i}") for i in range(5)))
        stop.set()

    async def read() -> None:
        while not stop.is_set():
            listed = await memory.conversations.ListMessages(
                md.ListMessagesRequest(conversation=conversation, page_size=1000)
            )
            # A call's five messages are committed together: never a partial batch.
            assert len(listed.messages) % 5 == 0
            await asyncio.sleep(0)

    await asyncio.gather(write(), read(), read())
