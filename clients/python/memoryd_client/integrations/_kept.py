"""What every integration shares: a framework's object kept in a memoryd message (its text the
content, the rest in the metadata), the window read page by page, and memoryd's refusals as the
frameworks' errors."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, Generic, TypeVar

import grpc

import memoryd_client as md

# The most messages memoryd takes in one AppendMessages (its max_messages_per_call default) and
# returns in one ListMessages page.
APPEND_BATCH = 100
PAGE_SIZE = 1000
# memoryd's limits of a search query (memoryd.domain.search_query): distinct words, characters.
MAX_QUERY_WORDS = 32
MAX_QUERY_CHARS = 1024
# Where an object's text may be: the members the frameworks put text in.
TEXT_MEMBERS = frozenset({"content", "text", "output", "arguments", "refusal"})

Path = list[str | int]
T = TypeVar("T")
K = TypeVar("K")


class MemorydRefused(ValueError):
    """memoryd refused a call: its status and message (a ValueError, as the frameworks raise for
    a value they cannot store)."""

    def __init__(self, code: grpc.StatusCode | None, details: str) -> None:
        self.code = code
        name = code.name if code is not None else "UNKNOWN"
        super().__init__(f"memoryd refused ({name}): {details}")


def refused(error: grpc.RpcError) -> MemorydRefused:
    """A gRPC error as MemorydRefused."""
    # A blocking call's error is a grpc.Call, an asyncio call's an AioRpcError: both say these.
    code = error.code() if callable(getattr(error, "code", None)) else None
    details = error.details() if callable(getattr(error, "details", None)) else None
    return MemorydRefused(code, details or str(error))


async def called(call: Awaitable[T]) -> T:
    """An asyncio call's answer; a refusal as MemorydRefused."""
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        raise refused(error) from None


def called_sync(call: Callable[[], T]) -> T:
    """A blocking call's answer; a refusal as MemorydRefused."""
    try:
        return call()
    except grpc.RpcError as error:
        raise refused(error) from None


def search_query(text: str) -> str:
    """A user's message as a memoryd search query: its last 32 distinct words (a long message
    ends with what it asks, more often than it starts with it), at most 1,024 characters."""
    kept: list[str] = []
    for word in reversed(text.split()):
        if word not in kept:
            kept.append(word)
            if len(kept) == MAX_QUERY_WORDS:
                break
    query = " ".join(reversed(kept))
    return query[-MAX_QUERY_CHARS:].strip()


def split_text(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The object's text (its longest text member) and the object without it, saying where it
    was. An object with no text is named by its type or role, so that no message is blank."""
    found: tuple[str, Path] | None = None
    for text, path in _text_members(item, []):
        if text.strip() and (found is None or len(text) > len(found[0])):
            found = (text, path)
    if found is None:
        return f"[{item.get('type') or item.get('role') or 'item'}]", {"item": item}
    shape = copy.deepcopy(item)
    _set(shape, found[1], None)
    return found[0], {"item": shape, "text_at": found[1]}


def kept_metadata(member: str, shape: dict[str, Any]) -> str:
    """A message's metadata holding the shape under `member`."""
    return json.dumps({member: shape}, ensure_ascii=False, separators=(",", ":"))


def kept_item(message: md.Message, member: str) -> dict[str, Any] | None:
    """The object a message keeps under `member`, its text put back; None when it keeps none
    (a message another adapter or memoryd wrote)."""
    metadata = message.metadata
    if f'"{member}"' not in metadata:  # no JSON to read (most messages keep nothing)
        return None
    try:
        kept = json.loads(metadata).get(member)
    except (ValueError, AttributeError):
        return None
    if not isinstance(kept, dict) or not isinstance(kept.get("item"), dict):
        return None
    item: dict[str, Any] = kept["item"]
    if isinstance(kept.get("text_at"), list) and not _set(item, kept["text_at"], message.content):
        return None  # a path that leads nowhere: not a shape an integration wrote
    return item


class Reread(Generic[K, T]):
    """A window's messages decoded, reusing what the last read decoded. A session's window is
    read whole every turn, and all of it but the newest turn was read the turn before. A
    message decodes to what its role, content and metadata say, so one whose three are those of
    a message decoded before decodes to that again. Only what the last read decoded is kept
    (as much as the window, or the part of it read): a message erased or out of the window
    leaves with the next read. What is handed out is the caller's to change: `fresh` makes each
    read's own copy."""

    def __init__(self, decode: Callable[[md.Message], K], fresh: Callable[[K], T]) -> None:
        self._decode = decode
        self._fresh = fresh
        self._known: dict[tuple[int, str, str], K] = {}

    def __call__(self, messages: Sequence[md.Message]) -> list[T]:
        """The messages decoded, each a copy of its own."""
        known = self._known
        kept: dict[tuple[int, str, str], K] = {}
        decoded: list[T] = []
        for message in messages:
            key = (message.role, message.content, message.metadata)
            value = known.get(key)
            if value is None:
                value = self._decode(message)
            kept[key] = value
            decoded.append(self._fresh(value))
        self._known = kept
        return decoded


# An RPC a plan asks for: the stub's service, the method, the request. A plan (a generator of
# calls, sent each answer, a refusal thrown into it) is written once and run by a blocking or an
# asyncio driver.
Call = tuple[str, str, Any]
Plan = Generator[Call, Any, T]


def run_plan_sync(plan: Plan[T], stubs: md.SyncStubs) -> T:
    """A plan's calls on a blocking channel; its result."""
    try:
        call = next(plan)
        while True:
            try:
                answer = called_sync(_bound(stubs, call))
            except MemorydRefused as refusal:
                call = plan.throw(refusal)
            else:
                call = plan.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_plan(plan: Plan[T], stubs: md.Stubs) -> T:
    """A plan's calls on an asyncio channel; its result."""
    try:
        call = next(plan)
        while True:
            try:
                answer = await called(_bound(stubs, call)())
            except MemorydRefused as refusal:
                call = plan.throw(refusal)
            else:
                call = plan.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def window_plan(conversation: md.Conversation, limit: int | None = None) -> Plan[list[md.Message]]:
    """The conversation's window, oldest first; with a limit, its newest `limit` messages."""
    if limit is not None and limit <= 0:
        return []
    pages: list[Sequence[md.Message]] = []
    wanted = limit
    token = ""
    while True:
        page = yield (
            "conversations",
            "ListMessages",
            md.ListMessagesRequest(
                conversation=conversation,
                page_size=min(wanted or PAGE_SIZE, PAGE_SIZE),
                page_token=token,
            ),
        )
        pages.append(page.messages)
        token = page.next_page_token
        if wanted is not None:
            wanted -= len(page.messages)
        if not token or (wanted is not None and wanted <= 0):
            return _oldest_first(pages, limit)


def batches(messages: Sequence[md.NewMessage]) -> list[Sequence[md.NewMessage]]:
    """Messages in AppendMessages' batches."""
    return [messages[i : i + APPEND_BATCH] for i in range(0, len(messages), APPEND_BATCH)]


def _bound(stubs: md.Stubs | md.SyncStubs, call: Call) -> Any:
    service, method, request = call
    return functools.partial(getattr(getattr(stubs, service), method), request)


def _oldest_first(pages: list[Sequence[md.Message]], limit: int | None) -> list[md.Message]:
    # Pages come newest first, each oldest first.
    messages = [message for page in reversed(pages) for message in page]
    return messages[-limit:] if limit is not None else messages


def _text_members(value: Any, path: Path) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    if isinstance(value, dict):
        for key, member in value.items():
            if isinstance(member, str) and key in TEXT_MEMBERS:
                found.append((member, [*path, key]))
            else:
                found += _text_members(member, [*path, key])
    elif isinstance(value, list):
        for index, member in enumerate(value):
            found += _text_members(member, [*path, index])
    return found


def _set(item: Any, path: Path, value: Any) -> bool:
    """Set the member at `path`; False when the path leads to no object or array member."""
    try:
        target = item
        for step in path[:-1]:
            target = target[step]
        if isinstance(target, dict) and isinstance(path[-1], str):
            target[path[-1]] = value
            return True
        if isinstance(target, list) and isinstance(path[-1], int):
            target[path[-1]] = value
            return True
    except (LookupError, TypeError):
        pass
    return False
