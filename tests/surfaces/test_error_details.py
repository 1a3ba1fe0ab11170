"""Machine-readable errors, through the real server and the generated client: every refusal
carries google.rpc.ErrorInfo (its reason and field), a bad argument google.rpc.BadRequest too,
and the message stays prose without a reason prefix."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from google.rpc.error_details_pb2 import BadRequest, ErrorInfo
from google.rpc.status_pb2 import Status

import memoryd_client as md


async def refusal(call: Awaitable[Any]) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


def status_of(error: grpc.aio.AioRpcError) -> Status:
    trailing = dict(error.trailing_metadata() or ())
    raw = trailing[md.errors.TRAILER]
    assert isinstance(raw, bytes)
    return Status.FromString(raw)


CASES: list[tuple[str, Callable[[md.Stubs, md.Conversation], Awaitable[Any]], Any]] = [
    (
        "a value over its limit",
        lambda memory, _chat: memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=md.OwnerScope(owner_id="ada"),
                category=md.CATEGORY_GOAL,
                key="k",
                value="x" * 201,
            )
        ),
        (grpc.StatusCode.INVALID_ARGUMENT, "VALUE_TOO_LONG", "value"),
    ),
    (
        "a missing conversation",
        lambda memory, _chat: memory.conversations.AppendMessages(md.AppendMessagesRequest()),
        (grpc.StatusCode.INVALID_ARGUMENT, "REQUIRED", "conversation"),
    ),
    (
        "a message's content over its limit",
        lambda memory, chat: memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=chat,
                messages=[
                    md.user("ada", "fine"),
                    md.user("ada", "x" * (256 * 1024 + 1)),
                ],
            )
        ),
        (grpc.StatusCode.INVALID_ARGUMENT, "VALUE_TOO_LONG", "messages[1].content"),
    ),
    (
        "a forged page token",
        lambda memory, chat: memory.conversations.ListMessages(
            md.ListMessagesRequest(conversation=chat, page_token="forged.token")
        ),
        (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN", "page_token"),
    ),
    (
        "an enum number the contract does not define",
        lambda memory, _chat: memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=md.OwnerScope(owner_id="ada"), category=md.Category.ValueType(42), key="k"
            )
        ),
        (grpc.StatusCode.INVALID_ARGUMENT, "UNKNOWN_ENUM_VALUE", "category"),
    ),
    (
        "an identifier with a control character",
        lambda memory, _chat: memory.conversations.ListMessages(
            md.ListMessagesRequest(conversation=md.Conversation(channel="tg", chat_id="a\x07b"))
        ),
        (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_IDENTIFIER", "conversation.chat_id"),
    ),
    (
        "a guest's /new",
        lambda memory, chat: memory.conversations.ClearConversation(
            md.ClearConversationRequest(conversation=chat, trust=md.TRUST_GUEST)
        ),
        (grpc.StatusCode.PERMISSION_DENIED, "OPERATOR_ONLY", ""),
    ),
    (
        "a row that does not exist",
        lambda memory, _chat: memory.memory.GetMemory(
            md.GetMemoryRequest(owner=md.OwnerScope(owner_id="ada"), id=987_654_321)
        ),
        (grpc.StatusCode.NOT_FOUND, "NOT_FOUND", ""),
    ),
    (
        "a review without a model provider",
        lambda memory, chat: memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=chat)),
        (grpc.StatusCode.FAILED_PRECONDITION, "NO_MODEL_PROVIDER", ""),
    ),
]


@pytest.mark.parametrize(
    ("call", "expected"), [(c, e) for _, c, e in CASES], ids=[n for n, _, _ in CASES]
)
async def test_a_refusal_carries_its_reason_and_field(
    memory: md.Stubs,
    conversation: md.Conversation,
    call: Callable[[md.Stubs, md.Conversation], Awaitable[Any]],
    expected: tuple[grpc.StatusCode, str, str],
) -> None:
    code, reason, field = expected
    error = await refusal(call(memory, conversation))
    assert error.code() is code
    details = md.error_details(error)
    assert details is not None
    assert (details.reason, details.field) == (reason, field)
    status = status_of(error)
    # The Status mirrors the gRPC status, and its ErrorInfo names the domain.
    assert status.code == code.value[0]
    assert status.message == error.details()
    info = ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.domain, info.reason) == ("memoryd", reason)
    if field and code is grpc.StatusCode.INVALID_ARGUMENT:
        violations = BadRequest()
        assert status.details[1].Unpack(violations)
        (violation,) = violations.field_violations
        assert (violation.field, violation.reason) == (field, reason)
        assert violation.description == error.details()
    else:
        assert len(status.details) == 1
    # The message is for people: no slug in front of it.
    assert not (error.details() or "").startswith((reason, reason.lower()))


async def test_an_error_grpc_raises_itself_has_no_details() -> None:
    # Nothing listens there: UNAVAILABLE is grpc's own status, with no details of memoryd's.
    async with grpc.aio.insecure_channel("127.0.0.1:1") as nowhere:
        stub = md.Stubs(nowhere)
        error = await refusal(
            stub.memory.ListMemorySources(md.ListMemorySourcesRequest(), timeout=2)
        )
    assert error.code() is grpc.StatusCode.UNAVAILABLE
    assert md.error_details(error) is None
