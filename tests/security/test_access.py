"""Access declared in the contract, and the red team's matrix through the real server.

Every RPC of memoryd.v2 and of memoryd.v1 (routed to it), the streams included, is called with
no token, a forged token, an adapter of agent main aiming at agent other, a token of main capped
at guest trust, and an admin of main only (aiming at other, and at every agent where a request
can). The expected status of each case comes from the RPC's declared access (memoryd.v2.access),
and an export of agent other, taken before and after each RPC's cases, shows that none of them
changed anything of it; no answer to an admitted call holds any of its text.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2

import memoryd_client as md
from memoryd.api import contract
from memoryd.api.access import Declared, declarations, declared, markdown_table
from memoryd.errors import StartupError
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess
from memoryd_client.v1 import access_pb2 as v1_access_pb2
from tests.helpers import client_stream, rpc_error

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "access-admin-token-0123456789"
MAIN = "access-main-adapter-token-0123"
MAIN_GUEST = "access-main-guest-token-01234"
MAIN_ADMIN = "access-main-admin-token-012345"
FORGED = "forged-token-0123456789abcdef"
SECRET = "OTHER-SECRET-7f3a"  # every text of agent other holds it
TOKENS = f"""
[memoryd.realtime]
persist_transcripts = true

[[memoryd.auth.tokens]]
token = "{ADMIN}"
role = "admin"
agents = ["*"]

[[memoryd.auth.tokens]]
token = "{MAIN}"
role = "adapter"
agents = ["main"]

[[memoryd.auth.tokens]]
token = "{MAIN_GUEST}"
role = "adapter"
agents = ["main"]
max_trust = "guest"

[[memoryd.auth.tokens]]
token = "{MAIN_ADMIN}"
role = "admin"
agents = ["main"]
"""
# memoryd.v2's RPCs, then memoryd.v1's (routed to them): the matrix runs through both.
CURRENT: list[MethodDescriptor] = list(contract.methods())
METHODS: list[MethodDescriptor] = [*CURRENT, *contract.legacy_methods()]
ACCESS = contract.routed(declarations(CURRENT))
ADMITTED_NOT = (
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
)


def access_of(method: MethodDescriptor) -> Declared:
    return ACCESS[f"/{method.containing_service.full_name}/{method.name}"]


# --- the declarations ----------------------------------------------------------------------------


def test_every_rpc_declares_its_access_and_reads_are_marked_as_such() -> None:
    for method in CURRENT:
        access = declared(method)
        no_side_effects = (
            method.GetOptions().idempotency_level == method.GetOptions().NO_SIDE_EFFECTS
        )
        if no_side_effects:
            assert not access.writes, method.name
        elif not access.writes:  # a read that is not marked: only a stream may be
            assert method.server_streaming, method.name
    assert len(CURRENT) == 46  # 45 served by memoryd.v1 too, and PurgeMessages
    assert len(ACCESS) == len(METHODS) == 91


def test_memoryd_v1_declares_what_its_routed_paths_are_held_to() -> None:
    """memoryd.v1's own declarations (its protos still document them) are those of the
    memoryd.v2 RPC each path is routed to."""
    callers = {v1_access_pb2.CALLER_ROLE_ADAPTER: False, v1_access_pb2.CALLER_ROLE_ADMIN: True}
    for method in contract.legacy_methods():
        own = method.GetOptions().Extensions[v1_access_pb2.access]
        routed = access_of(method)
        assert routed.service.startswith("memoryd.v2."), method.name
        assert callers[own.caller] == routed.admin_only, method.name
        assert (own.writes, own.guests) == (routed.writes, routed.guests), method.name
        assert v1_access_pb2.Reach.Name(own.reach) == f"REACH_{routed.reach.name}", method.name


def test_an_admin_rpc_is_an_admin_service_rpc() -> None:
    """Who may call is a service's declaration: every admin-only RPC is AdminService's, and
    every RPC of AdminService is admin-only."""
    for method in CURRENT:
        access = declared(method)
        assert access.admin_only == (access.service == "memoryd.v2.AdminService"), method.name


def test_an_rpc_without_a_declaration_stops_the_start() -> None:
    # upb's descriptor type is protobuf's at run time; its stubs name it apart.
    check = cast(
        "MethodDescriptor",
        health_pb2.DESCRIPTOR.services_by_name["Health"].methods_by_name["Check"],
    )
    with pytest.raises(StartupError) as caught:
        declared(check)
    assert "grpc.health.v1.Health declares no caller" in str(caught.value)


def test_the_security_page_table_is_the_declarations() -> None:
    page = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    start, end = "<!-- access:start -->\n", "\n<!-- access:end -->"
    assert start in page, "docs/security.md has no access table (scripts/gen_docs.py)"
    current = page.split(start, 1)[1].split(end, 1)[0]
    assert current == markdown_table(declarations(CURRENT).values()), (
        "the access table of docs/security.md is stale: run .venv/bin/python scripts/gen_docs.py"
    )


# --- the server and its data ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Target:
    """What one agent's requests name: its conversation, owner, a note, a job, a resource."""

    agent: str
    owner: str
    conversation: md.Conversation
    throwaway: md.Conversation
    note_id: int
    operator_note_id: int
    job_id: str

    @property
    def operators(self) -> Target:
        """The same, naming the note an operator wrote (a guest's is the guest's to change)."""
        return dataclasses.replace(self, note_id=self.operator_note_id)

    @property
    def owner_scope(self) -> md.OwnerScope:
        return md.OwnerScope(agent_id=self.agent, owner_id=self.owner)

    @property
    def user_md(self) -> md.ResourceRef:
        return md.ResourceRef(
            agent_id=self.agent, type=md.RESOURCE_TYPE_USER_MD, scope_id=self.owner
        )


def bearer(token: str | None) -> tuple[tuple[str, str], ...] | None:
    return (("authorization", f"Bearer {token}"),) if token is not None else None


@pytest.fixture(scope="module")
def fake_model() -> Iterator[FakeModel]:
    with FakeModel() as model:
        yield model


@pytest.fixture(scope="module")
def guarded(
    tmp_path_factory: pytest.TempPathFactory, fake_model: FakeModel
) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("access") / "home"
    config = review_config(fake_model, enabled=False) + TOKENS
    server = ServerProcess(home, config=config).start()
    yield server
    server.stop()


async def seed(memory: md.Stubs, agent: str, token: str, guest: str | None) -> Target:
    """Messages, a note (written by `guest` when given), an identity (USER.md revision 1), a
    directive and a scheduled job of one owner of `agent`."""
    owner = "victim" if agent == "other" else "ada"
    chat = md.Conversation(agent_id=agent, owner_id=owner, channel="telegram", chat_id="c1")
    text = f"{SECRET} what {agent} said" if agent == "other" else f"what {agent} said"
    auth = bearer(token)
    turn = md.CommitTurnRequest(
        conversation=chat,
        messages=[md.user("ada", text), md.assistant("assistant", "noted")],
        usage=md.TurnUsage(peak_prompt_tokens=100, context_window=100_000),
    )
    await memory.conversations.CommitTurn(turn, metadata=auth)
    note = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(conversation=chat, key="note", value=f"{text} as a note"),
        metadata=bearer(guest) if guest else auth,
    )
    operator_note = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(conversation=chat, key="operator", value=f"{text} as a fact"),
        metadata=auth,
    )
    owner_scope = md.OwnerScope(agent_id=agent, owner_id=owner)
    for category, value in (
        (md.CATEGORY_IDENTITY, f"{text}: identity"),
        (md.CATEGORY_DIRECTIVE, f"{text}: rule"),
    ):
        await memory.memory.StoreMemory(
            md.StoreMemoryRequest(owner=owner_scope, category=category, key="k", value=value),
            metadata=auth,
        )
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=owner_scope, job_id="job1", run_id="run-0", key="j", value=text
        ),
        metadata=auth,
    )
    throwaway = md.Conversation(
        agent_id=agent, owner_id="throwaway", channel="telegram", chat_id="t"
    )
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(conversation=throwaway, messages=[md.user("ada", text)]),
        metadata=auth,
    )
    return Target(
        agent=agent,
        owner=owner,
        conversation=chat,
        throwaway=throwaway,
        note_id=note.memory.id,
        operator_note_id=operator_note.memory.id,
        job_id="job1",
    )


@pytest.fixture(scope="module")
async def world(
    guarded: ServerProcess,
) -> AsyncIterator[tuple[md.Stubs, Target, Target]]:
    async with grpc.aio.insecure_channel(guarded.address) as channel:
        memory = md.Stubs(channel)
        other = await seed(memory, "other", ADMIN, None)
        main = await seed(memory, "main", MAIN, MAIN_GUEST)
        yield memory, other, main


# --- one request per RPC, aimed at a target ------------------------------------------------------


def lines_for(agent: str) -> list[str]:
    header = {"format": "memoryd-export", "version": 2, "agent_id": agent, "owner_id": ""}
    return [json.dumps(header)]


Builder = Callable[[Target], Message | list[Message]]
REQUESTS: dict[str, Builder] = {
    "AppendMessages": lambda t: md.AppendMessagesRequest(
        conversation=t.conversation, messages=[md.user("eve", "appended")]
    ),
    "IngestMessages": lambda t: [
        md.IngestMessagesRequest(
            messages=[md.IngestedMessage(conversation=t.conversation, message=md.user("eve", "in"))]
        )
    ],
    "StreamTranscript": lambda t: [
        md.StreamTranscriptRequest(
            open=md.TranscriptOpen(
                device_id="d1", session_id=uuid.uuid4().hex, agent_id=t.agent, owner_id=t.owner
            )
        )
    ],
    "ExportData": lambda t: md.ExportDataRequest(agent_id=t.agent),
    "ImportData": lambda t: [md.ImportDataRequest(lines=lines_for(t.agent))],
    "ListMessages": lambda t: md.ListMessagesRequest(conversation=t.conversation),
    "SearchHistory": lambda t: md.SearchHistoryRequest(query="said", conversation=t.conversation),
    "ClearConversation": lambda t: md.ClearConversationRequest(conversation=t.throwaway),
    "PurgeConversation": lambda t: md.PurgeConversationRequest(conversation=t.throwaway),
    "PurgeMessages": lambda t: md.PurgeMessagesRequest(conversation=t.throwaway, message_ids=[1]),
    "PurgeOwner": lambda t: md.PurgeOwnerRequest(agent_id=t.agent, owner_id="throwaway"),
    "GetConversation": lambda t: md.GetConversationRequest(conversation=t.conversation),
    # A key of its own each time: the row a guest writes, an operator's call then replaces,
    # and the next version's round must not meet an operator's row.
    "StoreMemory": lambda t: md.StoreMemoryRequest(
        conversation=t.conversation, key=f"eve-{uuid.uuid4().hex[:8]}", value="stored"
    ),
    "GetMemory": lambda t: md.GetMemoryRequest(conversation=t.conversation, id=t.note_id),
    "ListMemories": lambda t: md.ListMemoriesRequest(
        conversation=t.conversation, scope_type=md.SCOPE_TYPE_CONVERSATION
    ),
    "UpdateMemory": lambda t: md.UpdateMemoryRequest(
        conversation=t.conversation, id=t.note_id, value="changed"
    ),
    "ArchiveMemory": lambda t: md.ArchiveMemoryRequest(conversation=t.conversation, id=t.note_id),
    "RestoreMemory": lambda t: md.RestoreMemoryRequest(conversation=t.conversation, id=t.note_id),
    "DeleteMemory": lambda t: md.DeleteMemoryRequest(conversation=t.conversation, id=t.note_id),
    "Recall": lambda t: md.RecallRequest(conversation=t.conversation, query="said"),
    "ListMemorySources": lambda t: md.ListMemorySourcesRequest(owner=t.owner_scope),
    "SetJobStatus": lambda t: md.SetJobStatusRequest(
        owner=t.owner_scope, job_id=t.job_id, status=md.JOB_STATUS_PAUSED
    ),
    "FinishJobRun": lambda t: md.FinishJobRunRequest(
        owner=t.owner_scope,
        job_id=t.job_id,
        run_id="run-1",
        outcome=md.JOB_RUN_OUTCOME_SUCCEEDED,
        summary="done",
    ),
    "GetPromptContext": lambda t: md.GetPromptContextRequest(agent_id=t.agent, owner_id=t.owner),
    "ListResources": lambda t: md.ListResourcesRequest(agent_id=t.agent),
    "ListRevisions": lambda t: md.ListRevisionsRequest(ref=t.user_md),
    "GetRevision": lambda t: md.GetRevisionRequest(ref=t.user_md, revision=1),
    "DiffRevisions": lambda t: md.DiffRevisionsRequest(
        ref=t.user_md, from_revision=1, to_revision=1
    ),
    "RollbackResource": lambda t: md.RollbackResourceRequest(ref=t.user_md, revision=1),
    "CommitTurn": lambda t: md.CommitTurnRequest(
        conversation=t.conversation, messages=[md.user("eve", "a turn")]
    ),
    "ReviewNow": lambda t: md.ReviewNowRequest(conversation=t.conversation),
    "GetReviewState": lambda t: md.GetReviewStateRequest(conversation=t.conversation),
    "ListReviewRuns": lambda t: md.ListReviewRunsRequest(conversation=t.conversation),
    "GetReviewExchange": lambda t: md.GetReviewExchangeRequest(
        conversation=t.conversation, run_id=1
    ),
    "ListOwners": lambda t: md.ListOwnersRequest(agent_id=t.conversation.agent_id),
    "GetServerInfo": lambda _t: md.GetServerInfoRequest(),
    "GetActivity": lambda t: md.GetActivityRequest(owner=t.owner_scope),
    "UpdateReviewSettings": lambda _t: md.UpdateReviewSettingsRequest(
        triggers=md.ReviewTriggers(enabled=False, review_interval_hours=24)
    ),
    "ListConversations": lambda t: md.ListConversationsRequest(owner=t.owner_scope),
    "GetMessage": lambda t: md.GetMessageRequest(owner=t.owner_scope, id=1),
    "GetEmbeddingStatus": lambda _t: md.GetEmbeddingStatusRequest(),
    "ReindexEmbeddings": lambda _t: md.ReindexEmbeddingsRequest(),
    "ComposeContext": lambda t: md.ComposeContextRequest(conversation=t.conversation),
    "Preflight": lambda t: md.PreflightRequest(conversation=t.conversation),
    "Compact": lambda t: md.CompactRequest(conversation=t.conversation),
    "GetCompactionState": lambda t: md.GetCompactionStateRequest(conversation=t.conversation),
}
# Requests that reach every agent (an empty agent_id where that means every agent).
EVERY_AGENT: dict[str, list[Callable[[], Message | list[Message]]]] = {
    "ReviewNow": [md.ReviewNowRequest, lambda: md.ReviewNowRequest(owner_id="victim")],
    "ExportData": [md.ExportDataRequest, lambda: md.ExportDataRequest(owner_id="victim")],
    "ImportData": [lambda: [md.ImportDataRequest(lines=lines_for("main"))]],
    "GetEmbeddingStatus": [md.GetEmbeddingStatusRequest],
    "ReindexEmbeddings": [md.ReindexEmbeddingsRequest],
    "GetServerInfo": [md.GetServerInfoRequest],
    "GetActivity": [md.GetActivityRequest],
    "UpdateReviewSettings": [md.UpdateReviewSettingsRequest],
}
# The RPCs whose every request reaches every agent: only a token for every agent calls them.
WHOLE_DATABASE = (
    "ImportData",
    "GetEmbeddingStatus",
    "ReindexEmbeddings",
    "GetServerInfo",
    "UpdateReviewSettings",
)


def test_every_rpc_has_a_request_in_the_matrix() -> None:
    assert set(REQUESTS) == {method.name for method in METHODS}
    assert set(EVERY_AGENT) == {a.name for a in ACCESS.values() if a.reach.value == "every agent"}


@dataclasses.dataclass
class Outcome:
    code: grpc.StatusCode
    details: str
    answers: bytes


async def call(
    channel: grpc.aio.Channel,
    address: str,
    method: MethodDescriptor,
    built: Message | list[Message],
    token: str | None,
) -> Outcome:
    """Call `method` with the request (a list for a client stream); its status and answers."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    requests = built if isinstance(built, list) else [built]
    serialize = type(requests[0]).SerializeToString
    options: dict[str, Any] = {"metadata": bearer(token), "timeout": 15}
    answers = b""
    if method.client_streaming:  # the synchronous client reports the server's status
        code, details, answers = await asyncio.to_thread(
            client_stream,
            address,
            path,
            [request.SerializeToString() for request in requests],
            server_streaming=method.server_streaming,
            metadata=options["metadata"],
        )
        return Outcome(code, details, answers)

    try:
        if method.server_streaming:
            streaming: grpc.aio.UnaryStreamMultiCallable[Message, bytes]
            streaming = channel.unary_stream(path, request_serializer=serialize)
            rpc = streaming(requests[0], **options)
            async for answer in rpc:
                answers += answer
            rpc.cancel()
        else:
            unary: grpc.aio.UnaryUnaryMultiCallable[Message, bytes]
            unary = channel.unary_unary(path, request_serializer=serialize)
            answers = await unary(requests[0], **options)
    except grpc.aio.AioRpcError as error:
        return Outcome(error.code(), error.details() or "", answers)
    return Outcome(grpc.StatusCode.OK, "", answers)


async def export_of(memory: md.Stubs, agent: str) -> list[str]:
    lines: list[str] = []
    async for chunk in memory.admin.ExportData(
        md.ExportDataRequest(agent_id=agent), metadata=bearer(ADMIN)
    ):
        lines.extend(chunk.lines)
    return lines


@pytest.mark.parametrize(
    "method", METHODS, ids=lambda method: f"{method.containing_service.full_name}.{method.name}"
)
async def test_the_red_team_matrix(
    guarded: ServerProcess,
    world: tuple[md.Stubs, Target, Target],
    method: MethodDescriptor,
) -> None:
    memory, other, main = world
    access = access_of(method)
    build = REQUESTS[method.name]
    before = await export_of(memory, "other")
    async with grpc.aio.insecure_channel(guarded.address) as channel:
        # Refused: no token, a forged one, main's adapter and main's admin aiming at other.
        for token in (None, FORGED):
            refused = await call(channel, guarded.address, method, build(other), token)
            assert refused.code == grpc.StatusCode.UNAUTHENTICATED, (token, refused)
        for token in (MAIN, MAIN_ADMIN, MAIN_GUEST):
            refused = await call(channel, guarded.address, method, build(other), token)
            assert refused.code == grpc.StatusCode.PERMISSION_DENIED, (token, refused)
        for every in EVERY_AGENT.get(method.name, []):
            for token in (MAIN, MAIN_ADMIN, MAIN_GUEST):
                refused = await call(channel, guarded.address, method, every(), token)
                assert refused.code == grpc.StatusCode.PERMISSION_DENIED, (token, refused)
                if token == MAIN_ADMIN:
                    assert "needs a token for every agent" in refused.details, refused
        # Aimed at main: the guest-capped token as declared, then main's own tokens.
        guest = await call(channel, guarded.address, method, build(main), MAIN_GUEST)
        if access.guests:
            assert guest.code not in ADMITTED_NOT, guest
        else:
            assert guest.code == grpc.StatusCode.PERMISSION_DENIED, guest
            if not access.admin_only:  # an admin's call is refused for its role first
                assert "is not open to a token capped at guest trust" in guest.details, guest
        mine = build(main.operators)
        own = await call(
            channel, guarded.address, method, mine, MAIN_ADMIN if access.admin_only else MAIN
        )
        if method.name in WHOLE_DATABASE:
            assert own.code == grpc.StatusCode.PERMISSION_DENIED, own
            own = await call(channel, guarded.address, method, mine, ADMIN)
        assert own.code not in ADMITTED_NOT, own
        if access.admin_only:
            adapter = await call(channel, guarded.address, method, mine, MAIN)
            assert adapter.code == grpc.StatusCode.PERMISSION_DENIED, adapter
            assert "is an admin's call" in adapter.details
        for outcome in (guest, own):
            assert SECRET.encode() not in outcome.answers
    assert await export_of(memory, "other") == before, "a refused call changed agent other"


async def test_an_owners_recall_is_held_to_the_tokens_agents(
    guarded: ServerProcess, world: tuple[md.Stubs, Target, Target]
) -> None:
    """Recall by owner (no conversation) names its agent in the owner: main's tokens may not
    read other's rows that way, and a guest-capped token is refused whichever agent."""
    _, other, main = world
    async with md.connect(guarded.address) as channel:
        memory = md.Stubs(channel)
        for token, target in ((MAIN, other), (MAIN_ADMIN, other), (MAIN_GUEST, main)):
            error = await rpc_error(
                memory.memory.Recall(
                    md.RecallRequest(owner=target.owner_scope, query=SECRET),
                    metadata=bearer(token),
                )
            )
            assert error.code() == grpc.StatusCode.PERMISSION_DENIED, (token, error.details())
            assert SECRET not in (error.details() or "")
        found = await memory.memory.Recall(
            md.RecallRequest(owner=other.owner_scope, query=SECRET), metadata=bearer(ADMIN)
        )
        assert found.hits
