"""Which requests an HTTP listener answers: those addressed to one of its own names (`Host`),
and, from a browser on another origin, only those of an origin it was told to allow (`Origin`).

DNS rebinding is why the name matters. A page on attacker.example makes its own name resolve to
127.0.0.1; the victim's browser then sends the page's requests to memoryd as same-origin
requests, so CORS never applies, and the page reads the answers. What still gives the page away
is the Host header, which names attacker.example. So, as Jupyter (`local_hostnames`), Vite
(`server.allowedHosts`) and the MCP specification ask of local servers, a request whose Host is
not one of the listener's names is refused with 421 Misdirected Request before any application
sees it. A listener's names are the host of its listen address, `localhost`, `127.0.0.1` and
`[::1]` when that is a loopback address, any IP address when it is a wildcard (0.0.0.0, ::), and
the names an operator adds (a reverse proxy's, a DNS name): a name cannot be rebound to an
address literal, so IP literals are safe wherever they reach this listener.

A browser says where a cross-origin request comes from (`Origin`): one whose origin is neither
the listener's own (scheme and Host) nor one of the allowed origins (CORS) is refused with 403,
before it runs, whatever it asks for. Clients that are not browsers send no Origin.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("", "0.0.0.0", "::")  # noqa: S104 - names of the wildcard address, not a bind
# How much of a refused name a message quotes.
QUOTED_CHARS = 64


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def normalized(name: str) -> str:
    """A host name as compared: lower case, without brackets or one trailing dot, and an IP
    address in its canonical form."""
    name = name.strip().lower().removeprefix("[").removesuffix("]").removesuffix(".")
    address = _address(name)
    return str(address) if address is not None else name


def host_of(header: str) -> str:
    """The name part of a Host header (`name`, `name:port`, `[v6]:port`), normalized."""
    header = header.strip()
    if header.startswith("["):
        return normalized(header[1:].partition("]")[0])
    if header.count(":") == 1:
        header = header.partition(":")[0]
    return normalized(header)


def _quoted(text: str) -> str:
    return repr(text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + "...")


@dataclasses.dataclass(frozen=True, slots=True)
class HostPolicy:
    """The names a listener answers to, and the origins whose browser requests it runs."""

    names: frozenset[str]
    # Allowed names given with a leading dot (".example.com"): that name and every name below.
    suffixes: tuple[str, ...]
    # A wildcard listen address: any IP address is this listener's.
    any_address: bool
    origins: frozenset[str]
    # The setting (or flag) that adds names, for the refusal's message.
    setting: str

    @classmethod
    def of_listener(
        cls,
        listen: str,
        allowed: Iterable[str] = (),
        origins: Iterable[str] = (),
        *,
        setting: str,
    ) -> HostPolicy:
        """The policy of a listener on `listen` (HOST:PORT), with the names `allowed` adds
        (".example.com" for every name under example.com) and the CORS `origins`."""
        host = normalized(listen.rpartition(":")[0])
        names = {host}
        address = _address(host)
        if host == "localhost" or (address is not None and address.is_loopback):
            names |= set(LOOPBACK_NAMES)
        extra = [item.strip().lower() for item in allowed if item.strip()]
        names |= {normalized(item) for item in extra if not item.startswith(".")}
        return cls(
            names=frozenset(names - {""}),
            suffixes=tuple(item.removesuffix(".") for item in extra if item.startswith(".")),
            any_address=host in WILDCARDS,
            origins=frozenset(_origin(origin) for origin in origins),
            setting=setting,
        )

    def answers(self, name: str) -> bool:
        """Whether a normalized host name is one of this listener's."""
        if name in self.names or name.endswith(self.suffixes) or f".{name}" in self.suffixes:
            return True
        return self.any_address and _address(name) is not None

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(HTTP status, one-line reason) for a request this listener does not answer, or
        None."""
        headers = _headers(scope)
        host = headers.get("host")
        if host is None:
            return 421, "memoryd: the request has no Host header; send the name you reached it by"
        if not self.answers(host_of(host)):
            return 421, (
                f"memoryd: Host {_quoted(host)} is not a name this server answers to (a page "
                f"that rebound its name to this address?); if a proxy or DNS name reaches it "
                f"that way, add the name to {self.setting}"
            )
        origin = headers.get("origin")
        if origin is None:
            return None
        scheme = "https" if scope.get("scheme") == "https" else "http"
        given = _origin(origin)
        if given == _origin(f"{scheme}://{host.strip()}") or given in self.origins:
            return None
        return 403, (
            f"memoryd: requests from the web origin {_quoted(origin)} are not allowed (only "
            "this server's own pages, and the origins of memoryd.http.cors_origins)"
        )


def _origin(text: str) -> str:
    """An origin as compared: lower case, no trailing slash, no default port."""
    text = text.strip().rstrip("/").lower()
    for scheme, port in (("http://", ":80"), ("https://", ":443")):
        if text.startswith(scheme) and text.endswith(port):
            return text.removesuffix(port)
    return text


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name; a repeated Host or Origin keeps its first."""
    found: dict[str, str] = {}
    for name, value in scope.get("headers") or ():
        found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return found


class HostGuard:
    """An ASGI application that answers only what its policy admits, then `inner`."""

    def __init__(self, inner: Asgi, policy: HostPolicy) -> None:
        self._inner = inner
        self._policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            refused = self._policy.refusal(scope)
            if refused is not None:
                status, message = refused
                body = message.encode("utf-8") + b"\n"
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"),
                            (b"cache-control", b"no-store"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self._inner(scope, receive, send)
