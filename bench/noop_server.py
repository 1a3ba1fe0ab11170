"""The baseline for AppendMessages throughput: a grpc.aio server that does nothing.

It serves the same memoryd.v1.MemoryService contract and answers AppendMessages with an empty
response without looking at the request: the cost of gRPC itself in Python on this machine.

    python bench/noop_server.py 127.0.0.1:0   # prints the bound address on stdout
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import grpc

from memoryd_client.v1 import memory_service_pb2 as service_pb
from memoryd_client.v1 import memory_service_pb2_grpc as service_grpc


class NoopMemory(service_grpc.MemoryServiceServicer):
    """AppendMessages answers at once; nothing is validated or stored."""

    async def AppendMessages(  # noqa: N802 - the generated name
        self,
        request: service_pb.AppendMessagesRequest,  # noqa: ARG002 - ignored on purpose
        context: Any,  # noqa: ARG002
    ) -> service_pb.AppendMessagesResponse:
        return service_pb.AppendMessagesResponse()


async def main(listen: str) -> None:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    service_grpc.add_MemoryServiceServicer_to_server(NoopMemory(), server)
    port = server.add_insecure_port(listen)
    await server.start()
    print(f"{listen.rpartition(':')[0]}:{port}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:0"))
