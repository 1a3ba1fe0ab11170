"""StreamTranscript through the real server: partials and finals, persistence off and on, resume
after a cut and a restart, voice turns feeding the reviewer, many streams at once, and every
kind of bad input ending the stream precisely while what was acknowledged stays."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.log_events import Event
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.server_process import ServerProcess
from tests.helpers import acked
from tests.in_process import ServedInProcess

# Exercises storage: make test runs it on PostgreSQL too.
pytestmark = pytest.mark.storage

PERSIST = "[memoryd.realtime]\npersist_transcripts = true\n"
USER, ASSISTANT = md.SPEAKER_USER, md.SPEAKER_ASSISTANT


def opening(device: str, session: str = "s-1", **fields: Any) -> md.StreamTranscriptRequest:
    return md.StreamTranscriptRequest(
        open=md.TranscriptOpen(device_id=device, session_id=session, model="rt-1", **fields)
    )


def segment(
    seq: int, text: str, speaker: md.Speaker.ValueType = USER, *, partial: bool = False
) -> md.StreamTranscriptRequest:
    return md.StreamTranscriptRequest(
        segment=md.TranscriptSegment(seq=seq, speaker=speaker, partial=partial, text=text)
    )


END = md.StreamTranscriptRequest(end=md.TranscriptEnd())


async def exchange(
    stub: md.Stubs, requests: Sequence[md.StreamTranscriptRequest]
) -> list[md.StreamTranscriptResponse]:
    async def send() -> AsyncIterator[md.StreamTranscriptRequest]:
        for request in requests:
            yield request

    return [response async for response in stub.conversations.StreamTranscript(send())]


def device() -> str:
    return f"dev-{uuid.uuid4().hex[:8]}"


def realtime(device_id: str) -> md.Conversation:
    return md.Conversation(channel="realtime", chat_id=f"local:{device_id}")


async def history(stub: md.Stubs, conversation: md.Conversation) -> list[md.Message]:
    listed = await stub.conversations.ListMessages(
        md.ListMessagesRequest(conversation=conversation, all_history=True, page_size=1000)
    )
    return list(listed.messages)


@pytest.fixture
async def persisting(tmp_path: Path) -> AsyncIterator[md.Stubs]:
    """memoryd's services in this process (tests/in_process.py), keeping transcripts."""
    server = ServedInProcess(tmp_path / "home", config=PERSIST).start()
    try:
        async with md.connect(server.address) as channel:
            yield md.Stubs(channel)
    finally:
        server.stop()


async def test_partials_are_never_stored_and_each_final_is_acknowledged_once_committed(
    persisting: md.Stubs,
) -> None:
    dev = device()
    answers = await exchange(
        persisting,
        [
            opening(dev),
            segment(1, "I'd like", partial=True),
            segment(1, "I'd like a table", partial=True),
            segment(1, "I'd like a table for two."),
            segment(2, "Sure,", ASSISTANT, partial=True),
            segment(2, "Sure, for what time?", ASSISTANT),
            segment(3, "   "),  # a blank side is dropped, its seq still acknowledged
            END,
        ],
    )
    first, *acks, ended = answers
    assert (first.committed_seq, first.persisted, first.resumed) == (0, True, False)
    assert (first.conversation.channel, first.conversation.chat_id) == ("realtime", f"local:{dev}")
    assert [ack.committed_seq for ack in acks] == [1, 2, 3]
    assert (ended.totals.segments, ended.totals.finals_stored, ended.totals.duplicates) == (6, 2, 0)
    stored = await history(persisting, realtime(dev))
    assert [(m.role, m.kind, m.content) for m in stored] == [
        (md.ROLE_USER, "voice_turn", "I'd like a table for two."),
        (md.ROLE_ASSISTANT, "voice_turn", "Sure, for what time?"),
    ]
    metadata = json.loads(stored[0].metadata)
    assert metadata["source_type"] == "realtime"
    assert (metadata["device_id"], metadata["model"]) == (dev, "rt-1")
    assert metadata["transcript_kind"] == "input"
    assert "spoken" not in metadata
    assert json.loads(stored[1].metadata)["transcript_kind"] == "output"


async def test_with_persistence_off_finals_are_acknowledged_and_nothing_is_written(
    memory: md.Stubs,
) -> None:
    dev = device()
    answers = await exchange(
        memory, [opening(dev), segment(1, "hello"), segment(2, "hi", ASSISTANT), END]
    )
    assert [(a.committed_seq, a.persisted) for a in answers] == [
        (0, False),
        (1, False),
        (2, False),
        (2, False),
    ]
    assert answers[-1].totals.finals_stored == 0
    error = await _rpc_error(
        memory.conversations.GetConversation(md.GetConversationRequest(conversation=realtime(dev)))
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND
    again = await exchange(memory, [opening(dev), segment(2, "hi", ASSISTANT), END])
    assert (again[0].committed_seq, again[0].resumed) == (2, True)  # remembered by this process
    assert again[-1].totals.duplicates == 1


def test_the_start_says_once_that_transcripts_are_not_stored(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    unstored = start_server(tmp_path / "off", workers=2).start()
    unstored.wait_for_event(Event.SERVING)
    (said,) = unstored.events(Event.TRANSCRIPTS_NOT_STORED)
    assert "memoryd.realtime.persist_transcripts = true" in said["msg"]
    stored = start_server(tmp_path / "on", config=PERSIST).start()
    stored.wait_for_event(Event.SERVING)
    assert stored.events(Event.TRANSCRIPTS_NOT_STORED) == []


async def test_a_cut_stream_resumes_after_a_restart_without_loss_or_duplicates(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    home, dev = tmp_path / "home", device()
    server = start_server(home, config=PERSIST).start()
    async with md.connect(server.address) as channel:
        stub = md.Stubs(channel)
        sent = asyncio.Queue[md.StreamTranscriptRequest]()

        async def send() -> AsyncIterator[md.StreamTranscriptRequest]:
            while True:
                yield await sent.get()

        call = stub.conversations.StreamTranscript(send())
        await sent.put(opening(dev, "resumable"))
        assert (await acked(call)).committed_seq == 0
        for seq in (1, 2, 3):
            await sent.put(segment(seq, f"utterance {seq}"))
            assert (await acked(call)).committed_seq == seq
        await sent.put(segment(4, "never finished", partial=True))
        call.cancel()  # the client goes away mid-utterance
    server.stop()

    restarted = start_server(home, config=PERSIST).start()
    async with md.connect(restarted.address) as channel:
        stub = md.Stubs(channel)
        replay = [opening(dev, "resumable")] + [segment(s, f"utterance {s}") for s in (2, 3, 4)]
        answers = await exchange(stub, [*replay, END])
        assert (answers[0].committed_seq, answers[0].resumed) == (3, True)
        assert [a.committed_seq for a in answers[1:-1]] == [4]
        assert (answers[-1].totals.duplicates, answers[-1].totals.finals_stored) == (2, 1)
        stored = await history(stub, realtime(dev))
    assert [m.content for m in stored] == [f"utterance {s}" for s in (1, 2, 3, 4)]


async def test_an_idle_stream_ends_at_shutdown_with_a_status_that_says_reconnect(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    dev = device()
    server = start_server(tmp_path / "home", config=PERSIST).start()
    async with md.connect(server.address) as channel:
        stub = md.Stubs(channel)
        sent = asyncio.Queue[md.StreamTranscriptRequest]()

        async def send() -> AsyncIterator[md.StreamTranscriptRequest]:
            while True:
                yield await sent.get()

        call = stub.conversations.StreamTranscript(send())
        await sent.put(opening(dev, "idle"))
        assert (await acked(call)).committed_seq == 0
        await sent.put(segment(1, "said before the shutdown"))
        assert (await acked(call)).committed_seq == 1
        began = asyncio.get_running_loop().time()
        stopping = asyncio.ensure_future(asyncio.to_thread(server.stop))
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await call.read()
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "reconnect" in (ended.value.details() or "")
        assert await stopping == 0
        # Well inside the 10 s grace period an open stream used to hold.
        assert asyncio.get_running_loop().time() - began < 5
        call.cancel()
    restarted = start_server(tmp_path / "home", config=PERSIST).start()
    async with md.connect(restarted.address) as channel:
        stored = await history(md.Stubs(channel), realtime(dev))
    assert [m.content for m in stored] == ["said before the shutdown"]


async def test_voice_turns_feed_the_reviewer_and_reach_user_md(tmp_path: Path) -> None:
    def answer(request: dict[str, Any]) -> Reply:
        prompt = request["messages"][1]["content"]
        assert "Sure, noted." not in prompt  # assistant text is never shown to the reviewer
        add = {
            "action": "add",
            "target": "user",
            "category": "preference",
            "value": "Is vegetarian",
        }
        return Reply(content=json.dumps({"operations": [add]}))

    with FakeModel(responder=answer) as model:
        config = review_config(model, enabled=False) + PERSIST
        server = ServedInProcess(tmp_path / "home", config=config).start()
        try:
            async with md.connect(server.address) as channel:
                stub = md.Stubs(channel)
                dev = device()
                await exchange(
                    stub,
                    [
                        opening(dev),
                        segment(1, "I'm vegetarian."),
                        segment(2, "Sure, noted.", ASSISTANT),
                        END,
                    ],
                )
                state = await stub.reviews.GetReviewState(
                    md.GetReviewStateRequest(conversation=realtime(dev))
                )
                assert state.pending_input
                assert state.unread_messages == 1
                await stub.reviews.ReviewNow(md.ReviewNowRequest(conversation=realtime(dev)))
                prompt = await stub.context.GetPromptContext(md.GetPromptContextRequest())
        finally:
            server.stop()
        assert "- Is vegetarian" in prompt.user_md
        assert len(model.requests) == 1


async def test_fifty_streams_at_once(persisting: md.Stubs) -> None:
    devices = [device() for _ in range(50)]

    async def talk(dev: str) -> list[md.StreamTranscriptResponse]:
        finals = [segment(n, f"{dev} says {n}", USER if n % 2 else ASSISTANT) for n in range(1, 11)]
        return await exchange(persisting, [opening(dev), *finals, END])

    results = await asyncio.gather(*(talk(dev) for dev in devices))
    for answers in results:
        assert [a.committed_seq for a in answers[1:-1]] == list(range(1, 11))
        assert answers[-1].totals.finals_stored == 10
    counts = [len(await history(persisting, realtime(dev))) for dev in devices]
    assert counts == [10] * 50


@pytest.mark.parametrize(
    ("requests", "acknowledged", "message"),
    [
        ([segment(1, "hi")], 0, "the first message must be `open`, which opens the session"),
        (
            [md.StreamTranscriptRequest()],
            0,
            "a transcript message must be one of open, segment or end",
        ),
        ("second open", 1, "the session is open already: `open` comes only first"),
        ("lower seq", 2, "segment.seq 1 is lower than seq 2, sent before"),
        ("final twice", 1, "segment.seq 1 already had its final"),
        ("no speaker", 0, "segment.speaker must be SPEAKER_USER or SPEAKER_ASSISTANT"),
        ("unknown speaker", 0, "segment.speaker has unknown value 7"),
        (
            "oversized",
            1,
            "segment.text is 65537 bytes; the limit is 65536 (memoryd.realtime.max_segment_bytes)",
        ),
        ("seq zero", 0, "segment.seq must be at least 1, got 0"),
        ("blank device", 0, "open.device_id is required"),
    ],
)
async def test_bad_input_ends_the_stream_precisely_and_keeps_what_was_acknowledged(
    persisting: md.Stubs, requests: Any, acknowledged: int, message: str
) -> None:
    dev = device()
    scenarios: dict[str, list[md.StreamTranscriptRequest]] = {
        "second open": [opening(dev), segment(1, "kept"), opening(dev)],
        "lower seq": [opening(dev), segment(1, "kept"), segment(2, "kept too"), segment(1, "x")],
        "final twice": [opening(dev), segment(1, "kept"), segment(1, "again")],
        "no speaker": [opening(dev), segment(1, "who?", md.SPEAKER_UNSPECIFIED)],
        "unknown speaker": [opening(dev), segment(1, "who?", md.Speaker.ValueType(7))],
        "oversized": [opening(dev), segment(1, "kept"), segment(2, "x" * 65537)],
        "seq zero": [opening(dev), segment(0, "zero")],
        "blank device": [opening("")],
    }
    sent = scenarios[requests] if isinstance(requests, str) else requests
    error = await _rpc_error(exchange(persisting, sent))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (error.details() or "").startswith(message), error.details()
    if acknowledged:  # the finals acknowledged before the bad message are stored
        assert len(await history(persisting, realtime(dev))) == acknowledged


async def _rpc_error(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def test_one_agent_can_not_take_every_stream_slot(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    config = "[memoryd.realtime]\nmax_streams = 10\nmax_streams_per_agent = 2\n"
    server = start_server(tmp_path / "home", config=config).start()
    async with md.connect(server.address) as channel:
        stub = md.Stubs(channel)
        held: list[Any] = []
        for _ in range(2):
            # Open, and keep open: the stream holds its slot until it ends.
            stream = stub.conversations.StreamTranscript()
            await stream.write(opening(device(), agent_id="hog"))
            assert (await acked(stream)).committed_seq == 0
            held.append(stream)
        # Refused at its opening: nothing more is written to it, since a write racing the
        # refusal fails in the client ("Internal error from Core") before the status is read.
        refused = stub.conversations.StreamTranscript()
        await refused.write(opening(device(), agent_id="hog"))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await refused.read()
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert caught.value.details() == (
            "2 transcript streams of agent 'hog' are open; the limit is 2 per agent "
            "(memoryd.realtime.max_streams_per_agent)"
        )
        answers = await exchange(stub, [opening(device(), agent_id="other"), END])
        assert answers[-1].HasField("totals")  # another agent still gets a slot
        for stream in held:
            await stream.write(END)
            await stream.done_writing()
            assert (await stream.read()).HasField("totals")
        answers = await exchange(stub, [opening(device(), agent_id="hog"), END])
        assert answers[-1].HasField("totals")  # the slots came back
