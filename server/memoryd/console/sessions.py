"""The console's sign-in sessions: a random id in an HttpOnly cookie, held here with the token
it signed in with and the CSRF token every request of the session must carry.

Sessions live in the server's memory only: a restart signs everyone out, and no token is ever
written anywhere. A session ends after `idle` without a request, at sign-out, or when its token
opens one more than MAX_SESSIONS_PER_TOKEN: then that token's least recently used session goes.
One token's sign-ins never end another token's sessions, and since only a valid token opens
one, the store holds at most that many per configured token.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict

MAX_SESSIONS_PER_TOKEN = 32


@dataclasses.dataclass(slots=True)
class Session:
    """One signed-in browser: the bearer token its calls carry (empty when the server has no
    tokens), its CSRF token, and when it was last used (monotonic seconds)."""

    token: str
    csrf: str
    used_at: float


class SessionStore:
    """The open sessions, by the SHA-256 of their cookie value (the value itself is not kept:
    a memory dump does not yield a usable cookie), grouped by their token's SHA-256."""

    def __init__(self, idle_seconds: float, per_token: int = MAX_SESSIONS_PER_TOKEN) -> None:
        self._idle = idle_seconds
        self._per_token = per_token
        self._sessions: dict[bytes, Session] = {}
        # Each token's sessions, least recently used first.
        self._by_token: dict[bytes, OrderedDict[bytes, None]] = {}

    def open(self, token: str) -> tuple[str, Session]:
        """A new session for `token`: its cookie value and the session. The token's least
        recently used session ends when it has too many."""
        cookie = secrets.token_urlsafe(32)
        now = time.monotonic()
        session = Session(token=token, csrf=secrets.token_urlsafe(32), used_at=now)
        owned = self._by_token.setdefault(_key(token), OrderedDict())
        for key in [key for key in owned if now - self._sessions[key].used_at > self._idle]:
            self._forget(key)
        while len(owned) >= self._per_token:
            self._forget(next(iter(owned)))
        key = _key(cookie)
        self._sessions[key] = session
        self._by_token.setdefault(_key(token), OrderedDict())[key] = None
        return cookie, session

    def find(self, cookie: str) -> Session | None:
        """The live session of a cookie value (and it is used now), or None."""
        key = _key(cookie)
        session = self._sessions.get(key)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.used_at > self._idle:
            self._forget(key)
            return None
        session.used_at = now
        self._by_token[_key(session.token)].move_to_end(key)
        return session

    def close(self, cookie: str) -> None:
        """End the session of a cookie value (nothing if there is none)."""
        key = _key(cookie)
        if key in self._sessions:
            self._forget(key)

    def __len__(self) -> int:
        return len(self._sessions)

    def _forget(self, key: bytes) -> None:
        session = self._sessions.pop(key)
        token = _key(session.token)
        owned = self._by_token[token]
        del owned[key]
        if not owned:
            del self._by_token[token]


def csrf_matches(session: Session, presented: str) -> bool:
    """Whether a request's CSRF header is its session's, compared in constant time."""
    return hmac.compare_digest(session.csrf.encode(), presented.encode("utf-8", "replace"))


def _key(cookie: str) -> bytes:
    return hashlib.sha256(cookie.encode("utf-8", "replace")).digest()
