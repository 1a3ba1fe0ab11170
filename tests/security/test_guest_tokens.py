"""A token capped at guest trust (max_trust = "guest"), through the real server: it may not
change what an operator set up (rollbacks, jobs), its figures never trigger a compaction, and it
reads through no RPC what GetPromptContext and ComposeContext withhold from a guest."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess

ADMIN = "guest-test-admin-token-012345"
GUEST = "guest-test-guest-token-012345"
TOKENS = f"""
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
AS_ADMIN = (("authorization", f"Bearer {ADMIN}"),)
AS_GUEST = (("authorization", f"Bearer {GUEST}"),)


class Served:
    def __init__(self, channel: grpc.aio.Channel, model: FakeModel) -> None:
        self.memory = md.Stubs(channel)
        self.compaction = md.Stubs(channel)
        self.model = model


@pytest.fixture(scope="module")
def fake_model() -> Iterator[FakeModel]:
    with FakeModel() as model:
        yield model


@pytest.fixture(scope="module")
def guarded(
    tmp_path_factory: pytest.TempPathFactory, fake_model: FakeModel
) -> Iterator[ServerProcess]:
    home: Path = tmp_path_factory.mktemp("guests") / "home"
    config = review_config(fake_model, enabled=False) + TOKENS
    server = ServerProcess(home, config=config).start()
    yield server
    server.stop()


@pytest.fixture
async def served(guarded: ServerProcess, fake_model: FakeModel) -> AsyncIterator[Served]:
    async with grpc.aio.insecure_channel(guarded.address) as channel:
        yield Served(channel, fake_model)


def owner() -> md.OwnerScope:
    return md.OwnerScope(owner_id=f"owner-{uuid.uuid4().hex[:8]}")


async def denied(call: object) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, caught.value.details()
    return caught.value.details() or ""


async def test_a_guest_can_not_roll_back_the_operators_prompt_file(served: Served) -> None:
    scope = owner()
    memory = served.memory
    rule = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=scope, category=md.CATEGORY_DIRECTIVE, key="r", value="Never share the plans"
        ),
        metadata=AS_ADMIN,
    )
    await memory.memory.ArchiveMemory(
        md.ArchiveMemoryRequest(owner=scope, id=rule.memory.id), metadata=AS_ADMIN
    )
    ref = md.ResourceRef(type=md.RESOURCE_TYPE_MEMORY_MD, scope_id=scope.owner_id)
    details = await denied(
        memory.resources.RollbackResource(
            md.RollbackResourceRequest(ref=ref, revision=1), metadata=AS_GUEST
        )
    )
    assert "RollbackResource is not open to a token capped at guest trust" in details
    prompt = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(owner_id=scope.owner_id), metadata=AS_ADMIN
    )
    assert "Never share the plans" not in prompt.memory_md


async def test_a_guests_figures_never_trigger_a_compaction(served: Served) -> None:
    chat = md.Conversation(owner_id="figures", channel="telegram", chat_id=uuid.uuid4().hex)
    words = " ".join(["trip"] * 200)
    served.model.requests.clear()
    await served.memory.conversations.CommitTurn(
        md.CommitTurnRequest(
            conversation=chat,
            messages=[md.user("ada", words) for _ in range(4)],
            usage=md.TurnUsage(peak_prompt_tokens=500, context_window=100_000),
        ),
        metadata=AS_ADMIN,
    )
    await served.memory.conversations.CommitTurn(
        md.CommitTurnRequest(
            conversation=chat,
            messages=[md.user("eve", "from the group")],
            usage=md.TurnUsage(peak_prompt_tokens=1_000_000, context_window=400),
        ),
        metadata=AS_GUEST,
    )
    preflight = await served.compaction.context.Preflight(
        md.PreflightRequest(conversation=chat, context_window=400), metadata=AS_GUEST
    )
    assert preflight.outcome == md.COMPACTION_OUTCOME_SKIPPED, preflight
    assert preflight.trigger_tokens == 85_000  # the operator's reported window, not the guest's
    state = await served.compaction.context.GetCompactionState(
        md.GetCompactionStateRequest(conversation=chat), metadata=AS_ADMIN
    )
    assert state.peak_prompt_tokens == 500
    assert state.context_window == 100_000
    assert not state.HasField("checkpoint")
    assert not [r for r in served.model.requests if "summar" in str(r).lower()]
    await denied(
        served.compaction.context.Compact(md.CompactRequest(conversation=chat), metadata=AS_GUEST)
    )


async def test_a_guest_can_not_touch_the_operators_scheduled_jobs(served: Served) -> None:
    scope = owner()
    await served.memory.memory.StoreMemory(
        md.StoreMemoryRequest(owner=scope, job_id="digest", run_id="r1", key="k", value="v"),
        metadata=AS_ADMIN,
    )
    await denied(
        served.memory.memory.SetJobStatus(
            md.SetJobStatusRequest(owner=scope, job_id="digest", status=md.JOB_STATUS_DELETED),
            metadata=AS_GUEST,
        )
    )
    await denied(
        served.memory.memory.FinishJobRun(
            md.FinishJobRunRequest(
                owner=scope,
                job_id="digest",
                run_id="r1",
                outcome=md.JOB_RUN_OUTCOME_SUCCEEDED,
                summary="claimed by a guest",
            ),
            metadata=AS_GUEST,
        )
    )
    sources = await served.memory.memory.ListMemorySources(
        md.ListMemorySourcesRequest(owner=scope, source_type="scheduled_job"), metadata=AS_ADMIN
    )
    assert [source.status for source in sources.sources] == ["active"]
    summaries = await served.memory.memory.ListMemories(
        md.ListMemoriesRequest(
            owner=scope, job_id="digest", categories=[md.CATEGORY_JOB_RUN_SUMMARY]
        ),
        metadata=AS_ADMIN,
    )
    assert list(summaries.memories) == []


async def test_a_guest_reads_nothing_that_the_prompt_withholds_from_it(served: Served) -> None:
    memory = served.memory
    scope = owner()
    chat = md.Conversation(owner_id=scope.owner_id, channel="telegram", chat_id="group")
    await memory.conversations.AppendMessages(
        md.AppendMessagesRequest(conversation=chat, messages=[md.user("ada", "plans for Lisbon")]),
        metadata=AS_ADMIN,
    )
    rows = {}
    for name, request in {
        "directive": md.StoreMemoryRequest(
            owner=scope, category=md.CATEGORY_DIRECTIVE, key="d", value="Lisbon plans are secret"
        ),
        "identity": md.StoreMemoryRequest(
            owner=scope, category=md.CATEGORY_IDENTITY, key="i", value="Ada lives in Lisbon"
        ),
        "context": md.StoreMemoryRequest(
            conversation=chat,
            scope_type=md.SCOPE_TYPE_CONVERSATION,
            category=md.CATEGORY_CONTEXT,
            key="c",
            value="Lisbon trip in May",
        ),
        "operator note": md.StoreMemoryRequest(conversation=chat, key="o", value="Lisbon hotel"),
    }.items():
        rows[name] = (await memory.memory.StoreMemory(request, metadata=AS_ADMIN)).memory.id
    note = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(conversation=chat, key="g", value="Lisbon was mentioned"),
        metadata=AS_GUEST,
    )
    assert note.memory.trust == md.TRUST_GUEST
    # The prompt withholds the memory block.
    prompt = await memory.context.GetPromptContext(
        md.GetPromptContextRequest(owner_id=scope.owner_id), metadata=AS_GUEST
    )
    assert prompt.withheld
    assert (prompt.user_md, prompt.memory_md) == ("", "")
    # Rows: only the conversation's notes, never a row that renders into a prompt file.
    listed = await memory.memory.ListMemories(
        md.ListMemoriesRequest(conversation=chat), metadata=AS_GUEST
    )
    assert sorted(item.memory.id for item in listed.memories) == sorted(
        [rows["operator note"], note.memory.id]
    )
    await denied(memory.memory.ListMemories(md.ListMemoriesRequest(owner=scope), metadata=AS_GUEST))
    for name in ("directive", "identity", "context"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await memory.memory.GetMemory(
                md.GetMemoryRequest(conversation=chat, id=rows[name]), metadata=AS_GUEST
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND, name
    recalled = await memory.memory.Recall(
        md.RecallRequest(
            conversation=chat,
            query="Lisbon",
            source=md.RECALL_SOURCE_ALL,
            mode=md.SEARCH_MODE_LEXICAL,  # what the words find, whatever the embedder did yet
        ),
        metadata=AS_GUEST,
    )
    found = {hit.memory.id for hit in recalled.hits if hit.HasField("memory")}
    assert found == {rows["operator note"], note.memory.id}
    assert any(hit.HasField("message") for hit in recalled.hits)  # the conversation's words
    for scope_value in (md.RECALL_SCOPE_OWNER, md.RECALL_SCOPE_ALL):
        await denied(
            memory.memory.Recall(
                md.RecallRequest(conversation=chat, query="Lisbon", scope=scope_value),
                metadata=AS_GUEST,
            )
        )
    # An adapter without the cap, recalling for a guest speaker, gets the same view.
    for_guest = await memory.memory.Recall(
        md.RecallRequest(conversation=chat, query="Lisbon", trust=md.TRUST_GUEST),
        metadata=AS_ADMIN,
    )
    assert {hit.memory.id for hit in for_guest.hits} == {rows["operator note"], note.memory.id}
    # History: one conversation, never an owner's or the agent's.
    hits = await memory.conversations.SearchHistory(
        md.SearchHistoryRequest(query="Lisbon", conversation=chat), metadata=AS_GUEST
    )
    assert [hit.message.content for hit in hits.hits] == ["plans for Lisbon"]
    await denied(
        memory.conversations.SearchHistory(
            md.SearchHistoryRequest(query="Lisbon", owner=scope), metadata=AS_GUEST
        )
    )
    await denied(
        memory.conversations.SearchHistory(
            md.SearchHistoryRequest(query="Lisbon", agent=md.AgentScope()), metadata=AS_GUEST
        )
    )
    # Prompt files and their revisions.
    ref = md.ResourceRef(type=md.RESOURCE_TYPE_USER_MD, scope_id=scope.owner_id)
    for call in (
        memory.resources.ListResources(md.ListResourcesRequest(), metadata=AS_GUEST),
        memory.resources.ListRevisions(md.ListRevisionsRequest(ref=ref), metadata=AS_GUEST),
        memory.resources.GetRevision(md.GetRevisionRequest(ref=ref), metadata=AS_GUEST),
        memory.resources.DiffRevisions(
            md.DiffRevisionsRequest(ref=ref, from_revision=1, to_revision=1), metadata=AS_GUEST
        ),
    ):
        await denied(call)
    # Changes: only what a guest wrote.
    details = await denied(
        memory.memory.UpdateMemory(
            md.UpdateMemoryRequest(conversation=chat, id=rows["operator note"], value="mine now"),
            metadata=AS_GUEST,
        )
    )
    assert "an operator wrote it" in details
    changed = await memory.memory.UpdateMemory(
        md.UpdateMemoryRequest(conversation=chat, id=note.memory.id, value="Lisbon, twice"),
        metadata=AS_GUEST,
    )
    assert changed.memory.value == "Lisbon, twice"
