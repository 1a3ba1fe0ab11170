"""`Transcript`: a StreamTranscript session that survives a cut stream.

Finals are kept until an acknowledgement covers them; after a reconnect (same session id) the
server's committed seq says which to send again. Partials are never stored, so none is replayed.

    async with Transcript.open(channel, md.TranscriptOpen(device_id="kitchen", session_id="s1"))
            as voice:
        voice.partial(1, md.SPEAKER_USER, "what's the")
        await voice.final(1, md.SPEAKER_USER, "what's the weather")
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from memoryd_client.v2 import conversation_service_pb2 as conversation_pb
from memoryd_client.v2 import conversation_service_pb2_grpc as conversation_grpc

MAX_RECONNECTS = 5
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
_END = object()


class TranscriptError(Exception):
    """The stream answered out of order (a final not covered by its acknowledgement)."""


class Transcript:
    """One realtime transcript session; not safe for concurrent use."""

    def __init__(self, channel: grpc.aio.Channel, opening: conversation_pb.TranscriptOpen) -> None:
        self._stub = conversation_grpc.ConversationServiceStub(channel)
        self._opening = opening
        self._requests: asyncio.Queue[Any] = asyncio.Queue()
        self._call: Any = None
        self._pending: list[conversation_pb.TranscriptSegment] = []
        self.committed = 0
        self.resumed = False
        self.persisted = False
        self.reconnects = 0

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, channel: grpc.aio.Channel, opening: conversation_pb.TranscriptOpen
    ) -> AsyncIterator[Transcript]:
        """Open (or resume) the session; it is cut (not ended) when the block is left."""
        transcript = cls(channel, opening)
        await transcript._connect()
        try:
            yield transcript
        finally:
            transcript.cut()

    async def _connect(self) -> None:
        self.cut()
        requests: asyncio.Queue[Any] = asyncio.Queue()

        async def send() -> AsyncIterator[conversation_pb.StreamTranscriptRequest]:
            while (request := await requests.get()) is not _END:
                yield request

        call = self._stub.StreamTranscript(send())
        requests.put_nowait(conversation_pb.StreamTranscriptRequest(open=self._opening))
        first = await call.read()
        if not isinstance(first, conversation_pb.StreamTranscriptResponse):
            raise TranscriptError("the transcript stream ended before its first answer")
        self._requests, self._call = requests, call
        self.resumed, self.persisted = first.resumed, first.persisted
        self._acknowledge(first.committed_seq)

    def _acknowledge(self, seq: int) -> None:
        self.committed = max(self.committed, seq)
        self._pending = [segment for segment in self._pending if segment.seq > self.committed]

    def partial(self, seq: int, speaker: conversation_pb.Speaker.ValueType, text: str) -> None:
        """Send a partial segment (never stored; lost, harmlessly, when the stream is cut)."""
        segment = conversation_pb.TranscriptSegment(
            seq=seq, speaker=speaker, partial=True, text=text
        )
        self._requests.put_nowait(conversation_pb.StreamTranscriptRequest(segment=segment))

    async def final(self, seq: int, speaker: conversation_pb.Speaker.ValueType, text: str) -> None:
        """Send a final; return once the server acknowledged it. A cut stream is reopened and
        every unacknowledged final sent again."""
        self._pending.append(conversation_pb.TranscriptSegment(seq=seq, speaker=speaker, text=text))
        await self._flush()

    def send_without_waiting(
        self, seq: int, speaker: conversation_pb.Speaker.ValueType, text: str
    ) -> None:
        """Send a final without waiting for its acknowledgement (tests: a cut before the ack)."""
        segment = conversation_pb.TranscriptSegment(seq=seq, speaker=speaker, text=text)
        self._pending.append(segment)
        self._requests.put_nowait(conversation_pb.StreamTranscriptRequest(segment=segment))

    async def _flush(self) -> None:
        for attempt in range(MAX_RECONNECTS + 1):
            try:
                await self._send_pending()
            except grpc.aio.AioRpcError as error:
                if error.code() not in _RETRYABLE or attempt == MAX_RECONNECTS:
                    raise
            except asyncio.CancelledError:
                # Our own cut cancels the call; a cancellation of the caller's task goes on.
                task = asyncio.current_task()
                ours = self._call is not None and self._call.cancelled()
                if (
                    not ours
                    or (task is not None and task.cancelling())
                    or attempt == MAX_RECONNECTS
                ):
                    raise
            else:
                return
            if attempt > 0:  # the first reconnect is at once, later ones wait longer each time
                await asyncio.sleep(0.1 * 2 ** (attempt - 1))
            self.reconnects += 1
            with contextlib.suppress(grpc.aio.AioRpcError):  # tried again on the next attempt
                await self._connect()

    async def _send_pending(self) -> None:
        while self._pending:
            segment = self._pending[0]
            self._requests.put_nowait(conversation_pb.StreamTranscriptRequest(segment=segment))
            ack = await self._call.read()
            if ack is grpc.aio.EOF:
                raise grpc.aio.AioRpcError(
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.aio.Metadata(),
                    grpc.aio.Metadata(),
                    "the transcript stream ended",
                )
            self._acknowledge(ack.committed_seq)
            if self.committed < segment.seq:
                raise TranscriptError(
                    f"final {segment.seq} was answered with committed seq {self.committed}"
                )

    def cut(self) -> None:
        """Drop the current stream as a network failure would (the next final reconnects)."""
        if self._call is not None:
            self._call.cancel()
            self._requests.put_nowait(_END)

    async def end(self) -> conversation_pb.TranscriptTotals:
        """Close the session cleanly; its totals (of the last stream)."""
        await self._flush()
        self._requests.put_nowait(
            conversation_pb.StreamTranscriptRequest(end=conversation_pb.TranscriptEnd())
        )
        last = await self._call.read()
        self._requests.put_nowait(_END)
        self._call = None
        if last is grpc.aio.EOF:
            raise TranscriptError("the transcript stream ended before its totals")
        totals: conversation_pb.TranscriptTotals = last.totals
        return totals
