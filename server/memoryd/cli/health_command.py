"""`memoryd health`: ask a running server whether it serves (gRPC health, grpc.health.v1).

For probes that can run a command: a container's HEALTHCHECK, a systemd ExecStartPost, a script.
Prints SERVING (exit 0) or what the server or the channel answered (exit 1) within --timeout.
Kubernetes probes gRPC health natively and needs no command.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

import grpc
from grpc_health.v1 import health_pb2

from memoryd.cli.remote import Stubs

COMMANDS = ("health",)
EXIT_NOT_SERVING = 1


def add_commands(commands: Any, common: Any) -> None:
    """Add `health`; `common` adds --address and --json."""
    health = commands.add_parser("health", help="whether a running server serves (gRPC health)")
    common(health)
    health.add_argument(
        "--service", default="", help="a service's own status (default: the server's)"
    )
    health.add_argument("--timeout", type=float, default=3.0, help="seconds to wait (3)")
    health.set_defaults(run=_health)


def _health(stubs: Stubs, args: argparse.Namespace, out: TextIO) -> int:
    if args.timeout <= 0:
        out.write(f"--timeout must be above 0, got {args.timeout}\n")
        return 2
    try:
        answer = stubs.health_check(
            health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout
        )
    except grpc.RpcError as error:
        code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
        out.write(f"{code.name}\n")
        return EXIT_NOT_SERVING
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    out.write(f"{status}\n")
    return 0 if answer.status == health_pb2.HealthCheckResponse.SERVING else EXIT_NOT_SERVING
