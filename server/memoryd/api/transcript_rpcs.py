"""The realtime transcript RPC of memoryd.v1.MemoryService: StreamTranscript."""

from __future__ import annotations

from collections.abc import AsyncIterator

from memoryd.api.context import Context
from memoryd.api.transcript_convert import ack_out, transcript_events
from memoryd.services.transcripts import TranscriptService
from memoryd_client.v1 import memory_service_pb2 as service_pb


class TranscriptRpcs:
    """StreamTranscript."""

    def __init__(self, transcripts: TranscriptService) -> None:
        self._transcripts = transcripts

    async def StreamTranscript(
        self, request_iterator: AsyncIterator[service_pb.StreamTranscriptRequest], context: Context
    ) -> AsyncIterator[service_pb.StreamTranscriptResponse]:
        async for ack in self._transcripts.run(transcript_events(request_iterator)):
            yield ack_out(ack)
