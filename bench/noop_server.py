"""Baselines: a grpc.aio server that does nothing but answer.

It serves the same memoryd.v2 contract: AppendMessages with an empty response, StreamTranscript
acknowledging each segment's seq as it is read (nothing stored), and, given a file,
ComposeContext with that serialized answer, without looking at the request: the cost of gRPC
itself in Python on this machine (and of moving that answer). Server reflection is on, for
ghz.

    python bench/noop_server.py 127.0.0.1:0 [COMPOSE_ANSWER_FILE]   # prints the bound address

With $NOOP_REUSEPORT=1 the port is shared (SO_REUSEPORT): several of these processes on one
port are the baseline of `memoryd serve --workers N` (bench/worker_throughput.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import grpc
from grpc_reflection.v1alpha import reflection

from memoryd.api.reflection import MethodAwarePool
from memoryd_client.v2 import context_service_pb2 as context_pb
from memoryd_client.v2 import context_service_pb2_grpc as context_grpc
from memoryd_client.v2 import conversation_service_pb2 as conversation_pb
from memoryd_client.v2 import conversation_service_pb2_grpc as conversation_grpc


class NoopConversations(conversation_grpc.ConversationServiceServicer):
    """AppendMessages answers at once, StreamTranscript acknowledges each segment as it is read;
    nothing is validated or stored."""

    async def AppendMessages(  # noqa: N802 - the generated name
        self,
        request: conversation_pb.AppendMessagesRequest,  # noqa: ARG002 - ignored on purpose
        context: Any,  # noqa: ARG002
    ) -> conversation_pb.AppendMessagesResponse:
        return conversation_pb.AppendMessagesResponse()

    async def StreamTranscript(  # noqa: N802 - the generated name
        self,
        request_iterator: AsyncIterator[conversation_pb.StreamTranscriptRequest],
        context: Any,  # noqa: ARG002
    ) -> AsyncIterator[conversation_pb.StreamTranscriptResponse]:
        """One answer a request, as memoryd's: the open's, each segment's seq, the end's."""
        async for request in request_iterator:
            yield conversation_pb.StreamTranscriptResponse(committed_seq=request.segment.seq)


class CannedContext(context_grpc.ContextServiceServicer):
    """ComposeContext answers with the same prepared answer every time."""

    def __init__(self, answer: context_pb.ComposeContextResponse) -> None:
        self._answer = answer

    async def ComposeContext(  # noqa: N802 - the generated name
        self,
        request: context_pb.ComposeContextRequest,  # noqa: ARG002 - ignored on purpose
        context: Any,  # noqa: ARG002
    ) -> context_pb.ComposeContextResponse:
        return self._answer


async def main(listen: str, compose_answer: bytes | None) -> None:
    reuse = int(os.environ.get("NOOP_REUSEPORT", "0"))
    server = grpc.aio.server(options=[("grpc.so_reuseport", reuse)])
    # Each answers the one RPC the benchmark calls (the bases' other methods are UNIMPLEMENTED).
    conversations = NoopConversations()  # type: ignore[abstract]
    conversation_grpc.add_ConversationServiceServicer_to_server(conversations, server)
    names = [conversation_pb.DESCRIPTOR.services_by_name["ConversationService"].full_name]
    if compose_answer is not None:
        answer = context_pb.ComposeContextResponse.FromString(compose_answer)
        canned = CannedContext(answer)  # type: ignore[abstract]
        context_grpc.add_ContextServiceServicer_to_server(canned, server)
        names.append(context_pb.DESCRIPTOR.services_by_name["ContextService"].full_name)
    await serve(server, names, listen)


async def serve(server: grpc.aio.Server, names: list[str], listen: str) -> None:
    """Serve `names` and reflection on `listen` until stopped; print the address bound first."""
    reflection.enable_server_reflection(
        [*names, reflection.SERVICE_NAME], server, pool=cast("Any", MethodAwarePool())
    )
    port = server.add_insecure_port(listen)
    await server.start()
    print(f"{listen.rpartition(':')[0]}:{port}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(
        main(
            sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:0",
            Path(sys.argv[2]).read_bytes() if len(sys.argv) > 2 else None,
        )
    )
