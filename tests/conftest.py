"""Shared fixtures: one real memoryd server for the session, its generated client, fresh ids."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

import memoryd_client as md
from tests.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
# The fake model server and review-configured servers (fixtures `model`, `reviewing`).
pytest_plugins = ["tests.review_helpers"]


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A memoryd server shared by the tests that do not restart or reconfigure one. With
    $MEMORYD_TEST_LEFTOVER its data directory is that folder (emptied first) and stays after the
    run: `make test` then runs `memoryd check` on what the whole suite left behind."""
    leftover = os.environ.get("MEMORYD_TEST_LEFTOVER")
    if leftover:
        shutil.rmtree(leftover, ignore_errors=True)
        home = Path(leftover) / "home"
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


@pytest.fixture(scope="session")
def memory(channel: grpc.aio.Channel) -> md.MemoryServiceStub:
    """The MemoryService stub on the shared server."""
    return md.MemoryServiceStub(channel)


@pytest.fixture
def conversation() -> md.Conversation:
    """A conversation no other test uses."""
    return md.Conversation(channel="telegram", chat_id=f"chat-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[type[ServerProcess]]:
    """Start extra servers (own home, config, env); all are stopped after the test."""
    started: list[ServerProcess] = []

    class Tracked(ServerProcess):
        def __init__(self, *args: object, **kwargs: object) -> None:
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
