"""The console's sign-in sessions: a random id in an HttpOnly cookie, held here with the token
it signed in with and the CSRF token every request of the session must carry.

Sessions live in the server's memory only: a restart signs everyone out, and no token is ever
written anywhere. A session ends after `idle` without a request, at sign-out, or when the
store is full and it is the least recently used (at most MAX_SESSIONS).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict

MAX_SESSIONS = 1000


@dataclasses.dataclass(slots=True)
class Session:
    """One signed-in browser: the bearer token its calls carry (empty when the server has no
    tokens), its CSRF token, and when it was last used (monotonic seconds)."""

    token: str
    csrf: str
    used_at: float


class SessionStore:
    """The open sessions, by the SHA-256 of their cookie value (the value itself is not kept:
    a memory dump does not yield a usable cookie)."""

    def __init__(self, idle_seconds: float) -> None:
        self._idle = idle_seconds
        self._sessions: OrderedDict[bytes, Session] = OrderedDict()

    def open(self, token: str) -> tuple[str, Session]:
        """A new session for `token`: its cookie value and the session."""
        cookie = secrets.token_urlsafe(32)
        session = Session(token=token, csrf=secrets.token_urlsafe(32), used_at=time.monotonic())
        self._sessions[_key(cookie)] = session
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return cookie, session

    def find(self, cookie: str) -> Session | None:
        """The live session of a cookie value (and it is used now), or None."""
        key = _key(cookie)
        session = self._sessions.get(key)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.used_at > self._idle:
            del self._sessions[key]
            return None
        session.used_at = now
        self._sessions.move_to_end(key)
        return session

    def close(self, cookie: str) -> None:
        """End the session of a cookie value (nothing if there is none)."""
        self._sessions.pop(_key(cookie), None)


def csrf_matches(session: Session, presented: str) -> bool:
    """Whether a request's CSRF header is its session's, compared in constant time."""
    return hmac.compare_digest(session.csrf.encode(), presented.encode("utf-8", "replace"))


def _key(cookie: str) -> bytes:
    return hashlib.sha256(cookie.encode("utf-8", "replace")).digest()
