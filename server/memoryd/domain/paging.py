"""Page tokens for walking a conversation's messages backwards in time.

A token pins the walk: it carries the id to continue below and the floor the first page computed
(the window start, or 0 for all history), so a /new in the middle of a walk does not shift the
pages under the client. A fingerprint of the request binds the token to the conversation and
filters it was issued for. Tokens are opaque to clients but not secret: forging one can only
show messages of the conversation the client already named, which all_history shows anyway.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
from typing import TypeGuard

from memoryd.domain.conversation import ConversationKey
from memoryd.errors import InvalidArgument

TOKEN_VERSION = 1
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class PageCursor:
    """Where the next page starts: ids strictly between floor and before."""

    before_id: int
    floor_id: int


def page_size(requested: int, field: str = "page_size") -> int:
    """The page size to use: 0 means the default; negative or too large is refused."""
    if requested < 0:
        raise InvalidArgument(f"{field} must not be negative, got {requested}")
    if requested > MAX_PAGE_SIZE:
        raise InvalidArgument(f"{field} is {requested}; the limit is {MAX_PAGE_SIZE}")
    return requested or DEFAULT_PAGE_SIZE


def fingerprint(key: ConversationKey, kinds: tuple[str, ...], *, all_history: bool) -> str:
    """What a token is bound to: the conversation, the kind filter and the history mode."""
    material = json.dumps([key.as_row(), sorted(kinds), all_history]).encode("utf-8")
    return hashlib.blake2b(material, digest_size=8).hexdigest()


def encode_token(cursor: PageCursor, bound_to: str) -> str:
    """The opaque next_page_token."""
    payload = json.dumps(
        {"v": TOKEN_VERSION, "b": cursor.before_id, "f": cursor.floor_id, "h": bound_to},
        separators=(",", ":"),
    ).encode("ascii")
    return base64.urlsafe_b64encode(payload).decode("ascii").rstrip("=")


def decode_token(token: str, bound_to: str, field: str = "page_token") -> PageCursor:
    """Read a token from a client; anything malformed or foreign is INVALID_ARGUMENT."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        payload = json.loads(raw)
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"{field} is malformed") from None
    if not isinstance(payload, dict) or payload.get("v") != TOKEN_VERSION:
        raise InvalidArgument(f"{field} is malformed")
    before, floor, bound = payload.get("b"), payload.get("f"), payload.get("h")
    if not (_is_id(before) and _is_id(floor) and isinstance(bound, str)):
        raise InvalidArgument(f"{field} is malformed")
    if bound != bound_to:
        raise InvalidArgument(
            f"{field} was issued for a different conversation, kind filter or history mode"
        )
    return PageCursor(before_id=before, floor_id=floor)


def _is_id(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def memory_fingerprint(material: str) -> str:
    """What a ListMemories token is bound to: the caller and every filter."""
    return hashlib.blake2b(material.encode("utf-8"), digest_size=8).hexdigest()


def encode_memory_token(after: tuple[str, int], bound_to: str) -> str:
    """The opaque next_page_token of a listing: the last row's (updated_at, id)."""
    payload = json.dumps(
        {"v": TOKEN_VERSION, "u": after[0], "i": after[1], "h": bound_to}, separators=(",", ":")
    ).encode("utf-8")
    return base64.urlsafe_b64encode(payload).decode("ascii").rstrip("=")


def decode_memory_token(token: str, bound_to: str, field: str = "page_token") -> tuple[str, int]:
    """Read a listing token; anything malformed or issued for another request is refused."""
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"{field} is malformed") from None
    if not isinstance(payload, dict) or payload.get("v") != TOKEN_VERSION:
        raise InvalidArgument(f"{field} is malformed")
    updated, last_id, bound = payload.get("u"), payload.get("i"), payload.get("h")
    if not (isinstance(updated, str) and _is_id(last_id) and isinstance(bound, str)):
        raise InvalidArgument(f"{field} is malformed")
    if bound != bound_to:
        raise InvalidArgument(f"{field} was issued for a different caller or filter")
    return updated, last_id
