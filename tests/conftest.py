"""Shared fixtures: one real memoryd server for the session, its generated client, fresh ids;
and the `slow` marker, set on every test that starts its own server or a subprocess."""

from __future__ import annotations

import inspect
import os
import shutil
import types
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import memoryd_client as md
from memoryd.testing import exercised
from memoryd.testing.postgres import TEST_POSTGRES, TemporaryPostgres
from memoryd.testing.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
# The fake model server and review-configured servers (fixtures `model`, `reviewing`).
pytest_plugins = ["tests.review_helpers"]


# --- the slow marker ---------------------------------------------------------------------------
# A test is slow when it, or a fixture it uses, starts its own server or a subprocess: found by
# following the names their code uses through the helpers of this test package, down to one of
# LAUNCHERS. The one shared server (SHARED) does not count.
SLOW_FIXTURES = frozenset({"start_server", "grpcurl", "postgres_base"})
SHARED = frozenset({"server", "channel", "memory"})
# StdioServerParameters: the MCP SDK's client starts the server it names as a subprocess.
LAUNCHERS = frozenset(
    {"subprocess", "ServerProcess", "pty", "start_server", "StdioServerParameters"}
)


def _names(code: types.CodeType) -> set[str]:
    """The global and attribute names a code object and its nested functions use."""
    found = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            found |= _names(constant)
    return found


def launches(target: object, seen: set[int] | None = None) -> bool:
    """Whether calling `target` (a test, or a helper of this package) may start a process."""
    seen = set() if seen is None else seen
    if id(target) in seen:
        return False
    seen.add(id(target))
    if inspect.isclass(target):
        return any(
            launches(member, seen) for member in vars(target).values() if inspect.isfunction(member)
        )
    function = inspect.unwrap(target)  # type: ignore[arg-type]
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    names = _names(code)
    if names & LAUNCHERS:
        return True
    namespace = getattr(function, "__globals__", {})
    helpers = (namespace.get(name) for name in names)
    return any(
        launches(helper, seen)
        for helper in helpers
        if (inspect.isfunction(helper) or inspect.isclass(helper))
        and (getattr(helper, "__module__", "") or "").startswith("tests.")
    )


def _slow(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & SLOW_FIXTURES:
        return True
    function = getattr(item, "function", None)
    if function is not None and launches(function):
        return True
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(
        launches(definition.func)
        for name, found in definitions.items()
        if name not in SHARED
        for definition in found
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that start their own server or a subprocess `slow`; on PostgreSQL, skip
    those marked `sqlite_only`, saying why."""
    on_postgres = os.environ.get("MEMORYD_TEST_BACKEND", "sqlite") == "postgres"
    for item in items:
        if _slow(item):
            item.add_marker(pytest.mark.slow)
        only = item.get_closest_marker("sqlite_only")
        if on_postgres and only is not None:
            item.add_marker(pytest.mark.skip(reason=f"SQLite only: {only.args[0]}"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Save the storage functions this process called, when the run records them
    (memoryd.testing.exercised: pytest-xdist's workers end without running atexit)."""
    exercised.save()


@pytest.fixture(scope="session", autouse=True)
def test_postgres() -> Iterator[str | None]:
    """With MEMORYD_TEST_BACKEND=postgres, a PostgreSQL for the session: every server a test
    starts gets a database of its own on it (memoryd.testing.postgres)."""
    if os.environ.get("MEMORYD_TEST_BACKEND", "sqlite") != "postgres":
        yield None
        return
    with TemporaryPostgres.running("test-pg") as database:
        os.environ[TEST_POSTGRES] = database.dsn
        try:
            yield database.dsn
        finally:
            del os.environ[TEST_POSTGRES]


@pytest.fixture(scope="session")
def postgres_base(test_postgres: str | None) -> Iterator[str]:
    """A PostgreSQL for the tests that need one whichever backend the suite runs on (moving
    between backends): the session's, or one started for them."""
    if test_postgres is not None:
        yield test_postgres
        return
    with TemporaryPostgres.running("test-pg-own") as database:
        yield database.dsn


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A memoryd server shared by the tests that do not restart or reconfigure one (one for
    each pytest-xdist worker). With $MEMORYD_TEST_LEFTOVER its data directory is in that folder
    (`<worker>/home`, emptied first) and stays after the run: `make test` then runs `memoryd
    check` on what the whole suite left behind."""
    leftover = os.environ.get("MEMORYD_TEST_LEFTOVER")
    if leftover:
        folder = Path(leftover) / os.environ.get("PYTEST_XDIST_WORKER", "main")
        shutil.rmtree(folder, ignore_errors=True)
        home = folder / "home"
    else:
        home = tmp_path_factory.mktemp("shared") / "home"
    process = ServerProcess(home).start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture(scope="session")
async def channel(server: ServerProcess) -> AsyncIterator[grpc.aio.Channel]:
    """An asyncio channel to the shared server."""
    async with md.connect(server.address) as opened:
        yield opened


@pytest.fixture
def blocking(server: ServerProcess) -> Iterator[grpc.Channel]:
    """A blocking channel to the shared server (for frameworks whose methods are synchronous)."""
    with md.connect_sync(server.address) as opened:
        yield opened


@pytest.fixture(scope="session")
def memory(channel: grpc.aio.Channel) -> md.Stubs:
    """The MemoryService stub on the shared server."""
    return md.Stubs(channel)


@pytest.fixture
def conversation() -> md.Conversation:
    """A conversation no other test uses."""
    return md.Conversation(channel="telegram", chat_id=f"chat-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[type[ServerProcess]]:
    """Start extra servers (own home, config, env); all are stopped after the test."""
    started: list[ServerProcess] = []

    class Tracked(ServerProcess):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    yield Tracked
    for process in started:
        process.stop()


@pytest.fixture(scope="session")
def grpcurl() -> str:
    """The real grpcurl binary (installed by `make tools`)."""
    path = shutil.which("grpcurl") or shutil.which("grpcurl", path=str(ROOT / ".tools" / "bin"))
    if path is None:
        pytest.fail("grpcurl is not installed: run `make tools` (or `make test`)")
    return path


@pytest.fixture(scope="module", autouse=True)
def exercised_by_module(request: pytest.FixtureRequest) -> None:
    """In make test's PostgreSQL run ($STORAGE_EXERCISED: memoryd.testing.exercised), the storage
    calls of the servers each module starts go to a file of the module's own (CALLS@module), so
    that a function the run no longer calls can be traced to the module that used to."""
    variable = exercised.VARIABLE
    calls = os.environ.get(variable)
    if calls:
        os.environ[variable] = f"{calls.split('@')[0]}@{request.module.__name__}"
