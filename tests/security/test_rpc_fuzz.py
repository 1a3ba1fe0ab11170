"""Every unary RPC fuzzed through the real server (a bounded run; `python -m scripts.fuzz_rpcs` runs
long): nothing answers INTERNAL or UNKNOWN, nothing leaks internals, nothing crashes the server,
and another owner's rows are never touched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2
from hypothesis import HealthCheck, given, settings

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess
from tests.backends import on_postgres
from tests.helpers import health_stub
from tests.rpc_fuzz import METHODS, VICTIM, Case, Target, cases

EXAMPLES_PER_RPC = 60


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, grpc.Channel]]:
    home = tmp_path_factory.mktemp("fuzz") / "home"
    server = ServerProcess(home).start()
    with grpc.insecure_channel(server.address) as channel:
        yield Target(channel, str(home)), channel
    assert server.stop() == 0, server.output


def victim_state(channel: grpc.Channel) -> tuple[list[tuple[int, str, bool]], list[str]]:
    stub = md.SyncStubs(channel)
    rows = stub.memory.ListMemories(
        md.ListMemoriesRequest(conversation=VICTIM, archived=md.ARCHIVED_FILTER_ALL, page_size=1000)
    )
    messages = stub.conversations.ListMessages(
        md.ListMessagesRequest(conversation=VICTIM, all_history=True)
    )
    return (
        [(item.memory.id, item.memory.value, item.memory.archived) for item in rows.memories],
        [message.content for message in messages.messages],
    )


def seed_victim(channel: grpc.Channel) -> tuple[list[tuple[int, str, bool]], list[str]]:
    """Rows of an owner the fuzzer never names; returns their state, which must not change."""
    stub = md.SyncStubs(channel)
    stub.conversations.AppendMessages(
        md.AppendMessagesRequest(
            conversation=VICTIM,
            messages=[md.NewMessage(role=md.ROLE_USER, content=f"secret {n}") for n in range(5)],
        )
    )
    for category, key in ((md.CATEGORY_IDENTITY, "name"), (md.CATEGORY_DIRECTIVE, "rule")):
        stub.memory.StoreMemory(
            md.StoreMemoryRequest(conversation=VICTIM, category=category, key=key, value="mine")
        )
    stub.memory.StoreMemory(md.StoreMemoryRequest(conversation=VICTIM, key="note", value="mine"))
    return victim_state(channel)


@pytest.fixture(scope="module")
def victim(fuzzed: tuple[Target, grpc.Channel]) -> Iterator[None]:
    """The victim's rows come through the whole module unchanged."""
    _, channel = fuzzed
    before = seed_victim(channel)
    yield
    assert victim_state(channel) == before


@pytest.mark.parametrize("method", METHODS)
def test_no_rpc_answers_internal_or_leaks_internals(
    fuzzed: tuple[Target, grpc.Channel], victim: None, method: str
) -> None:
    target, _ = fuzzed

    @settings(
        max_examples=EXAMPLES_PER_RPC,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=cases(method))
    def run(case: Case) -> None:
        target.check(method, case)

    run()


def test_the_server_still_serves_after_the_fuzzing(
    fuzzed: tuple[Target, grpc.Channel], victim: None
) -> None:
    target, channel = fuzzed
    assert target.calls >= len(METHODS) * EXAMPLES_PER_RPC // 2
    health = health_stub(channel).Check(health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    assert set(target.statuses) >= {"OK", "INVALID_ARGUMENT"}
    if not on_postgres():  # SQLite's file is still there (PostgreSQL's is not the server's own)
        assert Path(target.home, "memory.db").is_file()
