"""The health port (`[memoryd.server] health_listen`): a plaintext gRPC server with only
grpc.health.v1, answering from the main server's own health servicer.

Probes that cannot present TLS or a token (Kubernetes' gRPC probes, a container's HEALTHCHECK
through `memoryd health`) ask here; the statuses are the main port's, so a draining server reads
NOT_SERVING here too. Nothing else is served: reflection and memoryd's services are UNIMPLEMENTED.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from memoryd.errors import StartupError
from memoryd.serving.binding import bind_failure
from memoryd.serving.grpc_limits import GrpcLimits


async def start_health_port(
    listen: str, servicer: health.aio.HealthServicer, limits: GrpcLimits, *, shared: bool
) -> tuple[grpc.aio.Server, int]:
    """Bind `listen` and serve `servicer` on it, under its own connection cap and deadlines
    (memoryd.serving.grpc_limits); `shared` when a supervisor's workers listen on it together
    (SO_REUSEPORT), as they do on the main port. Returns the server and port."""
    server = grpc.aio.server(
        options=[
            *limits.options(),
            ("grpc.so_reuseport", 1 if shared else 0),
            # A health check is one small message.
            ("grpc.max_receive_message_length", 4096),
        ]
    )
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    try:
        port = server.add_insecure_port(listen)
    except RuntimeError as error:
        raise StartupError(
            f"cannot listen on {listen} (memoryd.server.health_listen): {bind_failure(listen)}"
        ) from error
    await server.start()
    return server, port
