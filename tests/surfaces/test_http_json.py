"""HTTP/JSON ([memoryd.http] listen): every unary RPC as a Connect call, with curl, through the
same handlers as gRPC: the same answers, the same refusals (with their HTTP status and details),
the same tokens; CORS only for the origins configured; the fuzzer's requests refused as gRPC
refuses them."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.rpc.error_details_pb2 import ErrorInfo
from hypothesis import HealthCheck, given, settings

import memoryd_client as md
from memoryd.api import contract
from memoryd.api.connect_http import HTTP_STATUS
from memoryd.api.status import STATUS
from memoryd.testing.configs import embedding_config
from memoryd.testing.fake_embeddings import FakeEmbeddings
from memoryd.testing.server_process import ServerProcess
from tests.helpers import curl
from tests.rpc_fuzz import METHODS, RPCS, Case, Target, cases

HTTP_ON = '[memoryd.http]\nlisten = "127.0.0.1:0"\ncors_origins = "https://console.example"\n'
ADMIN = "http-admin-token-0123456789abcdef"
OTHER = "http-other-agent-token-0123456789"
TOKENS = f"""{HTTP_ON}
[[memoryd.auth.tokens]]
token = "{ADMIN}"
role = "admin"
agents = ["*"]

[[memoryd.auth.tokens]]
token = "{OTHER}"
role = "adapter"
agents = ["other"]
"""
# Each RPC's memoryd.v2 path, by name.
V2 = {method.name: contract.path(method) for method in contract.methods()}
FUZZ_EXAMPLES_PER_RPC = 12


def http_address(server: ServerProcess) -> str:
    return str(server.events("serving")[-1]["http"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("http") / "home", config=HTTP_ON).start()
    yield server
    assert server.stop() == 0, server.output


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("http-auth") / "home", config=TOKENS).start()
    yield server
    assert server.stop() == 0, server.output


def test_every_status_has_its_http_code() -> None:
    for code in STATUS.values():
        assert code in HTTP_STATUS
    assert HTTP_STATUS[grpc.StatusCode.INVALID_ARGUMENT] == 400
    assert HTTP_STATUS[grpc.StatusCode.UNAUTHENTICATED] == 401
    assert HTTP_STATUS[grpc.StatusCode.PERMISSION_DENIED] == 403
    assert HTTP_STATUS[grpc.StatusCode.NOT_FOUND] == 404
    assert HTTP_STATUS[grpc.StatusCode.RESOURCE_EXHAUSTED] == 429
    assert HTTP_STATUS[grpc.StatusCode.UNAVAILABLE] == 503


def test_each_rpc_group_with_curl(served: ServerProcess) -> None:
    address = http_address(served)
    chat = {"channel": "curl", "chatId": uuid.uuid4().hex[:8], "ownerId": "ada"}
    # History.
    status, appended = curl(
        address,
        V2["AppendMessages"],
        {"conversation": chat, "messages": [{"role": "ROLE_USER", "content": "東京 🍣 at nine"}]},
    )
    assert status == 200
    assert appended["results"][0]["outcome"] == "APPEND_OUTCOME_STORED"
    status, listed = curl(address, V2["ListMessages"], {"conversation": chat})
    assert [m["content"] for m in listed["messages"]] == ["東京 🍣 at nine"]
    status, found = curl(
        address, V2["SearchHistory"], {"conversation": chat, "query": "東京", "mode": 1}
    )
    assert status == 200
    assert found["hits"][0]["message"]["content"] == "東京 🍣 at nine"
    # Memories.
    status, stored = curl(
        address,
        V2["StoreMemory"],
        {"conversation": chat, "category": "CATEGORY_PREFERENCE", "key": "tea", "value": "Green"},
    )
    assert status == 200
    assert stored["created"]
    status, recalled = curl(
        address,
        V2["Recall"],
        {"conversation": chat, "key": "tea", "scope": "RECALL_SCOPE_OWNER"},
    )
    assert [hit["memory"]["value"] for hit in recalled["hits"]] == ["Green"]
    # Prompt files and resources.
    status, prompt = curl(address, V2["GetPromptContext"], {"ownerId": "ada"})
    assert "Green" in prompt["userMd"]
    status, resources = curl(address, V2["ListResources"], {"agentId": "main"})
    assert status == 200
    assert resources["resources"]
    # Compaction and review.
    status, composed = curl(
        address, V2["ComposeContext"], {"conversation": chat, "contextWindow": "8000"}
    )
    assert status == 200
    assert composed["parts"][-1]["content"] == "東京 🍣 at nine"
    status, review = curl(address, V2["GetReviewState"], {"conversation": chat})
    assert status == 200
    assert int(review.get("unreviewedMessages", 1)) >= 1


def test_refusals_carry_their_http_status_and_details(served: ServerProcess) -> None:
    address = http_address(served)
    status, refused = curl(
        address,
        V2["AppendMessages"],
        {"conversation": {"chatId": "1"}, "messages": [{"role": "ROLE_USER", "content": "x"}]},
    )
    assert status == 400
    assert refused["code"] == "invalid_argument"
    assert refused["message"] == "conversation.channel is required"
    info = ErrorInfo.FromString(base64.b64decode(refused["details"][0]["value"] + "=="))
    assert refused["details"][0]["type"] == "google.rpc.ErrorInfo"
    assert info.reason == "REQUIRED"
    status, refused = curl(address, V2["GetMemory"], {"id": "987654"})
    assert (status, refused["code"]) == (404, "not_found")
    status, refused = curl(address, V2["AppendMessages"], {"conversation": 7})
    assert (status, refused["code"]) == (400, "invalid_argument")
    assert "AppendMessagesRequest" in refused["message"]
    status, refused = curl(address, V2["AppendMessages"], {"unknownField": 1})
    assert (status, refused["code"]) == (400, "invalid_argument")
    status, refused = curl(address, V2["StreamTranscript"], {})
    assert status == 404
    assert "gRPC only" in refused["message"]
    status, refused = curl(address, V2["ListMessages"], {}, "Connect-Timeout-Ms: soon")
    assert (status, refused["code"]) == (400, "invalid_argument")
    # "¹" as its one Latin-1 byte: a digit to str.isdigit(), not to int().
    status, refused = curl(address, V2["ListMessages"], {}, "Connect-Timeout-Ms: \udcb9")
    assert (status, refused["code"]) == (400, "invalid_argument")
    assert refused["message"].startswith("Connect-Timeout-Ms must be at most 10 digits"), refused


def test_a_request_over_the_size_limit_is_refused_before_it_is_read_whole(
    served: ServerProcess,
) -> None:
    connection = http.client.HTTPConnection(http_address(served), timeout=60)
    body = b'{"query": "' + b"a" * (5 * 1024 * 1024) + b'"}'
    connection.request("POST", V2["SearchHistory"], body, {"Content-Type": "application/json"})
    answer = connection.getresponse()
    assert answer.status == 429
    assert json.loads(answer.read())["code"] == "resource_exhausted"


def test_binary_protobuf_too(served: ServerProcess) -> None:
    connection = http.client.HTTPConnection(http_address(served), timeout=60)
    key = md.Conversation(channel="proto", chat_id=uuid.uuid4().hex[:8])

    def call(path: str, request: Any, answer_type: Any) -> Any:
        connection.request(
            "POST", path, request.SerializeToString(), {"Content-Type": "application/proto"}
        )
        answer = connection.getresponse()
        assert answer.status == 200
        assert answer.getheader("content-type") == "application/proto"
        return answer_type.FromString(answer.read())

    message = md.NewMessage(role=md.ROLE_USER, content="a zero\u200bwidth space and 東京")
    call(
        V2["AppendMessages"],
        md.AppendMessagesRequest(conversation=key, messages=[message]),
        md.AppendMessagesResponse,
    )
    listed = call(
        V2["ListMessages"], md.ListMessagesRequest(conversation=key), md.ListMessagesResponse
    )
    assert [m.content for m in listed.messages] == ["a zero\u200bwidth space and 東京"]


def test_tokens_over_http(guarded: ServerProcess) -> None:
    address = http_address(guarded)
    owner = {"agentId": "main", "ownerId": "ada"}
    status, refused = curl(address, V2["GetPromptContext"], owner)
    assert (status, refused["code"]) == (401, "unauthenticated")
    status, refused = curl(address, V2["GetPromptContext"], owner, f"Authorization: Bearer {OTHER}")
    assert (status, refused["code"]) == (403, "permission_denied")
    status, refused = curl(
        address, V2["GetPromptContext"], owner, "Authorization: Bearer forged-token-0123456789"
    )
    assert (status, refused["code"]) == (401, "unauthenticated")
    status, _ = curl(address, V2["GetPromptContext"], owner, f"Authorization: Bearer {ADMIN}")
    assert status == 200


def test_purge_messages_over_http_keeps_grpc_s_scoping_and_refusals(
    guarded: ServerProcess,
) -> None:
    address = http_address(guarded)
    admin = f"Authorization: Bearer {ADMIN}"
    chat = {"channel": "curl", "chatId": uuid.uuid4().hex[:8], "ownerId": "ada"}
    said = [{"role": "ROLE_USER", "content": text} for text in ("keep this", "take this back")]
    status, appended = curl(
        address, V2["AppendMessages"], {"conversation": chat, "messages": said}, admin
    )
    assert status == 200
    first, second = (int(result["id"]) for result in appended["results"])
    # Another agent's token, a guest, a forged token: refused as over gRPC, nothing erased.
    for body, header, expected in (
        (
            {"conversation": chat, "messageIds": [second]},
            f"Authorization: Bearer {OTHER}",
            (403, "permission_denied"),
        ),
        (
            {"conversation": chat, "messageIds": [second], "trust": "TRUST_GUEST"},
            admin,
            (403, "permission_denied"),
        ),
        (
            {"conversation": chat, "messageIds": [second]},
            "Authorization: Bearer forged-token-0123456789",
            (401, "unauthenticated"),
        ),
        ({"conversation": chat, "messageIds": []}, admin, (400, "invalid_argument")),
        ({"conversation": chat, "messageIds": ["0"]}, admin, (400, "invalid_argument")),
    ):
        status, refused = curl(address, V2["PurgeMessages"], body, header)
        assert (status, refused["code"]) == expected, refused
    status, purged = curl(
        address, V2["PurgeMessages"], {"conversation": chat, "messageIds": [second]}, admin
    )
    assert status == 200, purged
    assert [int(i) for i in purged["purgedMessageIds"]] == [second]
    status, listed = curl(address, V2["ListMessages"], {"conversation": chat}, admin)
    assert [int(m["id"]) for m in listed["messages"]] == [first]


def test_cors_only_for_the_configured_origins(served: ServerProcess) -> None:
    address = http_address(served)
    for origin, allowed in (("https://console.example", True), ("https://evil.example", False)):
        connection = http.client.HTTPConnection(address, timeout=60)
        connection.request(
            "OPTIONS",
            V2["ListMessages"],
            headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
        )
        answer = connection.getresponse()
        answer.read()
        assert (answer.getheader("access-control-allow-origin") == origin) is allowed
        if allowed:
            assert answer.status == 204
            assert "authorization" in (answer.getheader("access-control-allow-headers") or "")


def test_http_beyond_loopback_needs_what_grpc_needs(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "home", config='[memoryd.http]\nlisten = "0.0.0.0:0"\n')
    assert server.wait_exit() != 0
    assert "refusing to serve 0.0.0.0:0 without authentication" in server.output
    assert "Traceback" not in server.output


def test_an_http_port_in_use_stops_the_start_saying_so(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = ServerProcess(
            tmp_path / "home", config=f'[memoryd.http]\nlisten = "127.0.0.1:{port}"\n'
        )
        assert server.wait_exit() != 0
    assert f"cannot listen on 127.0.0.1:{port} (memoryd.http.listen)" in server.output
    assert "Traceback" not in server.output
    assert server.events("serving") == []


def test_http_is_refused_with_workers(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "home", config=HTTP_ON, workers=2)
    assert server.wait_exit() == 2
    assert "memoryd.http.listen is served by one process only" in server.output


class HttpTarget:
    """The fuzzer's cases over HTTP, binary protobuf (the very bytes gRPC got) and JSON."""

    def __init__(self, address: str) -> None:
        self._connection = http.client.HTTPConnection(address, timeout=60)

    def call(self, method: str, body: bytes, kind: str) -> tuple[int, dict[str, Any]]:
        rpc = RPCS[method]
        self._connection.request(
            "POST",
            f"/{rpc.containing_service.full_name}/{rpc.name}",
            body,
            {"Content-Type": kind},
        )
        answer = self._connection.getresponse()
        data = answer.read()
        if answer.status == 200:
            return 200, {}
        return answer.status, json.loads(data)


@pytest.fixture(scope="module")
def both(served: ServerProcess) -> Iterator[tuple[Target, HttpTarget]]:
    with grpc.insecure_channel(served.address) as channel:
        yield Target(channel, str(served.home)), HttpTarget(http_address(served))


@pytest.mark.parametrize(
    "method", [m for m in METHODS if not RPCS[m].client_streaming and not RPCS[m].server_streaming]
)
def test_fuzzed_requests_are_refused_over_http_as_over_grpc(
    both: tuple[Target, HttpTarget], method: str
) -> None:
    grpc_target, http_target = both

    @settings(
        max_examples=FUZZ_EXAMPLES_PER_RPC,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=cases(method))
    def run(case: Case) -> None:
        payload = Target.encode(case)
        status, answer = http_target.call(method, payload, "application/proto")
        assert status < 500, (method, status, answer)
        refusal = grpc_target.refusal(method, payload)
        if refusal is not None and refusal[0] == grpc.StatusCode.INVALID_ARGUMENT:
            # A refusal of the request itself answers the same over either transport.
            assert (answer.get("code"), answer.get("message")) == ("invalid_argument", refusal[1])
        written = None if case.spoil else as_json(case.request)
        if written is not None:
            status, answer = http_target.call(method, written.encode(), "application/json")
            assert status < 500, (method, status, answer)
            if refusal is not None and refusal[0] == grpc.StatusCode.INVALID_ARGUMENT:
                assert status == 400, (method, status, answer)

    run()


def as_json(request: Any) -> str | None:
    """The request in protobuf's JSON mapping; None when JSON cannot hold it (a timestamp out
    of JSON's range: a client of HTTP/JSON cannot send it)."""
    try:
        return str(json_format.MessageToJson(request))
    except json_format.SerializeToJsonError:
        return None


def test_search_hits_carry_their_scores_and_nothing_found_says_so(served: ServerProcess) -> None:
    """Over HTTP as over gRPC: each hit's scores, relevance and match kinds; a query about
    nothing held returns no hit and counts what its floor left out; words that mean nothing
    find nothing."""
    address = http_address(served)
    chat = {"channel": "curl", "chatId": uuid.uuid4().hex[:8], "ownerId": "ada"}
    curl(
        address,
        V2["AppendMessages"],
        {"conversation": chat, "messages": [{"role": "ROLE_USER", "content": "I adore jazz"}]},
    )
    deadline = time.monotonic() + 120
    while curl(address, V2["GetEmbeddingStatus"], {})[1].get("pendingMessages"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    status, found = curl(address, V2["SearchHistory"], {"conversation": chat, "query": "jazz"})
    assert status == 200
    hit = found["hits"][0]
    assert "MATCH_KIND_WORD" in hit["matches"]
    assert hit["scores"]["lexicalRank"] == 1
    assert hit["scores"]["fused"] > 0
    assert hit["scores"]["relevance"] >= 0.5
    assert hit["scores"]["coverage"] == 1
    status, nothing = curl(
        address, V2["SearchHistory"], {"conversation": chat, "query": "quantum chromodynamics"}
    )
    assert status == 200
    assert nothing.get("hits", []) == []
    assert nothing["belowFloor"] == 1
    # Words that mean nothing find nothing, over HTTP as over gRPC.
    for query in ("is the", "I", "of"):
        status, found = curl(address, V2["SearchHistory"], {"conversation": chat, "query": query})
        assert (status, found.get("hits", [])) == (200, []), query
    status, facts = curl(
        address,
        V2["Recall"],
        {"conversation": chat, "query": "What is the capital of Mongolia?"},
    )
    assert (status, facts.get("hits", [])) == (200, [])


def test_search_and_recall_say_what_meaning_could_not_see_yet(tmp_path: Path) -> None:
    """Over HTTP as over gRPC: a message the embedder has not reached is found by its words,
    and the answer counts it; the query's provider failing is UNAVAILABLE in semantic mode."""
    with FakeEmbeddings() as endpoint:
        config = HTTP_ON + embedding_config(endpoint)
        server = ServerProcess(tmp_path / "home", config=config).start()
        try:
            address = http_address(server)
            chat = {"channel": "curl", "chatId": "lessons", "ownerId": "ada"}

            def said(*texts: str) -> None:
                messages = [{"role": "ROLE_USER", "content": text} for text in texts]
                curl(address, V2["AppendMessages"], {"conversation": chat, "messages": messages})

            said("I adore jazz")
            for _ in range(1200):  # asked every 50 ms: a minute at most
                if not curl(address, V2["GetEmbeddingStatus"], {})[1].get("pendingMessages"):
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the fake endpoint's vectors never came")
            endpoint.hold("saxophone")
            said("jazz saxophone lessons", "more saxophone")
            status, found = curl(
                address, V2["SearchHistory"], {"conversation": chat, "query": "jazz"}
            )
            assert status == 200
            contents = {hit["message"]["content"] for hit in found["hits"]}
            assert {"I adore jazz", "jazz saxophone lessons"} <= contents
            assert found["unembedded"] == 2
            status, recalled = curl(
                address,
                V2["Recall"],
                {"conversation": chat, "query": "jazz", "source": "RECALL_SOURCE_HISTORY"},
            )
            assert (status, recalled["unembedded"]) == (200, 2)
            endpoint.fail(503, times=1_000_000)
            status, refused = curl(
                address,
                V2["SearchHistory"],
                {"conversation": chat, "query": "a new query", "mode": "SEARCH_MODE_SEMANTIC"},
            )
            assert status == 503
            assert refused["message"].startswith("the query could not be embedded")
        finally:
            endpoint.recover()
            assert server.stop() == 0, server.output
