"""`memoryd serve --workers N`: one supervisor, N processes on one port and one store.

Each test reaches each worker through memoryd.testing.workers (the health check only that
worker answers SERVING for).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2

import memoryd_client as md
from memoryd.config import load_settings
from memoryd.domain.conversation import DEFAULT_OWNER_ID
from memoryd.domain.resources import ResourceType, prompt_file_path
from memoryd.log_events import Event
from memoryd.services.coherence import Coherence
from memoryd.services.prompt_files import PromptFiles
from memoryd.storage import database as databases
from memoryd.storage import location
from memoryd.storage.write_terms import WriterSettings
from memoryd.testing import postgres
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.server_process import ServerProcess
from memoryd.testing.workers import channels_to_each_worker, children
from tests.helpers import acked, append, health_stub, prompt_files_lock, store, user
from tests.review.test_compaction import WINDOW, compaction_requests, filler, summaries_or_nothing
from tests.review_helpers import eventually
from tests.server.test_first_hour import free_address

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

WORKERS = 2


async def preference(
    memory: md.Stubs, conversation: md.Conversation, key: str, value: str
) -> md.Memory:
    """An owner-scope preference, rendered into the owner's USER.md."""
    return await store(
        memory, conversation, key, value, md.CATEGORY_PREFERENCE, scope_type=md.SCOPE_TYPE_OWNER
    )


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie, exited but not yet reaped by whoever adopted it,
    does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _pids(server: ServerProcess) -> list[int]:
    return list(server.events(Event.SERVING)[-1]["pids"])


async def test_every_worker_serves_the_same_store(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    health = free_address()
    config = f'[memoryd.server]\nhealth_listen = "{health}"\n'
    server = start_server(tmp_path / "home", workers=WORKERS, config=config).start()
    assert len(_pids(server)) == WORKERS
    # Every worker answers on the health port too (SO_REUSEPORT, as on the main port).
    async with channels_to_each_worker(health, WORKERS) as probes:
        assert len(probes) == WORKERS
    conversation = md.Conversation(channel="telegram", chat_id="shared")
    async with channels_to_each_worker(server.address, WORKERS) as (first, second):
        await append(md.Stubs(first), conversation, user("written by worker 0"))
        await append(md.Stubs(second), conversation, user("written by worker 1"))
        for channel in (first, second):
            window = await md.Stubs(channel).conversations.ListMessages(
                md.ListMessagesRequest(conversation=conversation)
            )
            assert [m.content for m in window.messages] == [
                "written by worker 0",
                "written by worker 1",
            ]
            health = await health_stub(channel).Check(health_pb2.HealthCheckRequest())
            assert health.status == health_pb2.HealthCheckResponse.SERVING
    worker_lines = server.events(Event.WORKER_SERVING)
    assert sorted(r["worker"] for r in worker_lines) == list(range(WORKERS))
    assert server.stop() == 0
    assert not any(_alive(pid) for pid in _pids(server))


async def test_another_server_on_the_same_port_is_refused(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home", workers=WORKERS).start()
    alone = start_server(tmp_path / "other", listen=server.address)
    assert alone.wait_exit() != 0
    assert "address already in use" in alone.output
    supervised = start_server(tmp_path / "third", listen=server.address, workers=WORKERS)
    assert supervised.wait_exit() != 0
    assert "address already in use" in supervised.output
    async with md.connect(server.address) as channel:  # the first is untouched
        await append(md.Stubs(channel), md.Conversation(channel="t", chat_id="c"), user("hi"))


def test_only_the_supervisors_workers_get_into_its_data_directory(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    server = start_server(home, workers=WORKERS).start()
    # A process that names a descriptor it was not given (here: its own stdin).
    intruder = start_server(home, arguments=("--worker-of", "5:0:1:0"))
    assert intruder.wait_exit() != 0
    assert "does not hold the lock" in intruder.output
    second = start_server(home, workers=WORKERS)
    assert second.wait_exit() != 0
    assert "already serving" in second.output
    assert server.stop() == 0


async def test_a_killed_worker_is_started_again_and_nothing_acknowledged_is_lost(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home", workers=WORKERS).start()
    victim = _pids(server)[0]
    conversation = md.Conversation(channel="telegram", chat_id="kill")
    acknowledged: list[str] = []
    refused: list[grpc.StatusCode] = []

    async def appender(number: int, stop: asyncio.Event) -> None:
        async with md.connect(
            server.address, options=[("grpc.memoryd_test_connection", number)]
        ) as channel:
            memory = md.Stubs(channel)
            sent = 0
            while not stop.is_set():
                text = f"appender {number} message {sent}"
                sent += 1
                try:
                    await append(memory, conversation, user(text, client_message_id=text))
                except grpc.aio.AioRpcError as error:
                    refused.append(error.code())
                    await asyncio.sleep(0.05)
                    continue
                acknowledged.append(text)

    stop = asyncio.Event()
    tasks = [asyncio.create_task(appender(number, stop)) for number in range(6)]
    await asyncio.sleep(1.0)
    os.kill(victim, signal.SIGKILL)
    restarted = await asyncio.to_thread(server.wait_for_event, Event.WORKER_STARTED, 60)
    assert restarted["worker"] == 0
    assert restarted["pid"] != victim
    await asyncio.sleep(1.0)
    stop.set()
    await asyncio.gather(*tasks)
    assert set(refused) <= {grpc.StatusCode.UNAVAILABLE}
    exited = server.events(Event.WORKER_EXITED)
    assert [(r["worker"], r["pid"], r["code"]) for r in exited] == [(0, victim, -9)]
    contents: list[str] = []
    async with md.connect(server.address) as channel:
        token = ""
        while True:
            page = await md.Stubs(channel).conversations.ListMessages(
                md.ListMessagesRequest(
                    conversation=conversation, page_size=1000, all_history=True, page_token=token
                )
            )
            contents += [m.content for m in page.messages]
            token = page.next_page_token
            if not token:
                break
    assert len(acknowledged) > 20
    assert set(acknowledged) <= set(contents)
    assert len(contents) == len(set(contents))  # retried appends were stored once
    assert server.stop() == 0


def test_a_replacement_that_dies_before_it_serves_is_replaced_in_turn(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    # One death of a worker started again is no reason to stop the server: only
    # EARLY_DEATHS of them in a row are (memoryd.supervisor).
    server = start_server(tmp_path / "home", workers=WORKERS).start()
    first = _pids(server)
    os.kill(first[0], signal.SIGKILL)
    while not (started := set(children(server.process.pid)) - set(first)):
        assert server.process.poll() is None, server.output
        time.sleep(0.005)
    (replacement,) = started
    os.kill(replacement, signal.SIGKILL)  # it imports for a second before it can serve
    restarted = server.wait_for_event(Event.WORKER_STARTED, 60)
    assert restarted["pid"] not in {*first, replacement}
    assert server.events(Event.WORKER_FAILED)  # the replacement died before serving
    assert [(r["pid"], r["code"]) for r in server.events(Event.WORKER_EXITED)] == [
        (first[0], -9),
        (replacement, -9),
    ]
    assert server.process.poll() is None
    assert server.stop() == 0, server.output


async def test_sigterm_drains_every_worker(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """A call in flight on each worker when the supervisor gets SIGTERM (a compaction waiting
    for a slow model) is answered, then every worker stops."""

    def slow_summaries(request: dict[str, Any]) -> Reply:
        return dataclasses.replace(summaries_or_nothing(request), delay_seconds=2.0)

    with FakeModel(responder=slow_summaries) as model:
        config = review_config(model, enabled=False)
        server = start_server(tmp_path / "home", workers=WORKERS, config=config).start()
        pids = _pids(server)
        async with channels_to_each_worker(server.address, WORKERS) as channels:
            calls = []
            for index, channel in enumerate(channels):
                conversation = md.Conversation(channel="telegram", chat_id=f"drain-{index}")
                await md.Stubs(channel).conversations.AppendMessages(
                    md.AppendMessagesRequest(conversation=conversation, messages=filler(12, 150))
                )
                calls.append(
                    asyncio.ensure_future(
                        md.Stubs(channel).context.Compact(
                            md.CompactRequest(conversation=conversation, context_window=WINDOW)
                        )
                    )
                )
            while model.in_flight < WORKERS:  # noqa: ASYNC110 - the model's count, in a thread
                await asyncio.sleep(0.05)
            stopping = asyncio.ensure_future(asyncio.to_thread(server.stop))
            answers = await asyncio.gather(*calls)
            assert await stopping == 0
    assert [answer.outcome for answer in answers] == [md.COMPACTION_OUTCOME_COMPACTED] * WORKERS
    assert sorted(r["worker"] for r in server.events(Event.STOPPED) if "worker" in r) == [0, 1]
    assert not any(_alive(pid) for pid in pids)


# The rolling restart's load: callers per channel, channels of the generated client (each on a
# connection of its own, so both workers carry load), and bare channels with no retry policy.
CALLERS_PER_CHANNEL = 8
CLIENT_CHANNELS = 6
BARE_CHANNELS = 3
MAX_RESTARTS = 8


async def test_a_rolling_restart_under_load_shows_no_error_to_the_generated_client(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """SIGTERM to one worker, then the other, in turn, while callers search and append
    (keyed by client_message_id) without pause. Calls in flight finish; the calls a stopping
    worker had accepted but not started (gRPC cancels those: grpc/grpc#41785) and the calls it
    refuses are tried again by the generated client's policy, on the other worker. Bare
    channels beside them, without the policy, show that the restarts did refuse calls: the
    restarts go on until they have (at most MAX_RESTARTS)."""
    server = start_server(tmp_path / "home", workers=WORKERS).start()
    pids = dict(enumerate(_pids(server)))
    running = True
    client_errors: list[str] = []
    bare_refusals: list[grpc.StatusCode] = []
    acknowledged: dict[str, set[str]] = {}

    async def caller(channel: grpc.aio.Channel, name: str, *, bare: bool) -> None:
        memory = md.Stubs(channel)
        conversation = md.Conversation(channel="telegram", chat_id=name)
        stored = acknowledged.setdefault(name, set())
        number = 0
        while running:
            number += 1
            key = f"{name}-{number}"
            try:
                await append(
                    memory, conversation, user(f"lighthouse {number}", client_message_id=key)
                )
                stored.add(key)
                await memory.conversations.SearchHistory(
                    md.SearchHistoryRequest(
                        conversation=conversation, query="lighthouse", mode=md.SEARCH_MODE_LEXICAL
                    )
                )
            except grpc.aio.AioRpcError as error:
                if not bare:
                    client_errors.append(f"{error.code().name}: {error.details()}")
                elif error.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE):
                    bare_refusals.append(error.code())
                else:
                    raise

    channels = [
        md.connect(server.address, options=[("grpc.memoryd_connection", index)])
        for index in range(CLIENT_CHANNELS)
    ]
    bare = [
        grpc.aio.insecure_channel(
            server.address,
            options=[("grpc.enable_retries", 0), ("grpc.memoryd_connection", -1 - index)],
        )
        for index in range(BARE_CHANNELS)
    ]
    callers = [
        asyncio.ensure_future(caller(channel, f"c{index}-{number}", bare=channel in bare))
        for index, channel in enumerate([*channels, *bare])
        for number in range(CALLERS_PER_CHANNEL)
    ]
    restarts = 0
    try:
        while restarts < MAX_RESTARTS and (restarts < WORKERS or not bare_refusals):
            index = restarts % WORKERS
            started = len(server.events(Event.WORKER_STARTED))
            os.kill(pids[index], signal.SIGTERM)
            while len(server.events(Event.WORKER_STARTED)) == started:
                assert server.process.poll() is None, server.output
                await asyncio.sleep(0.05)
            pids[index] = server.events(Event.WORKER_STARTED)[-1]["pid"]
            restarts += 1
    finally:
        running = False
        await asyncio.gather(*callers)
        for channel in [*channels, *bare]:
            await channel.close()
    assert client_errors == []
    assert bare_refusals, f"{restarts} restarts under load refused no call"
    exits = server.events(Event.WORKER_EXITED)
    assert [(line["code"], line["level"]) for line in exits] == [(0, "info")] * restarts
    # Every call a worker started was answered: none was cut by its stop.
    statuses = {line["status"] for line in server.events(Event.RPC)}
    assert statuses == {"OK"}, statuses
    # Each keyed append is stored once, whatever the retries.
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        for name, stored in acknowledged.items():
            if not name.startswith(tuple(f"c{index}-" for index in range(CLIENT_CHANNELS))):
                continue
            state = await memory.conversations.GetConversation(
                md.GetConversationRequest(
                    conversation=md.Conversation(channel="telegram", chat_id=name)
                )
            )
            assert state.message_count == len(stored), name
    assert server.stop() == 0


async def test_workers_stop_when_their_supervisor_is_killed(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    server = start_server(home, workers=WORKERS).start()
    pids = _pids(server)
    server.process.kill()
    server.process.wait()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)
    again = start_server(home, workers=WORKERS).start()  # the directory and port are free
    assert again.stop() == 0


# 1,000 rounds in the suite: each cached read 200 times, in both directions. `make probes` runs
# 10,000 on each backend (COHERENCE_ROUNDS); on PostgreSQL a round is several round trips, about
# 35 rounds a second on this 2-core machine.
ROUNDS = int(os.environ.get("COHERENCE_ROUNDS", "1000"))


@pytest.mark.timeout(900)
async def test_a_write_acknowledged_by_one_worker_is_read_at_once_through_the_other(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """ROUNDS writes, each followed at once by a read through the other worker, alternating
    direction, over every cached read: ListMessages' first page (the window cache),
    GetPromptContext (the prompt cache), GetMemory (the row cache) and ComposeContext (the kept
    composition), and SearchHistory. Every read must show its write: 0 stale answers."""
    server = start_server(tmp_path / "home", workers=WORKERS).start()
    conversation = md.Conversation(channel="telegram", chat_id="coherence")
    stale: list[tuple[int, str]] = []
    async with channels_to_each_worker(server.address, WORKERS) as channels:
        memories = [md.Stubs(channel) for channel in channels]
        composers = [md.Stubs(channel) for channel in channels]
        row = await preference(memories[0], conversation, "drink", "Prefers tea 0")
        started = time.monotonic()
        for number in range(ROUNDS):
            writer, reader = (0, 1) if number % 2 == 0 else (1, 0)
            kind = number % 10 // 2
            text = f"round {number}"
            if kind == 0:
                await append(memories[writer], conversation, user(text))
                window = await memories[reader].conversations.ListMessages(
                    md.ListMessagesRequest(conversation=conversation, page_size=1)
                )
                seen = window.messages[-1].content
            elif kind == 1:
                await memories[writer].memory.UpdateMemory(
                    md.UpdateMemoryRequest(conversation=conversation, id=row.id, value=text)
                )
                prompt = await memories[reader].context.GetPromptContext(
                    md.GetPromptContextRequest(
                        agent_id=conversation.agent_id, owner_id=conversation.owner_id
                    )
                )
                seen = text if f"- {text}" in prompt.user_md.splitlines() else prompt.user_md
            elif kind == 2:
                await memories[writer].memory.UpdateMemory(
                    md.UpdateMemoryRequest(conversation=conversation, id=row.id, value=text)
                )
                got = await memories[reader].memory.GetMemory(
                    md.GetMemoryRequest(conversation=conversation, id=row.id)
                )
                seen = got.memory.value
            elif kind == 3:
                await append(memories[writer], conversation, user(text))
                composed = await composers[reader].context.ComposeContext(
                    md.ComposeContextRequest(conversation=conversation, context_window=4_000)
                )
                seen = composed.parts[-1].content
            else:
                text = f"round {number} marker{number}"
                await append(memories[writer], conversation, user(text))
                found = await memories[reader].conversations.SearchHistory(
                    md.SearchHistoryRequest(
                        conversation=conversation,
                        query=f"marker{number}",
                        mode=md.SEARCH_MODE_LEXICAL,
                    )
                )
                seen = found.hits[0].message.content if found.hits else ""
            if seen != text:
                stale.append((number, seen))
        rate = ROUNDS / (time.monotonic() - started)
    print(f"{ROUNDS} cross-worker reads, {rate:.0f} a second, {len(stale)} stale")
    assert stale == []


async def test_prompt_files_end_as_the_newest_revision_whichever_worker_wrote_last(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """Both workers change one owner's USER.md at once, many times: the file ends as the
    revision GetPromptContext answers through either worker, never an older one."""
    home = tmp_path / "home"
    server = start_server(home, workers=WORKERS).start()
    conversation = md.Conversation(agent_id="files", channel="telegram", chat_id="files")
    async with channels_to_each_worker(server.address, WORKERS) as channels:
        memories = [md.Stubs(channel) for channel in channels]
        rows = [
            await preference(
                memories[index], conversation, f"from worker {index}", f"Worker {index} wrote 0"
            )
            for index in range(WORKERS)
        ]

        async def rewrite(index: int) -> None:
            for number in range(1, 150):
                await memories[index].memory.UpdateMemory(
                    md.UpdateMemoryRequest(
                        conversation=conversation,
                        id=rows[index].id,
                        value=f"Worker {index} wrote {number}",
                    )
                )

        await asyncio.gather(*(rewrite(index) for index in range(WORKERS)))
        answers = [
            await memory.context.GetPromptContext(
                md.GetPromptContextRequest(
                    agent_id=conversation.agent_id, owner_id=conversation.owner_id
                )
            )
            for memory in memories
        ]
    assert answers[0] == answers[1]
    assert "- Worker 0 wrote 149" in answers[0].user_md.splitlines()
    assert "- Worker 1 wrote 149" in answers[0].user_md.splitlines()
    file = home / "memory" / conversation.agent_id / "USER.md"
    assert file.read_text(encoding="utf-8") == answers[0].user_md


async def test_a_file_a_killed_worker_left_unwritten_is_rewritten_when_it_starts_again(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """The fault between commit and file write: worker 0 commits a change of USER.md and waits
    for the prompt-file lock; it is killed there. Its restart rewrites the file."""
    home = tmp_path / "home"
    server = start_server(home, workers=WORKERS).start()
    victim = _pids(server)[0]
    conversation = md.Conversation(agent_id="healing", channel="telegram", chat_id="heal")
    file = home / "memory" / "healing" / "USER.md"
    async with channels_to_each_worker(server.address, WORKERS) as (first, second):
        memory, other = md.Stubs(first), md.Stubs(second)
        row = await preference(memory, conversation, "drink", "Prefers tea")
        assert "Prefers tea" in file.read_text(encoding="utf-8")

        async def user_md() -> str:
            answer = await other.context.GetPromptContext(
                md.GetPromptContextRequest(agent_id="healing", owner_id=conversation.owner_id)
            )
            return answer.user_md

        with prompt_files_lock(home):
            update = asyncio.ensure_future(
                memory.memory.UpdateMemory(
                    md.UpdateMemoryRequest(
                        conversation=conversation, id=row.id, value="Prefers coffee"
                    )
                )
            )
            await eventually(lambda: _contains(user_md(), "Prefers coffee"))  # committed
            os.kill(victim, signal.SIGKILL)
            with contextlib.suppress(grpc.aio.AioRpcError):
                await update
        restarted = await asyncio.to_thread(server.wait_for_event, Event.WORKER_STARTED, 60)
        assert restarted["pid"] != victim
        await asyncio.to_thread(server.wait_for_event, Event.PROMPT_FILES_RESYNCED, 60)
        assert file.read_text(encoding="utf-8") == await user_md()
    assert "Prefers coffee" in file.read_text(encoding="utf-8")


async def _contains(text: Awaitable[str], part: str) -> bool:
    return part in await text


async def test_a_late_write_of_an_older_revision_never_replaces_a_newer_file(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """The race the test above can rarely catch, made certain: a process that publishes an
    older revision after another process wrote a newer one (its writer thread was slow) writes
    what the database holds now."""
    home = tmp_path / "home"
    server = start_server(home, workers=WORKERS).start()
    conversation = md.Conversation(agent_id="late", channel="telegram", chat_id="late")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        row = await preference(memory, conversation, "drink", "Prefers tea")
        older = await memory.context.GetPromptContext(
            md.GetPromptContextRequest(agent_id="late", owner_id=conversation.owner_id)
        )
        await memory.memory.UpdateMemory(
            md.UpdateMemoryRequest(conversation=conversation, id=row.id, value="Prefers coffee")
        )
        newest = await memory.context.GetPromptContext(
            md.GetPromptContextRequest(agent_id="late", owner_id=conversation.owner_id)
        )
    assert older.user_md != newest.user_md
    relative = prompt_file_path(
        "late", conversation.owner_id or DEFAULT_OWNER_ID, ResourceType.USER_MD
    )
    environment = {**os.environ, **postgres.environment_for(home)}
    settings = load_settings(environment, home=str(home))
    database = databases.open_database(
        location.store_settings(settings.storage, settings.home, environment)
    )
    readers = database.readers(1)
    writer = database.writer(
        WriterSettings(max_rows=1, max_wait_seconds=0, attempts=1, retry_delay_seconds=0)
    )
    try:
        shared = Coherence(shared=True, changes=database.changes(), readers=readers)
        late = PromptFiles(home, readers, coherence=shared)
        await asyncio.to_thread(late.write_committed, relative, older.user_md)
        assert (home / relative).read_text(encoding="utf-8") == newest.user_md
        alone = PromptFiles(home, readers)  # alone on its store, it writes what it committed
        await asyncio.to_thread(alone.write_committed, relative, older.user_md)
        assert (home / relative).read_text(encoding="utf-8") == older.user_md
    finally:
        readers.close()
        await writer.close()


async def test_a_transcript_resumes_on_the_other_worker_after_its_worker_is_killed(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """The committed seq comes from the store: a stream cut by the SIGKILL of the worker that
    held it resumes through the other, with nothing lost and nothing twice."""
    server = start_server(
        tmp_path / "home",
        workers=WORKERS,
        config="[memoryd.realtime]\npersist_transcripts = true\n",
    ).start()
    pids = _pids(server)
    opening = md.StreamTranscriptRequest(
        open=md.TranscriptOpen(device_id="kitchen", session_id="s-kill", model="rt-1")
    )

    def final(seq: int) -> md.StreamTranscriptRequest:
        return md.StreamTranscriptRequest(
            segment=md.TranscriptSegment(seq=seq, speaker=md.SPEAKER_USER, text=f"utterance {seq}")
        )

    async with channels_to_each_worker(server.address, WORKERS) as (first, second):
        sent = asyncio.Queue[md.StreamTranscriptRequest]()

        async def send() -> AsyncIterator[md.StreamTranscriptRequest]:
            while True:
                yield await sent.get()

        call = md.Stubs(first).conversations.StreamTranscript(send())
        await sent.put(opening)
        assert (await acked(call)).committed_seq == 0
        for seq in (1, 2, 3):
            await sent.put(final(seq))
            assert (await acked(call)).committed_seq == seq
        os.kill(pids[0], signal.SIGKILL)
        with pytest.raises(grpc.aio.AioRpcError) as cut:
            await call.read()
        assert cut.value.code() is grpc.StatusCode.UNAVAILABLE

        async def replay() -> AsyncIterator[md.StreamTranscriptRequest]:
            for request in (
                opening,
                final(3),
                final(4),
                md.StreamTranscriptRequest(end=md.TranscriptEnd()),
            ):
                yield request

        answers = [
            answer async for answer in md.Stubs(second).conversations.StreamTranscript(replay())
        ]
        assert (answers[0].committed_seq, answers[0].resumed) == (3, True)
        assert answers[-1].totals.duplicates == 1
        assert answers[-1].totals.finals_stored == 1
        stored = await md.Stubs(second).conversations.ListMessages(
            md.ListMessagesRequest(
                conversation=md.Conversation(channel="realtime", chat_id="local:kitchen"),
                all_history=True,
            )
        )
    assert [m.content for m in stored.messages] == [f"utterance {seq}" for seq in (1, 2, 3, 4)]


async def test_one_compaction_of_a_conversation_at_a_time_across_workers(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    """/compact of one conversation through both workers at once: the model summarises once
    (the second compaction waits for the first's claim, then finds nothing to compact)."""

    def slow_summaries(request: dict[str, Any]) -> Reply:
        reply = summaries_or_nothing(request)
        return dataclasses.replace(reply, delay_seconds=1.0)

    with FakeModel(responder=slow_summaries) as model:
        config = review_config(model, enabled=False)
        server = start_server(tmp_path / "home", workers=WORKERS, config=config).start()
        conversation = md.Conversation(channel="telegram", chat_id="compact-once")
        async with channels_to_each_worker(server.address, WORKERS) as channels:
            await md.Stubs(channels[0]).conversations.AppendMessages(
                md.AppendMessagesRequest(conversation=conversation, messages=filler(12, 150))
            )
            answers = await asyncio.gather(
                *(
                    md.Stubs(channel).context.Compact(
                        md.CompactRequest(conversation=conversation, context_window=WINDOW)
                    )
                    for channel in channels
                )
            )
        outcomes = sorted(answer.outcome for answer in answers)
        assert len(compaction_requests(model)) == 1
        assert outcomes == sorted(
            [md.COMPACTION_OUTCOME_COMPACTED, md.COMPACTION_OUTCOME_NOTHING_TO_COMPACT]
        )
