"""The web console at /console, in front of the HTTP/JSON API on the same port.

The console is a static page and a script (memoryd/console/assets: no build step, no third-party
code) that calls the public API, the Connect procedures memoryd.api.connect_http serves, with
the rights of the token its user signed in with. This application serves the page and its
assets, and the session:

- `POST /console/session` with `{"token": ...}` signs in: the token is checked as every call's
  is (memoryd.api.auth), and a session is opened (memoryd.console.sessions). The answer sets the
  cookie `memoryd_console` (HttpOnly, SameSite=Strict, Path=/, Secure when TLS is on) and
  carries the session's CSRF token and what the token may do (role, agents, max_trust).
- `GET /console/session` answers the same for the cookie's session (the page reloaded) when
  the request carries its CSRF token too, which the page's tab keeps (sessionStorage, this
  origin's alone): a browser sends the cookie to every port of the host, and a server on
  another port must not learn the session from it. `DELETE /console/session` signs out.
- A request to the API with the cookie and no `Authorization` header is a console call: it
  must carry the session's CSRF token in `X-Memoryd-Csrf` (403 otherwise), and it goes on with
  the session's token as its bearer token, so the API's authentication, access rules and
  guest limits apply to it unchanged. Requests with a bearer token are untouched.
- Every state-changing request of the session, and sign-in itself, must come from the page's
  own origin (`Origin` and `Sec-Fetch-Site`, where the browser sends them).

The page's Content-Security-Policy allows its own script and style only: user text is put in
the page as text, never as markup (assets/console.js), and no inline script can run.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from http.cookies import CookieError, SimpleCookie
from importlib import resources
from typing import Any

from memoryd import __version__
from memoryd.api.auth import Authorizer
from memoryd.config import TokenSettings
from memoryd.console.sessions import Session, SessionStore, csrf_matches
from memoryd.errors import Unauthenticated
from memoryd.log_events import Event
from memoryd.web.body import Disconnected, read_body

log = logging.getLogger("memoryd.console")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

PREFIX = "/console"
COOKIE = "memoryd_console"
CSRF_HEADER = "x-memoryd-csrf"
MAX_SIGN_IN_BYTES = 8192
SESSION_ENDED = (
    "the console session has ended (signed out, idle too long, or the server restarted): sign "
    "in again"
)
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_PAGE_HEADERS = [
    (b"content-security-policy", _POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class _Asset:
    """One shipped file, with its content type and ETag."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.body = body
        self.content_type = content_type
        self.etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _assets() -> dict[str, _Asset]:
    folder = resources.files("memoryd.console") / "assets"
    found = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rpartition(".")[2]
        if item.is_file() and suffix in _TYPES:
            found[item.name] = _Asset(item.read_bytes(), _TYPES[suffix])
    return found


class ConsoleApp:
    """Serves /console and its session; every other path goes to `inner` (the API), a
    console's call with the session's token."""

    def __init__(
        self, inner: Asgi, guard: Authorizer | None, *, secure: bool, idle_seconds: float
    ) -> None:
        self._inner = inner
        self._guard = guard
        self._secure = secure
        self._sessions = SessionStore(idle_seconds)
        self._assets = _assets()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._inner(scope, receive, send)
            return
        path = scope.get("path", "")
        headers = _headers(scope)
        if path == PREFIX or path.startswith(PREFIX + "/"):
            await self._console(scope, headers, receive, send)
            return
        cookie = _cookie(headers)
        if cookie is None or "authorization" in headers:
            await self._inner(scope, receive, send)
            return
        session = self._live(cookie)
        if session is None:
            await _json(send, 401, {"code": "unauthenticated", "message": SESSION_ENDED})
            return
        refusal = self._refusal(scope, headers, session)
        if refusal is not None:
            await _json(send, 403, {"code": "permission_denied", "message": refusal})
            return
        if session.token:
            scope = dict(scope)
            scope["headers"] = [
                *(item for item in scope.get("headers", ()) if item[0].lower() != b"cookie"),
                (b"authorization", b"Bearer " + session.token.encode()),
            ]
        await self._inner(scope, receive, send)

    def _live(self, cookie: str) -> Session | None:
        """The cookie's session while its token is still one the server answers to (a reload
        may have withdrawn it: memoryd.serving.token_reloads); else it ends."""
        session = self._sessions.find(cookie)
        if session is None or self._guard is None:
            return session
        try:
            self._guard.caller([("authorization", f"Bearer {session.token}")])
        except Unauthenticated:
            self._sessions.close(cookie)
            return None
        return session

    @staticmethod
    def _refusal(scope: Scope, headers: dict[str, str], session: Session) -> str | None:
        """Why a console call of a live session is refused (PERMISSION_DENIED), or None."""
        if not _same_origin(scope, headers):
            return "a console call must come from the console's page"
        if not csrf_matches(session, headers.get(CSRF_HEADER, "")):
            return f"a console call must carry the session's CSRF token ({CSRF_HEADER})"
        return None

    async def _console(
        self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send
    ) -> None:
        path, method = scope["path"], scope["method"]
        if path == PREFIX:
            await _answer(send, 308, b"", "text/plain", [(b"location", b"/console/")])
            return
        if path == PREFIX + "/session":
            await self._session(scope, headers, receive, send)
            return
        name = ""
        if path == PREFIX + "/":
            name = "index.html"
        elif path.startswith(PREFIX + "/assets/") and not path.endswith("/index.html"):
            name = path.removeprefix(PREFIX + "/assets/")
        asset = self._assets.get(name)
        if asset is None:
            await _answer(send, 404, b"not found\n", "text/plain")
            return
        if method not in ("GET", "HEAD"):
            await _answer(send, 405, b"GET only\n", "text/plain", [(b"allow", b"GET, HEAD")])
            return
        extra = [(b"etag", asset.etag.encode()), (b"cache-control", b"no-cache")]
        if name == "index.html":
            extra = [*_PAGE_HEADERS, (b"cache-control", b"no-store")]
        elif headers.get("if-none-match") == asset.etag:
            await _answer(send, 304, b"", asset.content_type, extra)
            return
        body = b"" if method == "HEAD" else asset.body
        await _answer(
            send, 200, body, asset.content_type, [*extra, (b"x-content-type-options", b"nosniff")]
        )

    async def _session(
        self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send
    ) -> None:
        method = scope["method"]
        cookie = _cookie(headers)
        if method == "GET":
            session = self._live(cookie) if cookie else None
            # The cookie alone describes nothing: a browser sends it to every port of the host,
            # so a server on another port has it. The page's tab keeps the CSRF token it was
            # given at sign-in, and only a request carrying it learns the session.
            if session is None or not csrf_matches(session, headers.get(CSRF_HEADER, "")):
                await _json(send, 401, {"code": "unauthenticated", "message": "not signed in"})
                return
            await _json(send, 200, self._described(session))
            return
        if not _same_origin(scope, headers):
            await _json(
                send,
                403,
                {"code": "permission_denied", "message": "sign in from the console's page"},
            )
            return
        if method == "DELETE":
            session = self._live(cookie) if cookie else None
            if session is not None and csrf_matches(session, headers.get(CSRF_HEADER, "")):
                self._sessions.close(cookie or "")
            await _json(send, 200, {}, [(b"set-cookie", self._cookie_header("", 0))])
            return
        if method != "POST":
            await _json(send, 405, {"code": "unimplemented", "message": "GET, POST or DELETE"})
            return
        await self._sign_in(headers, receive, send)

    async def _sign_in(self, headers: dict[str, str], receive: Receive, send: Send) -> None:
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            await _json(
                send, 415, {"code": "invalid_argument", "message": 'send JSON: {"token": ...}'}
            )
            return
        try:
            body = await read_body(receive, MAX_SIGN_IN_BYTES)
        except Disconnected:
            return
        token = None
        try:
            found = json.loads(body) if body is not None else None
            token = found.get("token") if isinstance(found, dict) else None
        except (ValueError, UnicodeDecodeError):
            token = None
        if not isinstance(token, str):
            await _json(
                send,
                400,
                {"code": "invalid_argument", "message": 'send {"token": "<your token>"}'},
            )
            return
        token = token.strip()
        if self._guard is not None:
            try:
                self._guard.caller([("authorization", f"Bearer {token}")])
            except Unauthenticated as error:
                await _json(send, 401, {"code": "unauthenticated", "message": error.message})
                return
        else:
            token = ""  # the server has no tokens: every call is admitted
        cookie, session = self._sessions.open(token)
        log.info("console: signed in", extra={"event": Event.CONSOLE_SIGN_IN})
        await _json(
            send,
            200,
            self._described(session),
            [(b"set-cookie", self._cookie_header(cookie, None))],
        )

    def _described(self, session: Session) -> dict[str, Any]:
        """What the page needs to know of its session."""
        caller: TokenSettings | None = None
        if self._guard is not None:
            caller = self._guard.caller([("authorization", f"Bearer {session.token}")])
        return {
            "csrf": session.csrf,
            "version": __version__,
            "tokens": self._guard is not None,
            "fingerprint": caller.fingerprint if caller else "",
            "role": caller.role if caller else "admin",
            "agents": sorted(caller.agents) if caller and caller.agents is not None else None,
            "max_trust": (caller.max_trust if caller else None) or "operator",
        }

    def _cookie_header(self, value: str, max_age: int | None) -> bytes:
        parts = [f"{COOKIE}={value}", "Path=/", "HttpOnly", "SameSite=Strict"]
        if max_age is not None:
            parts.append(f"Max-Age={max_age}")
        if self._secure:
            parts.append("Secure")
        return "; ".join(parts).encode()


def _headers(scope: Scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in scope.get("headers") or ():
        found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return found


def _cookie(headers: dict[str, str]) -> str | None:
    """The console's cookie value, if the request carries one."""
    text = headers.get("cookie")
    if not text:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(text)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None and morsel.value else None


def _same_origin(scope: Scope, headers: dict[str, str]) -> bool:
    """Whether a request is not from another site, by what the browser says of it."""
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None:
        return True
    scheme = "https" if scope.get("scheme") == "https" else "http"
    return origin == f"{scheme}://{headers.get('host', '')}"


async def _json(
    send: Send, status: int, payload: dict[str, Any], extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(payload).encode()
    await _answer(send, status, body, "application/json", [*extra, (b"cache-control", b"no-store")])


async def _answer(
    send: Send,
    status: int,
    body: bytes,
    content_type: str,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
