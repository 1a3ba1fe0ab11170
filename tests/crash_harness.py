"""A crash harness: SIGKILL the server at random moments under mixed load, restart, verify.

Each round starts the server on the same home (with the fake model, so background reviews run),
checks everything acknowledged so far, then runs a mixed load (appends with client ids, imports
through IngestMessages, turns that start reviews, memory stores, clears, searches) and kills the
server with SIGKILL at a random moment. With the server dead, the database is opened directly
and must pass `PRAGMA integrity_check` and both FTS5 `integrity-check`s. After the last round
the server starts once more and everything is verified a final time:

- every acknowledged append is stored, exactly once (client ids and contents are unique);
- every message of an answered import is stored, exactly once;
- every acknowledged transcript final is stored, exactly once, across resumed sessions;
- every acknowledged store is there, with the last acknowledged value or a later attempted one;
- no window starts before an acknowledged clear moved it;
- the reviewer's rows are not duplicated by reviews re-run after a crash;
- USER.md and MEMORY.md on disk equal what GetPromptContext serves.

Shared by tests/storage/test_crash_recovery.py (5 rounds in `make test`) and
`python -m scripts.crash_rounds` (20 rounds or more).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import psycopg

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.storage import database, maintenance
from memoryd.storage.connection import SqliteConnection
from memoryd.storage.postgres.settings import PostgresSettings
from memoryd.testing import postgres
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.server_process import ServerProcess
from tests.backends import on_postgres

AGENT = "crash"
CLIENT_CORE_FAILURE = "Internal error from Core"
CALL_TIMEOUT = 30.0  # a call that hangs is a defect: wait_for fails the round
OWNERS = ("o1", "o2", "o3")
CHATS = ("c1", "c2", "c3", "c4")
_LINE = re.compile(r"^message_id=\d+: (.*)$", re.MULTILINE)


def _kill_all(server: ServerProcess, *, supervisor: bool) -> None:
    """SIGKILL the server; a supervisor's workers first (the ones it runs now: a killed one was
    replaced), the supervisor stopped before, so that it starts no worker meanwhile."""
    pid = server.process.pid
    if not supervisor:
        server.process.kill()
        server.process.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii").split()
    except OSError:
        children = []
    for found in [*map(int, children), pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(found, signal.SIGKILL)
    server.process.wait()


def review_answer(request: dict[str, Any]) -> Reply:
    """The fake model adds one fact per message it is shown, derived from the text alone.

    A request cut short by a kill arrives as `{}`: it is answered with nothing to do.
    """
    messages = request.get("messages", [])
    prompt = "\n".join(str(message.get("content", "")) for message in messages)
    operations = [
        {
            "action": "add",
            "target": "user",
            "category": "interest",
            "value": f"Interested in {hashlib.sha256(text.encode()).hexdigest()[:10]}",
        }
        for text in _LINE.findall(prompt)
    ]
    return Reply(content=json.dumps({"operations": operations[:5]}) if operations else None)


@dataclasses.dataclass
class Ledger:
    """What the server acknowledged (and, for stores, attempted), across every round."""

    # (owner, chat) -> client id -> (message id, content)
    appended: dict[tuple[str, str], dict[str, tuple[int, str]]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(dict)
    )
    # (owner, chat) -> client id -> content, of imports whose stream was answered
    ingested: dict[tuple[str, str], dict[str, str]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(dict)
    )
    # device -> seq -> text of transcript finals whose commit was acknowledged
    spoken: dict[str, dict[int, str]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(dict)
    )
    # (owner, key) -> values in the order they were sent, and how many were acknowledged
    sent_values: dict[tuple[str, str], list[str]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list)
    )
    acked_values: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)
    # (owner, chat) -> the highest window start an acknowledged clear answered
    windows: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)
    calls: int = 0
    failures: int = 0
    connection_cuts: int = 0


def conversation(owner: str, chat: str) -> md.Conversation:
    return md.Conversation(agent_id=AGENT, owner_id=owner, channel="t", chat_id=chat)


class CrashHarness:
    """Rounds of load and SIGKILL on one home; see the module docstring."""

    def __init__(
        self,
        home: Path,
        model: FakeModel,
        seed: int,
        *,
        workers: int = 1,
        cut_connections: bool = False,
    ) -> None:
        """`workers` above 1: `memoryd serve --workers N`, each call task on a connection of
        its own (spread over the workers), and a round kills one worker first, then the rest.
        `cut_connections` (PostgreSQL): PostgreSQL ends every memoryd connection once in each
        round, before the kill."""
        self.home = home
        self.workers = workers
        self.cut_connections = cut_connections
        self.config = (
            review_config(model, turn_interval=1, review_concurrency=2)
            + "\n[memoryd.realtime]\npersist_transcripts = true\n"
        )
        self.random = random.Random(seed)
        self.ledger = Ledger()
        self.rounds = 0
        self.devices = 0

    # --- one round --------------------------------------------------------------------------

    async def round(self, min_seconds: float = 0.3, max_seconds: float = 1.5) -> None:
        """Start, verify, load, SIGKILL at a random moment, check the files offline."""
        server = ServerProcess(self.home, config=self.config, workers=self.workers).start()
        try:
            async with contextlib.AsyncExitStack() as stack:
                first = await stack.enter_async_context(md.connect(server.address))
                await self.verify(md.Stubs(first))
                stop = asyncio.Event()
                tasks = []
                for number, work in enumerate(self._workers() * 2):
                    channel = first
                    if self.workers > 1:  # a connection of its own: the kernel spreads them
                        channel = await stack.enter_async_context(
                            md.connect(server.address, options=[("grpc.crash_task", number)])
                        )
                    tasks.append(asyncio.create_task(work(channel, stop)))
                await asyncio.sleep(self.random.uniform(min_seconds, max_seconds))
                if self.cut_connections:
                    await asyncio.to_thread(self._cut_connections)
                    await asyncio.sleep(self.random.uniform(min_seconds, max_seconds))
                if self.workers > 1:
                    # One worker dies; the others (and its replacement) serve on meanwhile.
                    workers = server.events(Event.SERVING)[-1]["pids"]
                    os.kill(self.random.choice(workers), signal.SIGKILL)
                    await asyncio.sleep(self.random.uniform(min_seconds, max_seconds))
                # SIGKILL: no orderly stop, calls in flight are cut.
                _kill_all(server, supervisor=self.workers > 1)
                stop.set()
                await asyncio.gather(*tasks)
        finally:
            _kill_all(server, supervisor=self.workers > 1)
        self.rounds += 1
        check_database(self.home)

    def _cut_connections(self) -> None:
        """PostgreSQL ends every connection of memoryd (as a failover or an operator would)."""
        dsn = postgres.environment_for(self.home)["MEMORYD_STORAGE_DSN"]
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name LIKE 'memoryd%'"
            )
        self.ledger.connection_cuts += 1

    async def finish(self) -> None:
        """Start once more, verify everything, stop cleanly."""
        server = ServerProcess(self.home, config=self.config, workers=self.workers).start()
        try:
            async with md.connect(server.address) as channel:
                await self.verify(md.Stubs(channel))
        finally:
            code = server.stop()
        assert code == 0, server.output
        check_database(self.home)

    # --- the load ---------------------------------------------------------------------------

    def _workers(self) -> list[Any]:
        return [
            self._appends,
            self._ingests,
            self._transcripts,
            self._turns,
            self._stores,
            self._clears,
            self._searches,
        ]

    async def _call(self, call: Any) -> Any:
        """One RPC; None when the server is gone (the write may or may not have committed)."""
        self.ledger.calls += 1
        try:
            return await asyncio.wait_for(call, CALL_TIMEOUT)
        except grpc.aio.AioRpcError as error:
            cut = error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
            # The client library's own words when a stream's message could not be sent on a
            # connection the kill reset (no server ever says them: memoryd's INTERNALs would
            # carry its own text).
            unsent = (
                error.code() is grpc.StatusCode.INTERNAL and error.details() == CLIENT_CORE_FAILURE
            )
            if not (cut or unsent):
                raise AssertionError((error.code(), error.details())) from error
            self.ledger.failures += 1
            return None

    async def _appends(self, channel: grpc.aio.Channel, stop: asyncio.Event) -> None:
        stub = md.Stubs(channel)
        tag = f"r{self.rounds}-{self.random.getrandbits(32):08x}"
        number = 0
        while not stop.is_set():
            owner, chat = self.random.choice(OWNERS), self.random.choice(CHATS)
            batch = [
                (f"{tag}-{number + offset}", f"append {tag} number {number + offset}")
                for offset in range(self.random.randint(1, 4))
            ]
            number += len(batch)
            response = await self._call(
                stub.conversations.AppendMessages(
                    md.AppendMessagesRequest(
                        conversation=conversation(owner, chat),
                        messages=[
                            md.NewMessage(role=md.ROLE_USER, content=text, client_message_id=key)
                            for key, text in batch
                        ],
                    )
                )
            )
            if response is None:
                return
            for (key, text), result in zip(batch, response.results, strict=True):
                self.ledger.appended[owner, chat][key] = (result.id, text)

    async def _ingests(self, channel: grpc.aio.Channel, stop: asyncio.Event) -> None:
        """Imports of a few batches each; an answered stream acknowledges all its messages."""
        stub = md.Stubs(channel)
        tag = f"i{self.rounds}-{self.random.getrandbits(32):08x}"
        number = 0
        while not stop.is_set():
            sent: list[tuple[str, str, str, str]] = []  # owner, chat, client id, content
            batches = []
            for _ in range(self.random.randint(1, 3)):
                batch = []
                for _ in range(self.random.randint(1, 20)):
                    owner, chat = self.random.choice(OWNERS), self.random.choice(CHATS)
                    key, text = f"{tag}-{number}", f"ingest {tag} number {number}"
                    number += 1
                    sent.append((owner, chat, key, text))
                    batch.append(
                        md.IngestedMessage(
                            conversation=conversation(owner, chat),
                            message=md.NewMessage(
                                role=md.ROLE_USER, content=text, client_message_id=key
                            ),
                        )
                    )
                batches.append(md.IngestMessagesRequest(messages=batch))

            async def stream(
                batches: list[md.IngestMessagesRequest] = batches,
            ) -> AsyncIterator[md.IngestMessagesRequest]:
                for batch in batches:
                    yield batch

            response = await self._call(stub.conversations.IngestMessages(stream()))
            if response is None:
                return
            assert (response.stored, response.rejected) == (len(sent), 0), response
            for owner, chat, key, text in sent:
                self.ledger.ingested[owner, chat][key] = text

    async def _transcripts(self, channel: grpc.aio.Channel, stop: asyncio.Event) -> None:
        """One session per worker and round, resumed by later rounds: the acknowledged finals
        must be there once, whatever the kill cut."""
        stub = md.Stubs(channel)
        # The two workers of a round take devices 0 and 1: every round resumes their sessions.
        self.devices += 1
        device = f"dev-{self.devices % 2}"
        queue: asyncio.Queue[md.StreamTranscriptRequest | None] = asyncio.Queue()

        async def send() -> AsyncIterator[md.StreamTranscriptRequest]:
            while (request := await queue.get()) is not None:
                yield request

        call = stub.conversations.StreamTranscript(send())
        await queue.put(
            md.StreamTranscriptRequest(
                open=md.TranscriptOpen(device_id=device, session_id=f"session-{device}")
            )
        )
        try:
            first = await asyncio.wait_for(call.read(), CALL_TIMEOUT)
            if not isinstance(first, md.StreamTranscriptResponse):  # the stream ended
                return
            seq = first.committed_seq
            while not stop.is_set():
                seq += 1
                text = f"spoken by {device} number {seq}"
                speaker = md.SPEAKER_USER if seq % 2 else md.SPEAKER_ASSISTANT
                await queue.put(
                    md.StreamTranscriptRequest(
                        segment=md.TranscriptSegment(seq=seq, speaker=speaker, text=text)
                    )
                )
                ack = await asyncio.wait_for(call.read(), CALL_TIMEOUT)
                if not isinstance(ack, md.StreamTranscriptResponse):  # the stream ended
                    return
                assert ack.committed_seq == seq
                self.ledger.spoken[device][seq] = text
        except grpc.aio.AioRpcError as error:
            cut = error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
            # The client library's own words when a stream's message could not be sent on a
            # connection the kill reset (no server ever says them: memoryd's INTERNALs would
            # carry its own text).
            unsent = (
                error.code() is grpc.StatusCode.INTERNAL and error.details() == CLIENT_CORE_FAILURE
            )
            if not (cut or unsent):
                raise AssertionError((error.code(), error.details())) from error
        finally:
            await queue.put(None)
            call.cancel()

    async def _turns(self, channel: grpc.aio.Channel, stop: asyncio.Event) -> None:
        stub = md.Stubs(channel)
        tag = f"t{self.rounds}-{self.random.getrandbits(32):08x}"
        number = 0
        while not stop.is_set():
            owner, chat = self.random.choice(OWNERS), self.random.choice(CHATS)
            key, text = f"{tag}-{number}", f"I enjoy hobby {tag} {number}"
            number += 1
            response = await self._call(
                stub.conversations.CommitTurn(
                    md.CommitTurnRequest(
                        conversation=conversation(owner, chat),
                        messages=[
                            md.NewMessage(role=md.ROLE_USER, content=text, client_message_id=key)
                        ],
                    )
                )
            )
            if response is None:
                return
            self.ledger.appended[owner, chat][key] = (response.results[0].id, text)

    async def _stores(self, channel: grpc.aio.Channel, stop: asyncio.Event) -> None:
        stub = md.Stubs(channel)
        tag = f"s{self.rounds}-{self.random.getrandbits(32):08x}"
        number = 0
        while not stop.is_set():
            owner = self.random.choice(OWNERS)
            key = f"{tag}-{number // 2}"  # every key is written twice: a create, then an upsert
            value = f"value {number}"
            number += 1
            sent = self.ledger.sent_values[owner, key]
            sent.append(value)
            response = await self._call(
                stub.memory.StoreMemory(
                    md.StoreMemoryRequest(
                        conversation=conversation(owner, "c1"),
                        category=md.CATEGORY_GOAL,
                        key=key,
                        value=value,
                    )
                )
            )
            if response is None:
                return
            self.ledger.acked_values[owner, key] = len(sent)

    async def _clears(self, channel: grpc.aio.Channel, stop: asyncio.Event) -> None:
        stub = md.Stubs(channel)
        while not stop.is_set():
            await asyncio.sleep(self.random.uniform(0.05, 0.2))
            owner, chat = self.random.choice(OWNERS), self.random.choice(CHATS)
            response = await self._call(
                stub.conversations.ClearConversation(
                    md.ClearConversationRequest(conversation=conversation(owner, chat))
                )
            )
            if response is None:
                return
            window = self.ledger.windows.get((owner, chat), 0)
            self.ledger.windows[owner, chat] = max(window, response.window_start_id)

    async def _searches(self, channel: grpc.aio.Channel, stop: asyncio.Event) -> None:
        stub = md.Stubs(channel)
        while not stop.is_set():
            owner = self.random.choice(OWNERS)
            scope = md.OwnerScope(agent_id=AGENT, owner_id=owner)
            query = self.random.choice(["append", "hobby", "numb", "value"])
            found = await self._call(
                stub.conversations.SearchHistory(md.SearchHistoryRequest(query=query, owner=scope))
            )
            if found is None:
                return

    # --- verification ------------------------------------------------------------------------

    async def verify(self, stub: md.Stubs) -> None:
        """Everything acknowledged so far is there, once; the prompt files match the context."""
        for (owner, chat), acked in self.ledger.appended.items():
            stored = await all_messages(stub, conversation(owner, chat))
            by_key = collections.Counter(m.client_message_id for m in stored)
            assert all(count == 1 for key, count in by_key.items() if key), by_key.most_common(3)
            contents = collections.Counter(m.content for m in stored)
            by_id = {m.client_message_id: (m.id, m.content) for m in stored}
            for key, (message_id, text) in acked.items():
                assert by_id.get(key) == (message_id, text), (owner, chat, key)
                assert contents[text] == 1, (owner, chat, text)
            if (owner, chat) in self.ledger.windows:
                described = await stub.conversations.GetConversation(
                    md.GetConversationRequest(conversation=conversation(owner, chat))
                )
                assert described.window_start_id >= self.ledger.windows[owner, chat]
        for device, finals in self.ledger.spoken.items():
            realtime = md.Conversation(agent_id="", channel="realtime", chat_id=f"local:{device}")
            stored = await all_messages(stub, realtime)
            spoken = collections.Counter(m.content for m in stored)
            for text in finals.values():
                assert spoken[text] == 1, (device, text)
        for (owner, chat), imported in self.ledger.ingested.items():
            stored = await all_messages(stub, conversation(owner, chat))
            pairs = collections.Counter((m.client_message_id, m.content) for m in stored)
            for key, text in imported.items():
                assert pairs[key, text] == 1, (owner, chat, key)
        for owner in OWNERS:
            await self._verify_memories(stub, owner)

    async def _verify_memories(self, stub: md.Stubs, owner: str) -> None:
        rows = await all_memories(stub, owner)
        values = {row.key: row.value for row in rows}
        for (row_owner, key), acked in self.ledger.acked_values.items():
            if row_owner == owner:
                allowed = self.ledger.sent_values[owner, key][acked - 1 :]
                assert values.get(key) in allowed, (owner, key, values.get(key), allowed)
        reviewed = collections.Counter(
            row.value for row in rows if row.provenance.source_type == "memory_reviewer"
        )
        assert all(count == 1 for count in reviewed.values()), reviewed.most_common(3)
        await self._verify_prompt_files(stub, owner)

    async def _verify_prompt_files(self, stub: md.Stubs, owner: str) -> None:
        """The files equal what GetPromptContext serves, once the writer has written them.

        Reviews resume as soon as the server starts, and a file is written just after its
        commit (the prompt cache first), so the two are compared until they agree.
        """
        folder = self.home / "memory" / AGENT / "owners" / owner
        request = md.GetPromptContextRequest(agent_id=AGENT, owner_id=owner)
        for _ in range(100):
            prompt = await stub.context.GetPromptContext(request)
            on_disk = [
                (folder / name).read_text(encoding="utf-8") if (folder / name).exists() else ""
                for name in ("USER.md", "MEMORY.md")
            ]
            if on_disk == [prompt.user_md, prompt.memory_md]:
                return
            await asyncio.sleep(0.05)
        raise AssertionError((owner, on_disk, prompt.user_md, prompt.memory_md))


async def all_messages(stub: md.Stubs, chat: md.Conversation) -> list[md.Message]:
    """Every stored message of a conversation, oldest first."""
    found: list[md.Message] = []
    token = ""
    while True:
        page = await stub.conversations.ListMessages(
            md.ListMessagesRequest(
                conversation=chat, all_history=True, page_size=1000, page_token=token
            )
        )
        found = list(page.messages) + found
        token = page.next_page_token
        if not token:
            return found


async def all_memories(stub: md.Stubs, owner: str) -> list[md.Memory]:
    """Every active row of an owner."""
    found: list[md.Memory] = []
    token = ""
    while True:
        page = await stub.memory.ListMemories(
            md.ListMemoriesRequest(
                owner=md.OwnerScope(agent_id=AGENT, owner_id=owner),
                page_size=1000,
                page_token=token,
            )
        )
        found += [item.memory for item in page.memories]
        token = page.next_page_token
        if not token:
            return found


def check_database(home: Path) -> None:
    """The database as a crash left it: on SQLite, its and both FTS5 indexes' integrity; on
    PostgreSQL, memoryd check's own findings (valid indexes and constraints, no orphans)."""
    if on_postgres():
        dsn = postgres.environment_for(home)["MEMORYD_STORAGE_DSN"]
        settings = PostgresSettings(dsn=dsn, pool_size=1, statement_timeout_ms=0)
        with database.read_snapshot(settings) as connection:
            assert maintenance.problems(connection) == []
        return
    path = home / "memory.db"
    connection = SqliteConnection(str(path))
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        for index in ("messages_fts", "messages_trigram", "memories_fts"):
            connection.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")
    finally:
        connection.close()
