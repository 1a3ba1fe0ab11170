"""Who may call: bearer tokens, the agents each covers, the trust each may claim.

With tokens configured ([[memoryd.auth.tokens]]), every call except health and reflection needs
`authorization: Bearer <token>`: none or an unknown one is UNAUTHENTICATED. The call is then
admitted by its RPC's declared access (memoryd.api.access: the `(memoryd.v2.access)` option in
the contract), and its request is read for what it names:

- an admin-only RPC needs role admin;
- an RPC not open to guests refuses a token capped at guest trust (max_trust = "guest");
- a request that reaches every agent (as its RPC's own reading says, memoryd.api.access
  EVERY_AGENT) needs a token for every agent;
- every `agent_id` field of the request and of the messages it holds (empty means the default
  agent, read by memoryd.domain.conversation.agent_or_default as every use case reads it) must
  be one of the token's agents;
- every field of type memoryd.v2.Trust: a claim above the token's max_trust is
  PERMISSION_DENIED, and an unset one becomes the token's max_trust (the use case's default,
  operator, could otherwise exceed it);
- fields declared `guest_ignored` (a turn's usage, a context window) are cleared from a
  guest-capped token's requests: its figures never trigger a compaction.

Every refusal happens before the handler runs, so a refused call changes nothing. Tokens are
compared as SHA-256 digests in constant time and never logged; the RPC log names a caller by
its token's fingerprint.
"""

from __future__ import annotations

import dataclasses
import functools
import hmac
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from memoryd.api.access import EVERY_AGENT, Declared, Reach
from memoryd.config import TokenSettings, token_digest
from memoryd.domain.conversation import agent_or_default
from memoryd.domain.quoting import clipped
from memoryd.errors import PermissionDenied, Unauthenticated
from memoryd_client.v2 import access_pb2, records_pb2

TRUST_ENUM = records_pb2.Trust.DESCRIPTOR.full_name
_TRUST_NUMBER = {"operator": records_pb2.TRUST_OPERATOR, "guest": records_pb2.TRUST_GUEST}
_TRUST_RANK = {records_pb2.TRUST_GUEST: 0, records_pb2.TRUST_OPERATOR: 1}
_BEARER = "bearer "


@dataclasses.dataclass(frozen=True, slots=True)
class _Fields:
    """What matters in one message type: its agent_id fields, Trust fields, the fields ignored
    from guests, and its message fields."""

    agents: tuple[str, ...]
    trusts: tuple[str, ...]
    guest_ignored: tuple[str, ...]
    nested: tuple[FieldDescriptor, ...]


@functools.cache
def _fields(descriptor: Descriptor) -> _Fields:
    agents, trusts, ignored, nested = [], [], [], []
    for field in descriptor.fields:
        if field.GetOptions().Extensions[access_pb2.guest_ignored]:
            ignored.append(field.name)
        if field.name == "agent_id" and field.type == FieldDescriptor.TYPE_STRING:
            agents.append(field.name)
        elif field.enum_type is not None and field.enum_type.full_name == TRUST_ENUM:
            trusts.append(field.name)
        elif field.message_type is not None and field.message_type.full_name.startswith("memoryd."):
            nested.append(field)
    return _Fields(tuple(agents), tuple(trusts), tuple(ignored), tuple(nested))


class Authorizer:
    """The configured tokens, and the check every RPC's request goes through."""

    def __init__(self, tokens: tuple[TokenSettings, ...], access: dict[str, Declared]) -> None:
        self._tokens = tokens
        self._access = access

    def replace_tokens(self, tokens: tuple[TokenSettings, ...]) -> None:
        """Answer with these tokens from the next call on (a reload: memoryd.serving.token_reloads).
        One assignment: a call is checked against the old set or the new, never a mix."""
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

    def _current(self, caller: TokenSettings) -> TokenSettings:
        """The token of the current set with `caller`'s digest (a reload may have changed or
        withdrawn it since a stream opened)."""
        for token in self._tokens:
            if hmac.compare_digest(token.digest, caller.digest):
                return token
        raise Unauthenticated(
            f"the token {caller.fingerprint} was withdrawn (the config file was reloaded): "
            "this stream ends here"
        )

    def admit(
        self,
        caller: TokenSettings,
        method: str,
        request: Message,
        opened: frozenset[str] | None = None,
    ) -> frozenset[str]:
        """Refuse a request the caller may not make (by the RPC's declared access and what the
        request names); fill unset trust with the caller's max_trust and clear the fields
        ignored from guests. Returns the agents it was admitted for.

        `opened`: for a later message of a client stream, the agents its first message was
        admitted for. The stream's reach is then the first message's, and a later message
        that names no agent (a transcript's segments, an import's later requests, whose
        agent_id is the first's) is checked as the stream's, not as the default agent's. It is
        checked with the token as the current set has it: a stream whose token a reload
        withdrew ends (UNAUTHENTICATED) at its next message, and one whose token changed goes
        on with what it may do now."""
        if opened is not None:
            caller = self._current(caller)
        access = self._access[method]
        name = access.name
        if access.admin_only and caller.role != "admin":
            raise PermissionDenied(
                f"{name} is an admin's call: it needs a token with role admin (this one, "
                f"{caller.fingerprint}, is {caller.role})"
            )
        if caller.max_trust == "guest" and not access.guests:
            raise PermissionDenied(
                f"{name} is not open to a token capped at guest trust (this one, "
                f'{caller.fingerprint}, has max_trust = "guest"): it '
                + (
                    "changes what an operator set up"
                    if access.writes
                    else "reads beyond what a guest may see"
                )
            )
        if opened is None and caller.agents is not None and access.reach is Reach.EVERY_AGENT:
            every = EVERY_AGENT[name]
            if every.reaches(request):
                raise PermissionDenied(
                    f'{every.refusal}: it needs a token for every agent (agents = ["*"]); the '
                    f"token {caller.fingerprint} covers {', '.join(sorted(caller.agents))}"
                )
        agents: set[str] = set()
        self._walk(caller, request, agents, stream_level=opened is not None)
        checked = frozenset(agents) or opened or frozenset({agent_or_default("")})
        if caller.agents is not None:
            for agent in sorted(checked):
                if agent not in caller.agents:
                    raise PermissionDenied(
                        f"the token {caller.fingerprint} may not touch agent {clipped(agent)}; "
                        f"it covers {', '.join(sorted(caller.agents))}"
                    )
        return checked

    def _walk(
        self,
        caller: TokenSettings,
        message: Message,
        agents: set[str],
        *,
        stream_level: bool = False,
    ) -> None:
        """Collect the agents `message` names (an empty agent_id is the default agent's, but
        at the top of a stream's later message, where it is the stream's: `stream_level`)."""
        fields = _fields(message.DESCRIPTOR)
        for name in fields.agents:
            value = getattr(message, name)
            if value or not stream_level:
                agents.add(agent_or_default(value))
        if caller.max_trust == "guest":
            for name in fields.guest_ignored:
                message.ClearField(name)
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
