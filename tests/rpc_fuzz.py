"""A fuzzer for every unary RPC, with Hypothesis strategies derived from the message descriptors.

Any request the contract can express is drawn: strings of any script with control characters,
NUL, bidirectional marks, 1 MB values, hostile JSON and search syntax, forged page tokens;
integers at and past their type's edges, ids of rows that belong to another owner, unknown enum
numbers, NaN and infinities, unset fields and oneofs. Some requests are sent as raw bytes that
are not valid protobuf: a lone surrogate inside a string (invalid UTF-8), or a truncated
message.

The invariant (`Target.check`): the server answers every request, never with INTERNAL or
UNKNOWN, never with a status message that carries a traceback, a path, SQL or more than a
short message, never without the machine-readable details (ErrorInfo), and never with an
answer larger than a default client accepts. Shared by tests/security/test_rpc_fuzz.py (a
bounded run in `make test`) and `python -m scripts.fuzz_rpcs` (a long run).
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any, cast

import grpc
from google.protobuf import descriptor, message_factory
from google.protobuf.message import Message
from hypothesis import strategies as st

import memoryd_client as md
from memoryd.api import contract

# memoryd.v2's services (memoryd.v1's paths run the same handlers on the same messages).
SERVICES = tuple(service.descriptor for service in contract.SERVICES)
# "Service.Method" of every RPC of the contract.
RPCS = {f"{service.name}.{rpc.name}": rpc for service in SERVICES for rpc in service.methods}
METHODS = list(RPCS)
# Rows of this owner are made before fuzzing; the fuzzer never names it, so they must survive.
VICTIM = md.Conversation(agent_id="main", owner_id="victim", channel="t", chat_id="victim")
# U+FFFF is 3 bytes in UTF-8, as a surrogate is: swapping the bytes keeps every length prefix.
SURROGATE_STAND_IN = "\uffff"
FORBIDDEN_IN_DETAILS = (
    "Traceback",
    'File "',
    ".py",
    "site-packages",
    "apsw",
    "sqlite",
    "SELECT ",
    "INSERT ",
    "UPDATE ",
    "constraint failed",
)
MAX_DETAILS = 2200

IDENTIFIERS = [
    "",
    "main",
    "default",
    "t",
    "telegram",
    "x" * 256,
    "x" * 257,
    "ü" * 256,
    "😀" * 256,
    "a:b",
    "a%3Ab",
    " padded",
    "tab\t",
    "nul\x00",
    "\u202eevil",
    "..",
    "../../etc",
    "/",
    "job:1",
    SURROGATE_STAND_IN,
]
JSON_TEXTS = [
    "",
    "{}",
    '{"a":1}',
    "[]",
    "{",
    '{"a":NaN}',
    '{"a":1e999}',
    '{"a":"\\ud800"}',
    '{"a":' + "9" * 5000 + "}",
    "[" * 5000 + "]" * 5000,
    '{"guest":true}',
    '{"spoken":"true"}',
]
QUERIES = ["e-mail", "C++", "AND", 'x" OR "y', "*", "NEAR(a b)", "^x", "東京", "🙂", "a" * 1024]


def _forged_tokens() -> list[str]:
    encode = base64.urlsafe_b64encode
    payloads = [b"[" * 600, b'{"v":2,"b":1,"f":0,"h":"\\ud800"}', b'{"v":1,"b":-1}']
    forged = [f"{encode(p).decode().rstrip('=')}.{encode(b'x' * 16).decode()}" for p in payloads]
    return [*forged, "eyJ2IjoxfQ", "not-a-token", ".", "x" * 4000]


SPECIAL_STRINGS = [
    *IDENTIFIERS,
    *JSON_TEXTS,
    *QUERIES,
    *_forged_tokens(),
    "x" * 300_000,
    " " * 10,
    "\n\t\r",
]
# Valid-looking values for any string field: a tame request gets past validation and reaches
# the use cases and storage.
PLAUSIBLE = st.sampled_from(
    ["main", "t", "c1", "c2", "root", "k", "hello there", "active", "chat_message", "default"]
)
TEXT = st.text(max_size=80)
ANY_STRING = st.one_of(TEXT, st.sampled_from(SPECIAL_STRINGS), PLAUSIBLE)
STRING_BY_FIELD = {
    "page_token": st.one_of(st.sampled_from(_forged_tokens()), TEXT),
    "metadata": st.one_of(st.sampled_from(JSON_TEXTS), TEXT),
    "query": st.one_of(st.sampled_from(QUERIES), TEXT),
}
ID_FIELDS = {"id", "source_message_id", "revision", "from_revision", "to_revision"}
INT_RANGES = {
    descriptor.FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    descriptor.FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    descriptor.FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    descriptor.FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    descriptor.FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    descriptor.FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
}


SIMPLE = {
    descriptor.FieldDescriptor.TYPE_BOOL: st.booleans(),
    descriptor.FieldDescriptor.TYPE_DOUBLE: st.floats(allow_nan=True, allow_infinity=True),
    descriptor.FieldDescriptor.TYPE_FLOAT: st.floats(allow_nan=True, allow_infinity=True, width=32),
    descriptor.FieldDescriptor.TYPE_BYTES: st.binary(max_size=64),
}


def _tame(field: descriptor.FieldDescriptor) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind == field.TYPE_STRING:
        return PLAUSIBLE
    if kind == field.TYPE_ENUM:
        return st.sampled_from(_numbers(field))
    if kind in INT_RANGES:
        return st.integers(0, 60)
    if kind in (field.TYPE_DOUBLE, field.TYPE_FLOAT):
        return st.floats(0, 1)
    return SIMPLE[kind]


def _numbers(field: descriptor.FieldDescriptor) -> list[int]:
    """The numbers an enum field declares."""
    assert field.enum_type is not None, field.full_name
    return [value.number for value in field.enum_type.values]


def _scalar(field: descriptor.FieldDescriptor) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind == field.TYPE_STRING:
        return (
            st.one_of(STRING_BY_FIELD[field.name], ANY_STRING)
            if (field.name in STRING_BY_FIELD)
            else ANY_STRING
        )
    if kind == field.TYPE_ENUM:
        return st.one_of(st.sampled_from(_numbers(field)), st.integers(-3, 40))
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        edges = st.sampled_from([value for value in (0, 1, -1, low, high) if low <= value <= high])
        near = st.integers(max(low, -3), min(high, 60))  # ids of real rows, any owner's
        wide = st.integers(low, high)
        return st.one_of(near, edges, wide) if field.name in ID_FIELDS else st.one_of(edges, wide)
    return SIMPLE[kind]


# How often a field is set: tame requests set nearly everything, so required fields are there.
TAME_PRESENCE = st.sampled_from([True] * 9 + [False])
WILD_PRESENCE = st.sampled_from([True, True, True, False])


@st.composite
def requests(
    draw: st.DrawFn, message_type: descriptor.Descriptor, depth: int = 0, tame: bool | None = None
) -> Message:
    """Any message of `message_type`: each field set or not, oneofs with at most one member.

    Half the requests are tame (plausible values everywhere), half wild (any value anywhere).
    """
    if tame is None:
        tame = draw(st.booleans())
    message = message_factory.GetMessageClass(message_type)()
    chosen = {
        oneof.name: draw(st.sampled_from([*oneof.fields, None])) for oneof in message_type.oneofs
    }
    for field in message_type.fields:
        oneof = field.containing_oneof
        if oneof is not None and chosen[oneof.name] is not field:
            continue
        if oneof is None and not draw(TAME_PRESENCE if tame else WILD_PRESENCE):
            continue
        repeated = field.is_repeated
        count = draw(st.integers(0, 3)) if repeated else 1
        if field.type == field.TYPE_MESSAGE:
            if depth >= 3:
                continue
            assert field.message_type is not None, field.full_name
            for _ in range(count):
                value = draw(requests(field.message_type, depth + 1, tame))
                target = getattr(message, field.name)
                (target.add() if repeated else target).CopyFrom(value)
        else:
            values = _tame(field) if tame else _scalar(field)
            if repeated:
                getattr(message, field.name).extend(draw(st.lists(values, max_size=count)))
            else:
                setattr(message, field.name, draw(values))
    return message


@dataclasses.dataclass(frozen=True)
class Case:
    """One call: the request, and how its bytes are spoiled (if at all)."""

    request: Message
    spoil: str  # "", "surrogate" or "truncate"
    cut: int


def cases(method: str) -> st.SearchStrategy[Case]:
    """Calls of one RPC."""
    input_type = RPCS[method].input_type
    return st.builds(
        Case,
        request=requests(input_type),
        spoil=st.sampled_from(["", "", "", "surrogate", "truncate"]),
        cut=st.integers(0, 2**16),
    )


class Target:
    """A server under fuzzing, called over one synchronous channel."""

    def __init__(self, channel: grpc.Channel, home: str, timeout: float = 60.0) -> None:
        self.home = home
        self.timeout = timeout
        self.calls = 0
        self.statuses: dict[str, int] = {}
        self._raw = {
            method: channel.unary_unary(
                f"/{RPCS[method].containing_service.full_name}/{RPCS[method].name}",
                request_serializer=lambda payload: payload,
                response_deserializer=lambda payload: payload,
            )
            for method in METHODS
        }

    def check(self, method: str, case: Case) -> None:
        """Send the case and assert the invariant."""
        payload = self.encode(case)
        self.calls += 1
        try:
            answer = self._raw[method](payload, timeout=self.timeout)
        except grpc.RpcError as error:
            failed = cast("grpc.Call", error)  # a blocking call's error is its Call
            described = md.error_details(error) is not None
        else:
            self.statuses["OK"] = self.statuses.get("OK", 0) + 1
            assert len(answer) <= 4 * 1024 * 1024, (method, len(answer))
            return
        self._check_refusal(method, failed.code(), failed.details() or "", case)
        # Every refusal of memoryd's says why to a program too (memoryd.api.error_details).
        assert described, (method, failed.code(), failed.details())

    def _check_refusal(self, method: str, code: grpc.StatusCode, details: str, case: Case) -> None:
        self.statuses[code.name] = self.statuses.get(code.name, 0) + 1
        where = f"{method} answered {code.name}: {details[:300]!r} for {case.request!r:.600}"
        assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), where
        assert code != grpc.StatusCode.DEADLINE_EXCEEDED, where
        assert len(details) <= MAX_DETAILS, where
        assert self.home not in details, where
        for marker in FORBIDDEN_IN_DETAILS:
            assert marker not in details, where

    def refusal(self, method: str, payload: bytes) -> tuple[grpc.StatusCode, str] | None:
        """The status and message these request bytes are refused with; None when answered."""
        try:
            self._raw[method](payload, timeout=self.timeout)
        except grpc.RpcError as error:
            failed = cast("grpc.Call", error)  # a blocking call's error is its Call
            return failed.code(), failed.details() or ""
        return None

    @staticmethod
    def encode(case: Case) -> bytes:
        """The bytes of the case's request, spoiled as it says."""
        payload: bytes = case.request.SerializeToString()
        if case.spoil == "surrogate":
            payload = payload.replace(SURROGATE_STAND_IN.encode(), b"\xed\xa0\x80")
        elif case.spoil == "truncate" and payload:
            payload = payload[: case.cut % len(payload)]
        return payload
