"""Reaching each worker of `memoryd serve --workers N` (memoryd.supervisor), for tests and
benchmarks: the kernel spreads connections over the workers, and a health check of
`memoryd.worker.<index>` is SERVING only on that worker. Channels are opened, each on a
connection of its own, until every worker has one."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2

import memoryd_client as md

ATTEMPTS = 64


async def worker_of(channel: grpc.aio.Channel, workers: int) -> int | None:
    """The index of the worker `channel`'s connection reached (None: not a worker's)."""
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
    for index in range(workers):
        try:
            answer = await check(
                health_pb2.HealthCheckRequest(service=f"memoryd.worker.{index}"), timeout=5
            )
        except grpc.aio.AioRpcError as error:
            if error.code() is grpc.StatusCode.NOT_FOUND:
                continue
            raise
        if answer.status == health_pb2.HealthCheckResponse.SERVING:
            return index
    return None


@contextlib.asynccontextmanager
async def channels_to_each_worker(
    address: str, workers: int
) -> AsyncIterator[list[grpc.aio.Channel]]:
    """One channel per worker, in index order; RuntimeError when some worker was never
    reached in ATTEMPTS connections."""
    found: dict[int, grpc.aio.Channel] = {}
    opened: list[grpc.aio.Channel] = []
    try:
        for attempt in range(ATTEMPTS):
            # A channel option of its own: gRPC shares a connection between channels whose
            # options are equal.
            channel = md.connect(address, options=[("grpc.memoryd_connection", attempt)])
            opened.append(channel)
            index = await worker_of(channel, workers)
            if index is not None and index not in found:
                found[index] = channel
            if len(found) == workers:
                break
        if len(found) != workers:
            raise RuntimeError(f"{ATTEMPTS} connections reached workers {sorted(found)} only")
        yield [found[index] for index in range(workers)]
    finally:
        for channel in opened:
            await channel.close()


def children(pid: int) -> list[int]:
    """The processes `pid` started (a supervisor's workers, one starting included), from /proc."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found
