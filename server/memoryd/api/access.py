"""Who may call what: each RPC's access, declared in the contract and read from its descriptors.

Every service of memoryd.v2 says who may call it (any token, or only an admin's) with the service
option `(memoryd.v2.service_access)`, and every RPC, with the method option `(memoryd.v2.access)`
(protos/memoryd/v2/access.proto), whether it writes, whether a token capped at guest trust may
call it, and how far it reaches. memoryd.v1's paths have the access of the memoryd.v2 RPC they
are routed to (memoryd.api.contract).
`declarations` reads them once, when the server starts, and refuses to start on an RPC without
one; the guard (memoryd.api.auth) admits every call by them, and the README's security table is
printed from them (`markdown_table`, scripts/gen_docs.py into docs/security.md).

Some RPCs declared to reach every agent do so only for some requests: ReviewNow, ExportData
and ImportData with an empty agent_id. Which requests those are is said by the same functions
their handlers read the request with (`EVERY_AGENT`), so the guard and the service never read an
empty field two ways.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf.descriptor import MethodDescriptor

from memoryd.api.activity_convert import scopes_named
from memoryd.api.review_convert import review_selection
from memoryd.domain.transfer import selection
from memoryd.errors import StartupError
from memoryd_client.v2 import access_pb2


class Reach(enum.Enum):
    """How much of the stored data one call can touch (memoryd.v2.Reach)."""

    CONVERSATION = "one conversation"
    OWNER = "one owner"
    AGENT = "one agent"
    EVERY_AGENT = "every agent"


_REACH = {
    access_pb2.REACH_CONVERSATION: Reach.CONVERSATION,
    access_pb2.REACH_OWNER: Reach.OWNER,
    access_pb2.REACH_AGENT: Reach.AGENT,
    access_pb2.REACH_EVERY_AGENT: Reach.EVERY_AGENT,
}
_CALLER = {access_pb2.CALLER_ROLE_ADAPTER: False, access_pb2.CALLER_ROLE_ADMIN: True}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EveryAgent:
    """When a request of an RPC that can reach every agent does, and how a refusal says so."""

    reaches: Callable[[Any], bool]
    refusal: str


# The RPCs declared REACH_EVERY_AGENT, each with the reading of its request that its handler
# uses too (memoryd.api.review_convert.review_selection, memoryd.domain.transfer.selection).
EVERY_AGENT: dict[str, EveryAgent] = {
    "ReviewNow": EveryAgent(
        reaches=lambda request: review_selection(request).every_agent,
        refusal="ReviewNow of every agent (no conversation and an empty agent_id)",
    ),
    "ExportData": EveryAgent(
        reaches=lambda request: selection(request.agent_id, request.owner_id).every_agent,
        refusal="ExportData of every agent (an empty agent_id)",
    ),
    # The embedding queue and its vectors are the whole database's.
    "GetEmbeddingStatus": EveryAgent(
        reaches=lambda _request: True, refusal="GetEmbeddingStatus reports on every agent"
    ),
    "ReindexEmbeddings": EveryAgent(
        reaches=lambda _request: True, refusal="ReindexEmbeddings embeds every agent's data"
    ),
    # The overview counts every agent's owners and conversations.
    "GetServerInfo": EveryAgent(
        reaches=lambda _request: True, refusal="GetServerInfo reports on every agent"
    ),
    # Without a conversation, an owner or an agent, it counts every agent's activity.
    "GetActivity": EveryAgent(
        reaches=lambda request: not scopes_named(request),
        refusal="GetActivity of every agent (no conversation, owner or agent)",
    ),
    # The review's triggers are the whole server's.
    "UpdateReviewSettings": EveryAgent(
        reaches=lambda _request: True,
        refusal="UpdateReviewSettings sets the review of every agent",
    ),
    # Its lines are not fields a guard can read: without an agent_id (its first request's, to
    # which every line is then held) they may name any agent.
    "ImportData": EveryAgent(
        reaches=lambda request: selection(request.agent_id, "").every_agent,
        refusal="ImportData of any agent's records (an empty agent_id)",
    ),
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Declared:
    """One RPC's access, as its method option declares it."""

    service: str
    name: str
    admin_only: bool
    writes: bool
    guests: bool
    reach: Reach

    @property
    def path(self) -> str:
        """The method's path on the wire: /memoryd.v2.ConversationService/AppendMessages."""
        return f"/{self.service}/{self.name}"


def declared(method: MethodDescriptor) -> Declared:
    """The access `method` declares (its service's caller, its own writes, guests and reach);
    StartupError when either declaration is missing or leaves a value unset."""
    service = method.containing_service
    label = f"{service.full_name}.{method.name}"
    service_options = service.GetOptions()
    if not service_options.HasExtension(access_pb2.service_access):
        raise StartupError(
            f"{service.full_name} declares no caller: every service needs option "
            "(memoryd.v2.service_access) in its proto"
        )
    caller = service_options.Extensions[access_pb2.service_access].caller
    options = method.GetOptions()
    if not options.HasExtension(access_pb2.access):
        raise StartupError(
            f"{label} declares no access: every RPC needs option (memoryd.v2.access) in its proto"
        )
    access = options.Extensions[access_pb2.access]
    if caller not in _CALLER or access.reach not in _REACH:
        raise StartupError(f"{label}: its access declaration leaves caller or reach unset")
    found = Declared(
        service=service.full_name,
        name=method.name,
        admin_only=_CALLER[caller],
        writes=access.writes,
        guests=access.guests,
        reach=_REACH[access.reach],
    )
    if (found.reach is Reach.EVERY_AGENT) != (found.name in EVERY_AGENT):
        raise StartupError(
            f"{label}: an RPC that can reach every agent needs its reading in "
            "memoryd.api.access.EVERY_AGENT, and only such an RPC has one"
        )
    return found


def declarations(methods: Iterable[MethodDescriptor]) -> dict[str, Declared]:
    """Every RPC's declared access, by its path (memoryd.api.contract.routed gives memoryd.v1's
    paths theirs)."""
    return {f"/{m.containing_service.full_name}/{m.name}": declared(m) for m in methods}


def markdown_table(access: Iterable[Declared]) -> str:
    """The README's security table: one row per RPC, in the contract's order."""
    rows = [
        f"| `{item.service.rpartition('.')[2]}.{item.name}` "
        f"| {'admin' if item.admin_only else 'adapter or admin'} "
        f"| {'yes' if item.writes else 'no'} "
        f"| {'allowed' if item.guests else 'refused'} "
        f"| {item.reach.value} |"
        for item in access
    ]
    header = [
        "| RPC | who may call | writes | guest-capped token | reach |",
        "|---|---|---|---|---|",
    ]
    return "\n".join(header + rows)
