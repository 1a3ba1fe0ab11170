"""The floor of this stack for AppendMessages: grpc.aio storing each message in memoryd's schema.

A second baseline beside bench/noop_server.py: where that one answers without doing anything,
this one does the least work an append must: each message goes through one writer thread into
a database made by memoryd's own migrations (SQLite), so that its triggers keep the word and
trigram indexes and the activity counts as memoryd's do; the writer commits what has queued as
one transaction and then answers every call in it, as memoryd's group commit does; the content's
tokens are counted, as memoryd stores them. Nothing else: no checks of the request, no access
rules, no review marks, no ids in the answer, no log line or metric. What memoryd spends beyond
this server is what its own code costs; what this server spends beyond the do-nothing one is
the price of Python, a thread and SQLite's indexes on this machine.

    python bench/floor_server.py DATA_DIRECTORY [127.0.0.1:0]   # prints the bound address
"""

from __future__ import annotations

import asyncio
import datetime as dt
import queue
import sys
import threading
from pathlib import Path
from typing import Any

import backends
import grpc
from noop_server import serve

from memoryd.domain.conversation import (
    DEFAULT_THREAD_SCOPE,
    ConversationKey,
    search_scope_tokens,
)
from memoryd.domain.timestamps import to_text
from memoryd.domain.tokens import count_tokens
from memoryd.storage.transaction import Transaction
from memoryd_client.v2 import conversation_service_pb2 as conversation_pb
from memoryd_client.v2 import conversation_service_pb2_grpc as conversation_grpc

# One message waiting for the writer: its conversation, sender, content and tokens, and the
# call's future and loop.
Job = tuple[tuple[str, ...], str, str, int, "asyncio.Future[None]", asyncio.AbstractEventLoop]

INSERT_CONVERSATION = (
    "INSERT INTO conversations (agent_id, owner_id, channel, chat_id, thread_scope, "
    "history_version, search_scope, created_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?) "
    "ON CONFLICT DO NOTHING"
)
INSERT_MESSAGE = (
    "INSERT INTO messages (agent_id, owner_id, channel, chat_id, thread_scope, sender, role, "
    "kind, content, trust, created_at, token_count) "
    "VALUES (?, ?, ?, ?, ?, ?, 'user', 'chat_message', ?, 'operator', ?, ?)"
)


def write(connection: Transaction, jobs: queue.SimpleQueue[Job]) -> None:
    """The writer thread: each group is what queued while the last one committed."""
    while True:
        group = [jobs.get()]
        while True:
            try:
                group.append(jobs.get_nowait())
            except queue.Empty:
                break
        now = to_text(dt.datetime.now(dt.UTC))
        connection.execute("BEGIN IMMEDIATE")
        keys = {key for key, *_ in group}
        connection.executemany(
            INSERT_CONVERSATION,
            [(*key, search_scope_tokens(ConversationKey(*key)), now) for key in keys],
        )
        connection.executemany(
            INSERT_MESSAGE,
            [(*key, sender, content, now, tokens) for key, sender, content, tokens, _, _ in group],
        )
        connection.execute("COMMIT")
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        for *_, future, loop in group:
            by_loop.setdefault(loop, []).append(future)
        for loop, futures in by_loop.items():
            loop.call_soon_threadsafe(_answer, futures)


def _answer(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        if not future.done():
            future.set_result(None)


class StoringConversations(conversation_grpc.ConversationServiceServicer):
    """AppendMessages stores its messages and answers once they are committed."""

    def __init__(self, jobs: queue.SimpleQueue[Job]) -> None:
        self._jobs = jobs

    async def AppendMessages(  # noqa: N802 - the generated name
        self,
        request: conversation_pb.AppendMessagesRequest,
        context: Any,  # noqa: ARG002
    ) -> conversation_pb.AppendMessagesResponse:
        chat = request.conversation
        key = (
            chat.agent_id or "main",
            chat.owner_id or "owner",
            chat.channel,
            chat.chat_id,
            DEFAULT_THREAD_SCOPE,
        )
        loop = asyncio.get_running_loop()
        futures = []
        for message in request.messages:
            future: asyncio.Future[None] = loop.create_future()
            futures.append(future)
            tokens = count_tokens(message.content)
            self._jobs.put((key, message.sender, message.content, tokens, future, loop))
        for future in futures:
            await future
        return conversation_pb.AppendMessagesResponse()


async def main(home: Path, listen: str) -> None:
    with backends.Backends(None).migrated("sqlite", home) as connection:
        jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        threading.Thread(target=write, args=(connection, jobs), daemon=True).start()
        server = grpc.aio.server()
        servicer = StoringConversations(jobs)  # type: ignore[abstract]
        conversation_grpc.add_ConversationServiceServicer_to_server(servicer, server)
        names = [conversation_pb.DESCRIPTOR.services_by_name["ConversationService"].full_name]
        await serve(server, names, listen)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1:0"))
