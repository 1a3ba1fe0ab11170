"""Metrics and traces: /metrics scraped after known calls and parsed with prometheus-client's
own parser, its counts asserted; its tokens and switches; and the span tree of a CommitTurn
that triggers a review, as exported over OTLP to a collector held in memory by the test."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2

import memoryd_client as md
from memoryd.observability import metrics
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel, Reply
from memoryd.testing.server_process import ServerProcess
from tests.backends import on_postgres
from tests.helpers import append, user
from tests.review_helpers import eventually, turn
from tests.scraping import Samples, listening, scrape

ADMIN = "metrics-admin-token-0123456789abcdef"
ADAPTER = "metrics-adapter-token-0123456789abcd"
TOKENS = f"""
[[memoryd.auth.tokens]]
token = "{ADMIN}"
role = "admin"
agents = ["*"]

[[memoryd.auth.tokens]]
token = "{ADAPTER}"
role = "adapter"
agents = ["*"]
"""
LISTENERS = """
[memoryd.http]
listen = "127.0.0.1:0"

[memoryd.metrics]
listen = "127.0.0.1:0"
"""
SUMMARY = "The user talked about trains."
REVIEW = json.dumps(
    {
        "operations": [
            {"action": "add", "target": "user", "category": "identity", "value": "Name is Ada"},
            {"action": "archive", "id": 987654, "reason": "not shown, so refused"},
        ]
    }
)


def replies(request: dict[str, Any]) -> Reply:
    """A summary for a compaction; one added row and one refused archive for a review."""
    system = request["messages"][0]["content"]
    if "compact a conversation" in system:
        return Reply(content=SUMMARY, prompt_tokens=300, completion_tokens=30)
    return Reply(content=REVIEW, prompt_tokens=100, completion_tokens=20)


@pytest.fixture
def model() -> Iterator[FakeModel]:
    with FakeModel(responder=replies) as fake:
        yield fake


async def test_metrics_count_known_calls(
    start_server: type[ServerProcess], tmp_path: Path, model: FakeModel
) -> None:
    config = review_config(model, turn_interval=1) + LISTENERS
    server = start_server(tmp_path / "home", config=config).start()
    owner = f"owner-{uuid.uuid4().hex}"
    chat = f"chat-{uuid.uuid4().hex}"
    conversation = md.Conversation(
        agent_id="main", owner_id=owner, channel="telegram", chat_id=chat
    )
    metrics_address = listening(server, "metrics")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        compaction = md.Stubs(channel)
        for index in range(3):
            await append(memory, conversation, user(f"message {index}"))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await memory.conversations.AppendMessages(
                md.AppendMessagesRequest(messages=[user("no conversation")])
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        await memory.conversations.CommitTurn(
            md.CommitTurnRequest(conversation=conversation, messages=turn("I am Ada"))
        )

        async def reviewed() -> bool:
            state = await memory.reviews.GetReviewState(
                md.GetReviewStateRequest(conversation=conversation)
            )
            return state.HasField("last_run")

        await eventually(reviewed)
        prompt = md.GetPromptContextRequest(agent_id="main", owner_id=owner)
        for _ in range(2):
            await memory.context.GetPromptContext(prompt)
        compacted = await compaction.context.Compact(
            md.CompactRequest(conversation=conversation, context_window=2000)
        )
        assert compacted.outcome in (
            md.COMPACTION_OUTCOME_COMPACTED,
            md.COMPACTION_OUTCOME_NOTHING_TO_COMPACT,
        )
        # One StreamTranscript open while scraped.
        requests: asyncio.Queue[md.StreamTranscriptRequest | None] = asyncio.Queue()

        async def sent() -> Any:
            while (request := await requests.get()) is not None:
                yield request

        stream = memory.conversations.StreamTranscript(sent())
        await requests.put(
            md.StreamTranscriptRequest(
                open=md.TranscriptOpen(device_id="dev-1", session_id="s-1", owner_id=owner)
            )
        )
        await stream.read()
        status, body = await asyncio.to_thread(scrape, metrics_address)
        await requests.put(md.StreamTranscriptRequest(end=md.TranscriptEnd()))
        await requests.put(None)
        while await stream.read() != grpc.aio.EOF:
            pass

    assert status == 200
    found = Samples(body)
    append_path = "/memoryd.v2.ConversationService/AppendMessages"
    assert found.value("memoryd_rpc_calls_total", method=append_path, code="OK") == 3
    assert found.value("memoryd_rpc_calls_total", method=append_path, code="INVALID_ARGUMENT") == 1
    assert found.value("memoryd_rpc_duration_seconds_count", method=append_path) == 4
    assert (
        found.value(
            "memoryd_rpc_calls_total",
            method="/memoryd.v2.ConversationService/CommitTurn",
            transport="grpc",
        )
        == 1
    )
    assert found.value("memoryd_writer_group_jobs_count", writer="main") >= 4
    assert found.value("memoryd_writer_group_jobs_sum", writer="main") >= 4
    assert found.value("memoryd_writer_commit_seconds_count", writer="main") >= 4
    assert found.value("memoryd_review_runs_total", status="ok") == 1
    assert found.value("memoryd_review_operations_total", outcome="added") == 1
    assert found.value("memoryd_review_operations_total", outcome="skipped") == 1
    review_labels = {"provider": "fake-0", "model": "fake-model-0", "purpose": "memory_reviewer"}
    assert found.value("memoryd_model_calls_total", **review_labels, outcome="ok") == 1
    assert found.value("memoryd_model_tokens_total", **review_labels, kind="input") == 100
    assert found.value("memoryd_model_tokens_total", **review_labels, kind="output") == 20
    assert found.value("memoryd_model_call_duration_seconds_count", **review_labels) == 1
    compacted_outcome = (
        "compacted"
        if compacted.outcome == md.COMPACTION_OUTCOME_COMPACTED
        else ("nothing_to_compact")
    )
    assert found.value("memoryd_compactions_total", outcome=compacted_outcome) == 1
    assert found.value("memoryd_cache_lookups_total", cache="prompt_files", result="hit") >= 1
    assert found.value("memoryd_transcript_streams_open") == 1
    assert found.value("memoryd_database_bytes") > 0
    backend = "postgres" if on_postgres() else "sqlite"
    assert (found.value("memoryd_wal_bytes") > 0) == (backend == "sqlite")
    assert found.value("memoryd_build_info", backend=backend) == 1
    assert found.value("process_cpu_seconds_total") > 0
    # Label values are bounded: no owner, chat or text ever becomes one.
    assert not {value for value in found.label_values() if owner in value or chat in value}
    # The HTTP port serves the same registry, and its calls are counted as HTTP.
    status, body = await asyncio.to_thread(scrape, listening(server, "http"))
    assert status == 200
    assert Samples(body).value("memoryd_rpc_calls_total", method=append_path, code="OK") == 3


async def test_embeddings_are_counted_and_their_queue_drains(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home", config=LISTENERS).start()
    conversation = md.Conversation(agent_id="main", owner_id="ada", channel="cli", chat_id="1")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await append(memory, conversation, *(user(f"fact number {n}") for n in range(5)))
        await memory.conversations.SearchHistory(
            md.SearchHistoryRequest(
                conversation=conversation, query="fact", mode=md.SEARCH_MODE_SEMANTIC
            )
        )

    async def drained() -> bool:
        found = Samples((await asyncio.to_thread(scrape, listening(server, "metrics")))[1])
        return (
            found.value("memoryd_embedded_texts_total", kind="message") >= 5
            and found.value("memoryd_embedding_queue", kind="message") == 0
        )

    await eventually(drained, within=60)
    found = Samples((await asyncio.to_thread(scrape, listening(server, "metrics")))[1])
    assert found.value("memoryd_embedding_lag_seconds") == 0
    assert found.value("memoryd_embedding_batch_seconds_count", kind="message") >= 1


async def test_metrics_need_an_admin_token_when_tokens_are_configured(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home", config=TOKENS + LISTENERS).start()
    for address in (listening(server, "metrics"), listening(server, "http")):
        status, body = await asyncio.to_thread(scrape, address)
        assert (status, "authorization: Bearer" in body) == (401, True)
        status, body = await asyncio.to_thread(scrape, address, "not-a-token")
        assert (status, body.strip()) == (401, "the bearer token is not valid")
        status, body = await asyncio.to_thread(scrape, address, ADAPTER)
        assert (status, "admin token" in body) == (403, True)
        status, body = await asyncio.to_thread(scrape, address, ADMIN)
        assert status == 200
        assert "memoryd_rpc_duration_seconds" in body


def test_metrics_port_serves_only_metrics_and_only_get(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    server = start_server(tmp_path / "home", config=LISTENERS).start()
    address = listening(server, "metrics")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://{address}/memoryd.v2.ConversationService/GetConversation")
    assert missing.value.code == 404
    posted = urllib.request.Request(f"http://{address}/metrics", data=b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(posted)  # noqa: S310
    assert (refused.value.code, refused.value.headers["Allow"]) == (405, "GET")
    openmetrics = urllib.request.Request(
        f"http://{address}/metrics", headers={"Accept": "application/openmetrics-text"}
    )
    with urllib.request.urlopen(openmetrics) as answer:  # noqa: S310
        assert answer.headers["Content-Type"].startswith("application/openmetrics-text")
        assert answer.read().decode().rstrip().endswith("# EOF")


async def test_metrics_turned_off(start_server: type[ServerProcess], tmp_path: Path) -> None:
    config = (
        '[memoryd.http]\nlisten = "127.0.0.1:0"\n'
        '[memoryd.metrics]\nenabled = false\nlisten = "127.0.0.1:0"\n'
    )
    server = start_server(tmp_path / "home", config=config).start()
    assert "metrics" not in server.events("serving")[-1]
    status, _ = await asyncio.to_thread(scrape, listening(server, "http"))
    assert status == 404


@pytest.mark.parametrize(
    ("config", "arguments", "message"),
    [
        (
            '[memoryd.metrics]\nlisten = "0.0.0.0:0"\n',
            (),
            "refusing to serve 0.0.0.0:0 without authentication",
        ),
        (
            '[memoryd.metrics]\nlisten = "127.0.0.1:0"\n',
            ("--workers", "2"),
            "memoryd.metrics.listen is served by one process only",
        ),
        ('[memoryd.metrics]\nlisten = "nowhere"\n', (), "memoryd.metrics.listen must be HOST:PORT"),
        (
            "[memoryd.tracing]\nenabled = true\nsample_ratio = 2.0\n",
            (),
            "memoryd.tracing.sample_ratio must be between 0 and 1, got 2.0",
        ),
        (
            '[memoryd.tracing]\nenabled = true\notlp_endpoint = "collector:4317"\n',
            (),
            "memoryd.tracing.otlp_endpoint must start with http:// or https://",
        ),
    ],
)
def test_refused_settings(
    tmp_path: Path, config: str, arguments: tuple[str, ...], message: str
) -> None:
    server = ServerProcess(tmp_path / "home", config=config, arguments=arguments)
    assert server.wait_exit() != 0
    assert message in server.output
    assert "Traceback" not in server.output


def test_a_metrics_port_in_use_is_refused(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = f'[memoryd.metrics]\nlisten = "127.0.0.1:{port}"\n'
        server = ServerProcess(tmp_path / "home", config=config)
        assert server.wait_exit() != 0
    assert f"cannot listen on 127.0.0.1:{port} (memoryd.metrics.listen)" in server.output
    assert "Traceback" not in server.output


# --- traces ------------------------------------------------------------------------------------


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace receiver keeping every span in memory."""

    def __init__(self) -> None:
        self.spans: list[trace_pb2.Span] = []
        self.resources: list[dict[str, Any]] = []

    def Export(  # noqa: N802 - the generated servicer's name
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: Any,  # noqa: ARG002 - the generated servicer's signature
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            self.resources.append(attributes(resource_spans.resource.attributes))
            for scope in resource_spans.scope_spans:
                self.spans.extend(scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()

    def named(self, name: str) -> list[trace_pb2.Span]:
        return [span for span in self.spans if span.name == name]


def attributes(pairs: Any) -> dict[str, Any]:
    values = {}
    for pair in pairs:
        kind = pair.value.WhichOneof("value")
        values[pair.key] = getattr(pair.value, kind) if kind else None
    return values


@pytest.fixture
def collector() -> Iterator[tuple[Collector, int]]:
    received = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    # opentelemetry-proto's generated gRPC module has no types.
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
        received, server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield received, port
    server.stop(None)


async def test_span_tree_of_a_turn_that_triggers_a_review(
    start_server: type[ServerProcess],
    tmp_path: Path,
    model: FakeModel,
    collector: tuple[Collector, int],
) -> None:
    received, port = collector
    tracing = (
        f'\n[memoryd.tracing]\nenabled = true\notlp_endpoint = "http://127.0.0.1:{port}"\n'
        'service_name = "memoryd-under-test"\n'
    )
    server = start_server(
        tmp_path / "home",
        config=review_config(model, turn_interval=1) + tracing,
        env={"OTEL_BSP_SCHEDULE_DELAY": "50"},
    ).start()
    trace_id = secrets.token_hex(16)
    caller_span = secrets.token_hex(8)
    owner = f"owner-{uuid.uuid4().hex}"
    conversation = md.Conversation(agent_id="main", owner_id=owner, channel="cli", chat_id="1")
    secret_text = f"my secret is {uuid.uuid4().hex}"
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await memory.conversations.CommitTurn(
            md.CommitTurnRequest(conversation=conversation, messages=turn(secret_text)),
            metadata=(("traceparent", f"00-{trace_id}-{caller_span}-01"),),
        )

        def review_exported() -> bool:
            return any(
                attributes(span.attributes).get("memoryd.review.status") == "ok"
                for span in received.named("memoryd.review")
            )

        await eventually(review_exported, within=30)
        compact_parent = secrets.token_hex(8)
        await md.Stubs(channel).context.Compact(
            md.CompactRequest(conversation=conversation, context_window=2000),
            metadata=(("traceparent", f"00-{trace_id}-{compact_parent}-01"),),
        )

        def compaction_exported() -> bool:
            return bool(received.named("memoryd.compaction"))

        await eventually(compaction_exported, within=30)

    spans = {span.span_id: span for span in received.spans if span.trace_id.hex() == trace_id}
    (commit,) = [s for s in spans.values() if s.name == "memoryd.v2.ConversationService/CommitTurn"]
    assert commit.parent_span_id.hex() == caller_span
    assert commit.kind == trace_pb2.Span.SPAN_KIND_SERVER
    assert attributes(commit.attributes) == {
        "rpc.system": "grpc",
        "rpc.service": "memoryd.v2.ConversationService",
        "rpc.method": "CommitTurn",
        "rpc.grpc.status_code": 0,
    }

    def children(parent: trace_pb2.Span) -> list[trace_pb2.Span]:
        return [span for span in spans.values() if span.parent_span_id == parent.span_id]

    commit_children = {span.name for span in children(commit)}
    assert "memoryd.write commit_turn" in commit_children or any(
        name.startswith("memoryd.write") for name in commit_children
    )
    assert "memoryd.review" in commit_children
    (review,) = [span for span in children(commit) if span.name == "memoryd.review"]
    said = attributes(review.attributes)
    assert said["memoryd.review.status"] == "ok"
    assert (said["memoryd.review.added"], said["memoryd.review.skipped_operations"]) == (1, 1)
    (chat,) = [span for span in children(review) if span.name == "chat fake-model-0"]
    assert chat.kind == trace_pb2.Span.SPAN_KIND_CLIENT
    assert attributes(chat.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "fake-0",
        "gen_ai.request.model": "fake-model-0",
        "gen_ai.agent.name": "memory_reviewer",
        "gen_ai.response.model": "fake-model-0",
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
    }
    review_writes = {span.name for span in children(review)} - {chat.name}
    assert any(name.startswith("memoryd.write review_apply") for name in review_writes)
    assert chat.start_time_unix_nano >= review.start_time_unix_nano
    assert chat.end_time_unix_nano <= review.end_time_unix_nano
    (compact,) = [s for s in spans.values() if s.name == "memoryd.v2.ContextService/Compact"]
    assert compact.parent_span_id.hex() == compact_parent
    (compaction,) = children(compact)
    assert compaction.name == "memoryd.compaction"
    assert attributes(compaction.attributes)["memoryd.compaction.outcome"] == "nothing_to_compact"
    assert received.resources[0]["service.name"] == "memoryd-under-test"
    # No span carries what was said, nor whose it is.
    everything = repr([attributes(span.attributes) for span in received.spans])
    assert secret_text not in everything
    assert owner not in everything


def tracing_config(port: int, ratio: float) -> str:
    return (
        f'[memoryd.tracing]\nenabled = true\notlp_endpoint = "http://127.0.0.1:{port}"\n'
        f"sample_ratio = {ratio}\n"
    )


async def test_untraced_calls_start_traces_of_their_own(
    start_server: type[ServerProcess], tmp_path: Path, collector: tuple[Collector, int]
) -> None:
    received, port = collector
    config = tracing_config(port, 1.0)
    server = start_server(
        tmp_path / "home", config=config, env={"OTEL_BSP_SCHEDULE_DELAY": "50"}
    ).start()
    conversation = md.Conversation(agent_id="main", owner_id="ada", channel="cli", chat_id="1")
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        await append(memory, conversation, user("hello"))
        with pytest.raises(grpc.aio.AioRpcError):
            await memory.memory.GetMemory(
                md.GetMemoryRequest(owner=md.OwnerScope(agent_id="main", owner_id="ada"), id=42)
            )

    def exported() -> bool:
        return bool(received.named("memoryd.v2.MemoryService/GetMemory"))

    await eventually(exported, within=30)
    (appended,) = received.named("memoryd.v2.ConversationService/AppendMessages")
    assert appended.parent_span_id == b""
    (missing,) = received.named("memoryd.v2.MemoryService/GetMemory")
    said = attributes(missing.attributes)
    assert said["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert said["gen_ai.operation.name"] == "search_memory"
    # NOT_FOUND is the caller's error, not the server's: the span's status stays unset.
    assert missing.status.code == trace_pb2.Status.STATUS_CODE_UNSET
    # The message's background embedding is a trace of its own.

    def embedded() -> list[Any]:
        return [span for span in received.spans if span.name.startswith("embeddings ")]

    await eventually(embedded, within=60)
    said = attributes(embedded()[0].attributes)
    assert (said["gen_ai.operation.name"], said["memoryd.embedding.kind"]) == (
        "embeddings",
        "message",
    )
    assert embedded()[0].parent_span_id == b""


async def test_sampling_follows_the_caller_and_the_ratio(
    start_server: type[ServerProcess], tmp_path: Path, collector: tuple[Collector, int]
) -> None:
    received, port = collector
    server = start_server(
        tmp_path / "home",
        config=tracing_config(port, 0.0) + '[memoryd.http]\nlisten = "127.0.0.1:0"\n',
        env={"OTEL_BSP_SCHEDULE_DELAY": "50"},
    ).start()
    conversation = md.Conversation(agent_id="main", owner_id="ada", channel="cli", chat_id="1")
    sampled, unsampled, over_http = (secrets.token_hex(16) for _ in range(3))
    async with md.connect(server.address) as channel:
        memory = md.Stubs(channel)
        for _ in range(20):  # at ratio 0 no new trace is ever recorded
            await append(memory, conversation, user("hello"))
        await memory.conversations.AppendMessages(
            md.AppendMessagesRequest(conversation=conversation, messages=[user("not sampled")]),
            metadata=(("traceparent", f"00-{unsampled}-{secrets.token_hex(8)}-00"),),
        )
        for garbage in ("00-zz-yy-01", "", f"00-{'0' * 32}-{'0' * 16}-01", "x" * 5000):
            # A malformed traceparent is no trace, and forces no recording.
            await memory.conversations.AppendMessages(
                md.AppendMessagesRequest(conversation=conversation, messages=[user("garbage")]),
                metadata=(("traceparent", garbage),),
            )
        await memory.conversations.AppendMessages(
            md.AppendMessagesRequest(conversation=conversation, messages=[user("sampled")]),
            metadata=(("traceparent", f"00-{sampled}-{secrets.token_hex(8)}-01"),),
        )

    http_parent = secrets.token_hex(8)
    request = urllib.request.Request(
        f"http://{listening(server, 'http')}/memoryd.v2.ConversationService/GetConversation",
        data=json.dumps(
            {"conversation": {"agentId": "main", "ownerId": "ada", "channel": "cli", "chatId": "1"}}
        ).encode(),
        headers={
            "Content-Type": "application/json",
            "traceparent": f"00-{over_http}-{http_parent}-01",
        },
    )
    await asyncio.to_thread(lambda: urllib.request.urlopen(request).read())  # noqa: S310

    def exported() -> bool:
        return {sampled, over_http} <= {span.trace_id.hex() for span in received.spans}

    await eventually(exported, within=30)
    await asyncio.sleep(1)  # anything else would have been exported by now (every 50 ms)
    traces = {span.trace_id.hex() for span in received.spans}
    assert traces == {sampled, over_http}
    (http_span,) = [span for span in received.spans if span.trace_id.hex() == over_http]
    assert http_span.parent_span_id.hex() == http_parent
    assert attributes(http_span.attributes)["rpc.system"] == "connect_rpc"
    received.spans = [span for span in received.spans if span.trace_id.hex() == sampled]
    names = sorted(span.name for span in received.spans)
    assert names[0] == "memoryd.v2.ConversationService/AppendMessages"
    assert any(name.startswith("memoryd.write") for name in names)


# --- the docs ----------------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs"


def memoryd_families() -> set[str]:
    return {
        family.name for family in metrics.REGISTRY.collect() if family.name.startswith("memoryd_")
    }


def test_every_metric_is_documented() -> None:
    documented = DOCS.joinpath("metrics.md").read_text(encoding="utf-8")
    for name in memoryd_families():
        exposed = f"{name}_total" if f"`{name}_total`" in documented else name
        assert f"| `{exposed}` |" in documented, name


def test_the_dashboard_asks_only_for_metrics_that_exist() -> None:
    dashboard = json.loads(DOCS.joinpath("grafana-dashboard.json").read_text(encoding="utf-8"))
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    asked = {
        name for expression in expressions for name in re.findall(r"memoryd_[a-z_]+", expression)
    }
    families = memoryd_families()
    for name in asked:
        base = re.sub(r"_(total|bucket|sum|count)$", "", name)
        assert base in families, name
    assert len(asked) >= 20


async def test_a_failed_review_is_counted_with_its_model_call(
    start_server: type[ServerProcess], tmp_path: Path
) -> None:
    with FakeModel() as failing:
        for _ in range(3):
            failing.fail(500)
        config = review_config(failing, enabled=False) + LISTENERS
        server = start_server(tmp_path / "home", config=config).start()
        conversation = md.Conversation(agent_id="main", owner_id="ada", channel="cli", chat_id="9")
        async with md.connect(server.address) as channel:
            memory = md.Stubs(channel)
            await memory.conversations.CommitTurn(
                md.CommitTurnRequest(conversation=conversation, messages=turn("I am Ada"))
            )
            reviewed = await memory.reviews.ReviewNow(
                md.ReviewNowRequest(conversation=conversation)
            )
        assert reviewed.reviews[0].status == md.REVIEW_STATUS_FAILED
        found = Samples((await asyncio.to_thread(scrape, listening(server, "metrics")))[1])
    assert found.value("memoryd_review_runs_total", status="failed") == 1
    assert found.value("memoryd_review_runs_total", status="ok") == 0
    labels = {"provider": "fake-0", "model": "fake-model-0", "purpose": "memory_reviewer"}
    assert found.value("memoryd_model_calls_total", **labels, outcome="http_error") == 1
    assert found.value("memoryd_model_tokens_total", **labels) == 0
