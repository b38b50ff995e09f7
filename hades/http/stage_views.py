"""What a pipeline's ``GET /jobs/{id}``, logs and artifacts add: its stages, stage by stage."""

from __future__ import annotations

from typing import Any

from hades.core.logs import coalesce
from hades.core.reconcile import StageStatus, stage_views
from hades.core.state import JobState
from hades.http.services import ApiServices
from hades.http.views import iso


def stage_rows(services: ApiServices, state: JobState) -> list[dict[str, Any]]:
    """``stages`` of a pipeline's ``GET /jobs/{id}``: each stage with its job, status and times; a running stage's
    status is its job's own (Queued until an executor takes it)."""
    rows = []
    for view in stage_views(state):
        status = view.status.value
        if view.status is StageStatus.RUNNING and view.job_id is not None:
            job = services.jobs.get(view.job_id)
            status = job.status.value if job is not None else "Queued"
        rows.append(
            {
                "name": view.stage.name,
                "needs": list(view.needs),
                "job_id": view.job_id,
                "status": status,
                "reason": view.reason,
                "launched_at": iso(view.launched_at),
                "ended_at": iso(view.ended_at),
            }
        )
    return rows


def pipeline_fields(services: ApiServices, state: JobState) -> dict[str, Any]:
    """What a pipeline's view (``stages``) or a stage job's (``pipeline``) adds; nothing for other jobs."""
    if state.progress is not None:
        return {"stages": stage_rows(services, state)}
    if state.pipeline is not None:
        return {"pipeline": {"id": state.pipeline.id, "stage": state.pipeline.stage}}
    return {}


async def pipeline_logs(services: ApiServices, state: JobState) -> list[dict[str, Any]]:
    """Every launched stage's logs, stage by stage in launch order, each Log naming its ``stage``."""
    assert state.progress is not None
    logs = []
    for launch in state.progress.launched:
        for log in coalesce(await services.logs.read(launch.job_id)):
            logs.append({"stage": launch.name, **log.model_dump(mode="json", exclude={"step_id"})})
    return logs
