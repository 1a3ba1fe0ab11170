"""The scheduled-job RPCs of memoryd.v1.MemoryService: SetJobStatus, FinishJobRun."""

from __future__ import annotations

from memoryd.api import convert
from memoryd.api import memory_convert as mc
from memoryd.api.context import Context
from memoryd.api.enum_tables import JOB_RUN_OUTCOME, JOB_STATUS
from memoryd.domain.conversation import check_identifier, owner_key
from memoryd.domain.jobs import RunOutcome
from memoryd.domain.memories import Caller, check_job_id
from memoryd.errors import InvalidArgument, Reason
from memoryd.services.jobs import JobService
from memoryd_client.v1 import memory_service_pb2 as service_pb


class JobRpcs:
    """SetJobStatus, FinishJobRun."""

    def __init__(self, jobs: JobService) -> None:
        self._jobs = jobs

    async def SetJobStatus(
        self, request: service_pb.SetJobStatusRequest, context: Context
    ) -> service_pb.SetJobStatusResponse:
        owner = owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
        job_id = _required_job_id(request.job_id)
        status = JOB_STATUS.value(request.status, "status")
        source = await self._jobs.set_status(owner, job_id, status)
        response = service_pb.SetJobStatusResponse()
        mc.fill_source(response.source, source)
        return response

    async def FinishJobRun(
        self, request: service_pb.FinishJobRunRequest, context: Context
    ) -> service_pb.FinishJobRunResponse:
        owner = owner_key(agent_id=request.owner.agent_id, owner_id=request.owner.owner_id)
        job_id = _required_job_id(request.job_id)
        run_id = check_identifier(request.run_id, "run_id")
        if not run_id:
            raise InvalidArgument("run_id is required", reason=Reason.REQUIRED, field="run_id")
        outcome = JOB_RUN_OUTCOME.value(request.outcome, "outcome")
        finished = await self._jobs.finish_run(
            Caller(owner, None, job_id), run_id, outcome, request.summary
        )
        run = finished.run
        response = service_pb.FinishJobRunResponse(
            status=run.status,
            outcome=JOB_RUN_OUTCOME.number(RunOutcome(run.status)),
            started_at=convert.timestamp_out(run.started_at),
        )
        if run.finished_at is not None:
            convert.set_timestamp(response.finished_at, run.finished_at)
        if finished.summary is not None:
            mc.fill_memory(response.summary, finished.summary)
        return response


def _required_job_id(value: str) -> str:
    job_id = check_job_id(value)
    if job_id is None:
        raise InvalidArgument("job_id is required", reason=Reason.REQUIRED, field="job_id")
    return job_id
