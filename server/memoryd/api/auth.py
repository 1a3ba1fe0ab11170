"""Who may call: bearer tokens, the agents each covers, the trust each may claim.

With tokens configured ([[memoryd.auth.tokens]]), every call except health and reflection needs
`authorization: Bearer <token>`: none or an unknown one is UNAUTHENTICATED. The request is then
read for what it names, generically, so that no RPC can be forgotten:

- every `agent_id` field of the request and of the messages it holds (empty means the default
  agent, main): each must be one of the token's agents, else PERMISSION_DENIED;
- every field of type memoryd.v1.Trust: a claim above the token's max_trust is
  PERMISSION_DENIED, and an unset one becomes the token's max_trust (the use case's default,
  operator, could otherwise exceed it);
- the operators' RPCs (export, import, PurgeOwner) need role admin; an import, and an export of
  every agent (empty agent_id), need a token for every agent as well.

Agent-wide calls (SearchHistory of an agent, ListResources across owners, ReviewNow without a
conversation, PurgeConversation) are thereby allowed to an admin and to an adapter whose token
covers the agent. Tokens are compared as SHA-256 digests in constant time and never logged; the
RPC log names a caller by its token's fingerprint.
"""

from __future__ import annotations

import dataclasses
import functools
import hmac
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from memoryd.config import TokenSettings, token_digest
from memoryd.domain.conversation import DEFAULT_AGENT_ID
from memoryd.domain.quoting import clipped
from memoryd.errors import PermissionDenied, Unauthenticated
from memoryd_client.v1 import records_pb2

ADMIN_ONLY = frozenset(
    {
        "/memoryd.v1.MemoryService/ExportData",
        "/memoryd.v1.MemoryService/ImportData",
        "/memoryd.v1.MemoryService/PurgeOwner",
    }
)
# Calls that reach every agent: ImportData's lines may name any agent (they are not protobuf
# fields the walk below can read), and ExportData with an empty agent_id exports every agent.
# They need a token for every agent ("*"), not only role admin.
EVERY_AGENT = frozenset({"/memoryd.v1.MemoryService/ImportData"})
EVERY_AGENT_WHEN_EMPTY = frozenset({"/memoryd.v1.MemoryService/ExportData"})
TRUST_ENUM = records_pb2.Trust.DESCRIPTOR.full_name
_TRUST_NUMBER = {"operator": records_pb2.TRUST_OPERATOR, "guest": records_pb2.TRUST_GUEST}
_TRUST_RANK = {records_pb2.TRUST_GUEST: 0, records_pb2.TRUST_OPERATOR: 1}
_BEARER = "bearer "


@dataclasses.dataclass(frozen=True, slots=True)
class _Fields:
    """What matters in one message type: its agent_id fields, Trust fields, message fields."""

    agents: tuple[str, ...]
    trusts: tuple[str, ...]
    nested: tuple[FieldDescriptor, ...]


@functools.cache
def _fields(descriptor: Descriptor) -> _Fields:
    agents, trusts, nested = [], [], []
    for field in descriptor.fields:
        if field.name == "agent_id" and field.type == FieldDescriptor.TYPE_STRING:
            agents.append(field.name)
        elif field.enum_type is not None and field.enum_type.full_name == TRUST_ENUM:
            trusts.append(field.name)
        elif field.message_type is not None and field.message_type.full_name.startswith("memoryd."):
            nested.append(field)
    return _Fields(tuple(agents), tuple(trusts), tuple(nested))


class Authorizer:
    """The configured tokens, and the check every RPC's request goes through."""

    def __init__(self, tokens: tuple[TokenSettings, ...]) -> None:
        self._tokens = tokens

    def caller(self, metadata: Any) -> TokenSettings:
        """The token the call carries (UNAUTHENTICATED when none is valid)."""
        values = [value for key, value in metadata or () if key == "authorization"]
        if not values:
            raise Unauthenticated(
                "this call needs an `authorization: Bearer <token>` header: memoryd is "
                "configured with tokens ([[memoryd.auth.tokens]])"
            )
        header = values[0] if isinstance(values[0], str) else values[0].decode("latin-1")
        if len(values) > 1 or not header[: len(_BEARER)].lower() == _BEARER:
            raise Unauthenticated(
                "the authorization header must be one `Bearer <token>`, got something else"
            )
        digest = token_digest(header[len(_BEARER) :].strip())
        found = None
        for token in self._tokens:  # every token compared, in constant time each
            if hmac.compare_digest(token.digest, digest):
                found = token
        if found is None:
            raise Unauthenticated("the bearer token is not valid")
        return found

    def admit(self, caller: TokenSettings, method: str, request: Message) -> None:
        """Refuse a request the caller may not make; fill unset trust with its max_trust."""
        if method in ADMIN_ONLY and caller.role != "admin":
            raise PermissionDenied(
                f"{method.rpartition('/')[2]} is an operator's call: it needs a token with role "
                f"admin (this one, {caller.fingerprint}, is {caller.role})"
            )
        if caller.agents is not None:
            name = method.rpartition("/")[2]
            reach = (
                f"{name} may write any agent's data"
                if method in EVERY_AGENT
                else f"{name} of every agent (an empty agent_id)"
                if method in EVERY_AGENT_WHEN_EMPTY and not getattr(request, "agent_id", "x")
                else ""
            )
            if reach:
                raise PermissionDenied(
                    f'{reach}: it needs a token for every agent (agents = ["*"]); the token '
                    f"{caller.fingerprint} covers {', '.join(sorted(caller.agents))}"
                )
        agents: set[str] = set()
        self._walk(caller, request, agents)
        if caller.agents is None:
            return
        for agent in sorted(agents or {DEFAULT_AGENT_ID}):
            if agent not in caller.agents:
                raise PermissionDenied(
                    f"the token {caller.fingerprint} may not touch agent {clipped(agent)}; it "
                    f"covers {', '.join(sorted(caller.agents))}"
                )

    def _walk(self, caller: TokenSettings, message: Message, agents: set[str]) -> None:
        fields = _fields(message.DESCRIPTOR)
        for name in fields.agents:
            agents.add(getattr(message, name) or DEFAULT_AGENT_ID)
        if fields.trusts and caller.max_trust is not None:
            ceiling = _TRUST_NUMBER[caller.max_trust]
            for name in fields.trusts:
                claimed = getattr(message, name)
                if claimed == records_pb2.TRUST_UNSPECIFIED:
                    setattr(message, name, ceiling)
                elif claimed in _TRUST_RANK and _TRUST_RANK[claimed] > _TRUST_RANK[ceiling]:
                    raise PermissionDenied(
                        f"{name} {records_pb2.Trust.Name(claimed)} is above what the token "
                        f"{caller.fingerprint} may claim ({caller.max_trust})"
                    )
        for field in fields.nested:
            if field.is_repeated:
                for item in getattr(message, field.name):
                    self._walk(caller, item, agents)
            elif message.HasField(field.name):
                self._walk(caller, getattr(message, field.name), agents)
