"""Console sessions are kept per token: however often one token signs in (a guest-capped one,
say), it ends only its own least recently used sessions, never another token's."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest

from memoryd.api import contract
from memoryd.console.sessions import MAX_SESSIONS_PER_TOKEN, SessionStore
from memoryd.testing.server_process import ServerProcess

ADMIN = "sessions-admin-token-0123456789abcdef"
GUEST = "sessions-guest-token-0123456789abcdef"
CONFIG = f"""
[memoryd.http]
listen = "127.0.0.1:0"

[[memoryd.auth.tokens]]
token = "{ADMIN}"
role = "admin"
agents = ["*"]

[[memoryd.auth.tokens]]
token = "{GUEST}"
role = "adapter"
agents = ["main"]
max_trust = "guest"
"""


class Console:
    """Sign-ins and session checks over one kept-alive HTTP connection."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self._connection = http.client.HTTPConnection(host, int(port), timeout=30)
        self._origin = f"http://{address}"

    def sign_in(self, token: str) -> tuple[str, str]:
        """A session: its cookie and its CSRF token."""
        self._connection.request(
            "POST",
            "/console/session",
            body=json.dumps({"token": token}),
            headers={"content-type": "application/json", "origin": self._origin},
        )
        response = self._connection.getresponse()
        answer = json.loads(response.read())
        assert response.status == 200
        return str(response.headers["set-cookie"]).split(";")[0], answer["csrf"]

    def described(self, cookie: str, csrf: str = "") -> dict[str, Any] | None:
        """GET /console/session with the cookie (and the CSRF token): the session, or None."""
        headers = {"cookie": cookie} | ({"x-memoryd-csrf": csrf} if csrf else {})
        self._connection.request("GET", "/console/session", headers=headers)
        response = self._connection.getresponse()
        answer = json.loads(response.read())
        assert response.status in (200, 401)
        return answer if response.status == 200 else None

    def signed_in(self, session: tuple[str, str]) -> bool:
        return self.described(*session) is not None


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    server = ServerProcess(tmp_path_factory.mktemp("sessions") / "home", config=CONFIG).start()
    yield Console(str(server.events("serving")[-1]["http"]))
    assert server.stop() == 0, server.output


def test_a_thousand_sign_ins_of_one_token_sign_no_other_token_out(console: Console) -> None:
    admin = console.sign_in(ADMIN)
    guests = [console.sign_in(GUEST) for _ in range(1001)]
    assert console.signed_in(admin)
    # The guest token keeps its most recent sessions only.
    assert sum(console.signed_in(cookie) for cookie in guests) == MAX_SESSIONS_PER_TOKEN
    assert console.signed_in(guests[-1])
    assert not console.signed_in(guests[0])


def test_the_cookie_alone_learns_nothing_of_its_session(console: Console) -> None:
    # A browser sends the cookie to every port of the host: a server on another port has it,
    # and must not get the CSRF token (and with it the session) from the cookie alone.
    cookie, csrf = console.sign_in(ADMIN)
    assert console.described(cookie) is None
    assert console.described(cookie, "forged-" + csrf) is None
    described = console.described(cookie, csrf)
    assert described is not None
    assert described["csrf"] == csrf


def test_a_tokens_least_recently_used_session_goes_first() -> None:
    store = SessionStore(idle_seconds=3600, per_token=3)
    first, _ = store.open("a")
    second, _ = store.open("a")
    other, _ = store.open("b")
    store.open("a")
    assert store.find(first) is not None  # used now: the second is the least recent
    store.open("a")
    assert store.find(second) is None
    assert store.find(first) is not None
    assert store.find(other) is not None
    assert len(store) == 4
    store.close(first)
    assert store.find(first) is None
    assert len(store) == 3


def test_the_consoles_service_table_is_the_contracts() -> None:
    """console.js calls each RPC at its memoryd.v2 service: its table is the contract's."""
    script = (resources.files("memoryd.console") / "assets" / "console.js").read_text()
    table = script.split("const SERVICE_OF = {", 1)[1].split("};", 1)[0]
    found = {
        method: service
        for service, methods in re.findall(r'byName\("([\w.]+)", ([^)]*)\)', table)
        for method in re.findall(r'"(\w+)"', methods)
    }
    assert found == {
        method.name: method.containing_service.full_name for method in contract.methods()
    }
