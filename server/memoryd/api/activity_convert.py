"""GetActivity's request and answer, between protobuf and memoryd.domain.activity."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from memoryd.api.convert import conversation_in, set_timestamp, timestamp_in
from memoryd.domain.activity import COUNTS, Counts, Span
from memoryd.domain.conversation import HistoryScope, agent_key, owner_key
from memoryd.errors import InvalidArgument
from memoryd_client.v2 import overview_service_pb2 as overview_pb

SCOPES: tuple[Literal["conversation", "owner", "agent"], ...] = ("conversation", "owner", "agent")


def scopes_named(request: overview_pb.GetActivityRequest) -> list[str]:
    """The scope fields a request sets; none means every agent (the guard reads this too)."""
    return [name for name in SCOPES if request.HasField(name)]


def activity_scope_in(request: overview_pb.GetActivityRequest) -> HistoryScope | None:
    """The request's conversation, owner or agent, validated; None for every agent."""
    named = scopes_named(request)
    if len(named) > 1:
        raise InvalidArgument(
            f"set at most one of conversation, owner and agent, got {' and '.join(named)}",
            field=named[1],
        )
    if not named:
        return None
    if named[0] == "conversation":
        return conversation_in(request.conversation)
    if named[0] == "owner":
        return owner_key(
            agent_id=request.owner.agent_id, owner_id=request.owner.owner_id, field="owner"
        )
    return agent_key(agent_id=request.agent.agent_id, field="agent")


def range_in(
    request: overview_pb.GetActivityRequest,
) -> tuple[dt.datetime | None, dt.datetime | None]:
    """The request's start and end times (None when unset); domain.activity.span checks them."""
    start = end = None
    if request.HasField("start_time"):
        start = timestamp_in(request.start_time, "start_time")
    if request.HasField("end_time"):
        end = timestamp_in(request.end_time, "end_time")
    return start, end


def counts_out(counts: Counts, target: overview_pb.ActivityCounts) -> None:
    """Fill an ActivityCounts in place."""
    for name in COUNTS:
        setattr(target, name, getattr(counts, name))


def activity_out(
    span: Span,
    points: list[tuple[dt.datetime, Counts]],
    bucket: overview_pb.ActivityBucket.ValueType,
) -> overview_pb.GetActivityResponse:
    """The response: every bucket, and the total."""
    response = overview_pb.GetActivityResponse(bucket=bucket)
    set_timestamp(response.start_time, span.start)
    set_timestamp(response.end_time, span.end)
    total = Counts()
    for start, counts in points:
        point = response.points.add()
        set_timestamp(point.start_time, start)
        counts_out(counts, point.counts)
        total = total + counts
    counts_out(total, response.total)
    return response
