"""Translation of transcript streams: open, segment and end in; acknowledgements out. Nothing
here decides policy (the rules a stream follows are memoryd.domain.transcripts')."""

from __future__ import annotations

from collections.abc import AsyncIterator

from memoryd.api.convert import conversation_out, trust_in
from memoryd.api.enum_tables import SPEAKER
from memoryd.domain.transcripts import Ack, Ending, Opening, Segment
from memoryd.domain.turns import TurnUsage
from memoryd.errors import InvalidArgument
from memoryd_client.v2 import conversation_service_pb2 as conversation_pb


async def transcript_events(
    requests: AsyncIterator[conversation_pb.StreamTranscriptRequest],
) -> AsyncIterator[Opening | Segment | Ending]:
    """The stream's messages as domain values; an empty or malformed one is refused."""
    async for request in requests:
        which = request.WhichOneof("kind")
        if which == "open":
            opened = request.open
            yield Opening(
                device_id=opened.device_id,
                session_id=opened.session_id,
                agent_id=opened.agent_id,
                owner_id=opened.owner_id,
                thread_scope=opened.thread_scope,
                model=opened.model,
                trust=trust_in(opened.trust, "open.trust"),
            )
        elif which == "segment":
            yield _segment(request.segment)
        elif which == "end":
            yield Ending()
        else:
            raise InvalidArgument("a transcript message must be one of open, segment or end")


def _segment(segment: conversation_pb.TranscriptSegment) -> Segment:
    usage = None
    if segment.HasField("usage"):
        usage = TurnUsage(
            peak_prompt_tokens=segment.usage.peak_prompt_tokens or None,
            context_window=segment.usage.context_window or None,
        )
    return Segment(
        seq=segment.seq,
        speaker=SPEAKER.optional(segment.speaker, "segment.speaker"),
        partial=segment.partial,
        text=segment.text,
        start_ms=segment.start_ms,
        end_ms=segment.end_ms,
        usage=usage,
    )


def ack_out(ack: Ack) -> conversation_pb.StreamTranscriptResponse:
    """An acknowledgement."""
    response = conversation_pb.StreamTranscriptResponse(
        committed_seq=ack.committed_seq, persisted=ack.persisted, resumed=ack.resumed
    )
    if ack.conversation is not None:
        response.conversation.CopyFrom(conversation_out(ack.conversation))
    if ack.totals is not None:
        response.totals.segments = ack.totals.segments
        response.totals.finals_stored = ack.totals.finals_stored
        response.totals.duplicates = ack.totals.duplicates
    return response
