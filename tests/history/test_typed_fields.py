"""The enum fields beside the deprecated strings (source type and state, a run's outcome) and
ListRevisions' page tokens, through the real server: both forms agree, either works alone, and
a contradiction or a forged token is refused with the field named."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest

import memoryd_client as md


def fresh_owner() -> md.OwnerScope:
    return md.OwnerScope(agent_id="main", owner_id=f"typed-{uuid.uuid4().hex[:10]}")


async def refusal(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return caught.value


async def test_sources_carry_their_type_and_state_as_enums(memory: md.Stubs) -> None:
    owner = fresh_owner()
    stored = await memory.memory.StoreMemory(
        md.StoreMemoryRequest(
            owner=owner, job_id="digest", run_id="r1", category=md.CATEGORY_GOAL, key="k", value="v"
        )
    )
    assert stored.memory.provenance.type == md.SOURCE_TYPE_SCHEDULED_JOB
    assert stored.memory.provenance.source_type == "scheduled_job"
    await memory.memory.StoreMemory(
        md.StoreMemoryRequest(owner=owner, scope_type=md.SCOPE_TYPE_AGENT, value="an api fact")
    )
    await memory.memory.SetJobStatus(
        md.SetJobStatusRequest(owner=owner, job_id="digest", status=md.JOB_STATUS_PAUSED)
    )
    every = await memory.memory.ListMemorySources(md.ListMemorySourcesRequest(owner=owner))
    kinds = {(s.type, s.source_type, s.state, s.status) for s in every.sources}
    assert kinds == {
        (md.SOURCE_TYPE_SCHEDULED_JOB, "scheduled_job", md.SOURCE_STATE_PAUSED, "paused"),
        (md.SOURCE_TYPE_API, "api", md.SOURCE_STATE_ACTIVE, "active"),
    }
    # Filters: by the enum, by the deprecated text, or both when they agree.
    for request in (
        md.ListMemorySourcesRequest(owner=owner, type=md.SOURCE_TYPE_SCHEDULED_JOB),
        md.ListMemorySourcesRequest(owner=owner, source_type="scheduled_job"),
        md.ListMemorySourcesRequest(
            owner=owner, type=md.SOURCE_TYPE_SCHEDULED_JOB, source_type="scheduled_job"
        ),
        md.ListMemorySourcesRequest(owner=owner, state=md.SOURCE_STATE_PAUSED),
        md.ListMemorySourcesRequest(owner=owner, status="paused"),
    ):
        found = await memory.memory.ListMemorySources(request)
        assert [s.id for s in found.sources] == ["job:digest"], request
    active = await memory.memory.ListMemorySources(
        md.ListMemorySourcesRequest(owner=owner, state=md.SOURCE_STATE_ACTIVE)
    )
    assert [s.type for s in active.sources] == [md.SOURCE_TYPE_API]


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"type": md.SOURCE_TYPE_API, "source_type": "scheduled_job"},
            "type",
            "source_type 'scheduled_job' and type disagree; set type alone",
        ),
        (
            {"state": md.SOURCE_STATE_ACTIVE, "status": "paused"},
            "state",
            "status 'paused' and state disagree; set state alone",
        ),
        ({"source_type": "robot"}, "source_type", "source_type must be one of conversation, api"),
        ({"type": 99}, "type", "type has unknown value 99"),
    ],
)
async def test_contradicting_or_unknown_filters_are_refused(
    memory: md.Stubs, fields: dict[str, Any], field: str, message: str
) -> None:
    error = await refusal(
        memory.memory.ListMemorySources(md.ListMemorySourcesRequest(owner=fresh_owner(), **fields))
    )
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert message in (error.details() or "")
    details = md.error_details(error)
    assert details is not None
    assert details.field == field


async def test_a_finished_run_says_its_outcome_as_an_enum(memory: md.Stubs) -> None:
    owner = fresh_owner()
    for run, outcome, text in (
        ("r1", md.JOB_RUN_OUTCOME_SUCCEEDED, "succeeded"),
        ("r2", md.JOB_RUN_OUTCOME_FAILED, "failed"),
    ):
        finished = await memory.memory.FinishJobRun(
            md.FinishJobRunRequest(owner=owner, job_id="digest", run_id=run, outcome=outcome)
        )
        assert (finished.outcome, finished.status) == (outcome, text)


async def test_revisions_page_with_tokens_and_the_old_fields_still_work(
    memory: md.Stubs,
) -> None:
    owner = fresh_owner()
    for index in range(7):
        await memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=owner, category=md.CATEGORY_PREFERENCE, key=f"k{index}", value=f"v{index}"
            )
        )
    ref = md.ResourceRef(agent_id="main", type=md.RESOURCE_TYPE_USER_MD, scope_id=owner.owner_id)
    pages: list[list[int]] = []
    token = ""
    while True:
        page = await memory.resources.ListRevisions(
            md.ListRevisionsRequest(ref=ref, page_size=3, page_token=token)
        )
        pages.append([revision.revision for revision in page.revisions])
        token = page.next_page_token
        if not token:
            assert page.next_before_revision == 0
            break
        assert page.next_before_revision == pages[-1][-1]
    assert pages == [[7, 6, 5], [4, 3, 2], [1]]
    # The deprecated fields page the same way.
    old = await memory.resources.ListRevisions(
        md.ListRevisionsRequest(ref=ref, limit=3, before_revision=5)
    )
    assert [revision.revision for revision in old.revisions] == [4, 3, 2]
    # A token of another resource, a forged one, or a token with before_revision are refused.
    other = md.ResourceRef(agent_id="main", type=md.RESOURCE_TYPE_MEMORY_MD, scope_id="x")
    first = await memory.resources.ListRevisions(md.ListRevisionsRequest(ref=ref, page_size=3))
    for request, field in (
        (md.ListRevisionsRequest(ref=other, page_token=first.next_page_token), "page_token"),
        (md.ListRevisionsRequest(ref=ref, page_token="forged.token"), "page_token"),
        (
            md.ListRevisionsRequest(ref=ref, page_token=first.next_page_token, before_revision=3),
            "before_revision",
        ),
        (md.ListRevisionsRequest(ref=ref, page_size=1001), "page_size"),
    ):
        error = await refusal(memory.resources.ListRevisions(request))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, request
        details = md.error_details(error)
        assert details is not None
        assert details.field == field, (request, error.details())
