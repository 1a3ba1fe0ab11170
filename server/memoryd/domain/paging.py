"""Page tokens: where the next page of a listing starts, signed so no client can forge one.

A token carries a listing's cursor (for messages: the id to continue below and the floor the
first page computed, so a /new in the middle of a walk does not shift the pages) and a
fingerprint of the request it was issued for (conversation or caller, filters). It is
`base64url(payload) "." base64url(mac)`, the MAC an HMAC-SHA256 over the listing's kind and the
payload with the database's own key (table server_keys, made at its creation). Any token that
was not issued by this database for this kind of listing is refused before its payload is read,
so a forged token can never reach the JSON parser or SQL (nested JSON, lone surrogates, huge
numbers): INVALID_ARGUMENT, whatever its content.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import hashlib
import hmac
import json
from typing import Any, TypeGuard

from memoryd.domain.conversation import ConversationKey
from memoryd.errors import InvalidArgument, Reason

TOKEN_VERSION = 2  # 1 was unsigned
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class PageCursor:
    """Where the next page starts: ids strictly between floor and before."""

    before_id: int
    floor_id: int


def page_size(
    requested: int,
    field: str = "page_size",
    *,
    default: int = DEFAULT_PAGE_SIZE,
    maximum: int = MAX_PAGE_SIZE,
) -> int:
    """The page size to use: 0 means the default; negative or too large is refused."""
    if requested < 0:
        raise InvalidArgument(
            f"{field} must not be negative, got {requested}",
            reason=Reason.OUT_OF_RANGE,
            field=field,
        )
    if requested > maximum:
        raise InvalidArgument(
            f"{field} is {requested}; the limit is {maximum}",
            reason=Reason.OUT_OF_RANGE,
            field=field,
        )
    return requested or default


MAX_TOKEN_CHARS = 1024
MAC_BYTES = 16


class TokenKind(enum.StrEnum):
    """The listings that hand out tokens; a token of one kind is never read as another."""

    MESSAGES = "messages"
    MEMORIES = "memories"
    SOURCES = "sources"
    RESOURCES = "resources"
    REVISIONS = "revisions"
    OWNERS = "owners"
    REVIEW_RUNS = "review_runs"
    CONVERSATIONS = "conversations"


class PageTokens:
    """Issues and reads signed page tokens with one secret key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:  # pragma: no cover - the migration makes a 32-byte key
            message = "the page token key must be at least 16 bytes"
            raise ValueError(message)
        self._key = key

    def issue(self, kind: TokenKind, payload: dict[str, Any]) -> str:
        """The opaque token for `payload`."""
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=True).encode("ascii")
        return f"{_b64(body)}.{_b64(self._mac(kind, body))}"

    def read(self, kind: TokenKind, token: str, field: str) -> dict[str, Any]:
        """The payload of a token this key issued for `kind`; anything else is refused."""
        body_text, dot, mac_text = token.partition(".")
        if len(token) > MAX_TOKEN_CHARS or not dot:
            raise InvalidArgument(
                f"{field} is malformed", reason=Reason.INVALID_PAGE_TOKEN, field=field
            )
        try:
            body = _unb64(body_text)
            mac = _unb64(mac_text)
        except (binascii.Error, ValueError):
            raise InvalidArgument(
                f"{field} is malformed", reason=Reason.INVALID_PAGE_TOKEN, field=field
            ) from None
        if not hmac.compare_digest(mac, self._mac(kind, body)):
            raise InvalidArgument(
                f"{field} was not issued by this server for this listing (altered, or from "
                "another database); list again without a token",
                reason=Reason.INVALID_PAGE_TOKEN,
                field=field,
            )
        payload: dict[str, Any] = json.loads(body)  # ours: signed above
        if payload.get("v") != TOKEN_VERSION:
            raise InvalidArgument(
                f"{field} is from another version of memoryd; list again",
                reason=Reason.INVALID_PAGE_TOKEN,
                field=field,
            )
        return payload

    def _mac(self, kind: TokenKind, body: bytes) -> bytes:
        material = kind.encode("ascii") + b"\n" + body
        return hmac.new(self._key, material, hashlib.sha256).digest()[:MAC_BYTES]

    # --- ListMessages and ListMemories ------------------------------------------------------

    def messages_token(self, cursor: PageCursor, bound_to: str) -> str:
        """ListMessages' next_page_token."""
        return self.issue(
            TokenKind.MESSAGES,
            {"v": TOKEN_VERSION, "b": cursor.before_id, "f": cursor.floor_id, "h": bound_to},
        )

    def messages_cursor(self, token: str, bound_to: str, field: str = "page_token") -> PageCursor:
        """Where a ListMessages page_token continues."""
        payload = self.read(TokenKind.MESSAGES, token, field)
        before, floor = payload.get("b"), payload.get("f")
        if not (_is_id(before) and _is_id(floor)):  # pragma: no cover - we signed it
            raise InvalidArgument(
                f"{field} is malformed", reason=Reason.INVALID_PAGE_TOKEN, field=field
            )
        if payload.get("h") != bound_to:
            raise InvalidArgument(
                f"{field} was issued for a different conversation, kind filter or history mode",
                reason=Reason.INVALID_PAGE_TOKEN,
                field=field,
            )
        return PageCursor(before_id=before, floor_id=floor)

    def memories_token(self, after: tuple[str, int], bound_to: str) -> str:
        """ListMemories' next_page_token: the last row's (updated_at, id)."""
        return self.issue(
            TokenKind.MEMORIES, {"v": TOKEN_VERSION, "u": after[0], "i": after[1], "h": bound_to}
        )

    def memories_cursor(
        self, token: str, bound_to: str, field: str = "page_token"
    ) -> tuple[str, int]:
        """Where a ListMemories page_token continues."""
        payload = self.read(TokenKind.MEMORIES, token, field)
        updated, last_id = payload.get("u"), payload.get("i")
        if not (isinstance(updated, str) and _is_id(last_id)):  # pragma: no cover - signed
            raise InvalidArgument(
                f"{field} is malformed", reason=Reason.INVALID_PAGE_TOKEN, field=field
            )
        if payload.get("h") != bound_to:
            raise InvalidArgument(
                f"{field} was issued for a different caller or filter",
                reason=Reason.INVALID_PAGE_TOKEN,
                field=field,
            )
        return updated, last_id

    # --- listings ordered by a few columns ------------------------------------------------------

    def position_token(self, kind: TokenKind, position: tuple[str, ...], bound_to: str) -> str:
        """A next_page_token holding the last item's ordering columns."""
        return self.issue(kind, {"v": TOKEN_VERSION, "p": list(position), "h": bound_to})

    def position(
        self, kind: TokenKind, token: str, bound_to: str, field: str = "page_token"
    ) -> tuple[str, ...]:
        """The ordering columns a position token continues after."""
        payload = self.read(kind, token, field)
        if payload.get("h") != bound_to:
            raise InvalidArgument(
                f"{field} was issued for a different request",
                reason=Reason.INVALID_PAGE_TOKEN,
                field=field,
            )
        return tuple(str(part) for part in payload.get("p", ()))


def fingerprint(key: ConversationKey, kinds: tuple[str, ...], *, all_history: bool) -> str:
    """What a ListMessages token is bound to: the conversation, kinds and history mode."""
    return request_fingerprint(json.dumps([key.as_row(), sorted(kinds), all_history]))


def request_fingerprint(material: str) -> str:
    """What a token is bound to, from a text naming the request."""
    return hashlib.blake2b(material.encode("utf-8"), digest_size=8).hexdigest()


def _is_id(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    """The bytes of unpadded URL-safe base64, in its one canonical spelling: a token whose
    unused trailing bits were changed decodes to the same bytes, and is refused all the same."""
    if not text.isascii():
        raise ValueError(text)
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError(text)
    return data
