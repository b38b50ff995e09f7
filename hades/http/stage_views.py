"""What a pipeline's ``GET /jobs/{id}``, logs and artifacts add: its stages, stage by stage."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from litestar.response import ServerSentEventMessage

from hades.core.events import JobSubmitted
from hades.core.lifecycle import fold
from hades.core.reconcile import StageStatus, stage_views
from hades.core.stages import STAGE_NAME
from hades.core.state import JobState
from hades.http.follow import KEEPALIVE_SECONDS, Batch, Heartbeat, log_items
from hades.http.log_views import job_logs
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
    """Every launched stage's logs (the attempt its job is at), stage by stage in launch order, each Log naming its
    ``stage``."""
    assert state.progress is not None
    logs = []
    for launch in state.progress.launched:
        _, stage_logs = await job_logs(services, launch.job_id)
        logs += [{"stage": launch.name, **log.wire()} for log in stage_logs]
    return logs


async def pipeline_state(services: ApiServices, job_id: str) -> JobState | None:
    """The pipeline's whole state when ``job_id`` is a pipeline (one lookup of its first event otherwise)."""
    first = await services.store.submitted(job_id) if _is_uuid(job_id) else None
    if first is None or not isinstance(first.event, JobSubmitted) or not first.event.spec.is_pipeline:
        return None
    return fold([r.event for r in await services.store.history(job_id)])


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


#: How often a followed pipeline is looked at for its next launched stage or its end.
PIPELINE_POLL_SECONDS = 0.5


async def follow_pipeline(
    services: ApiServices, pipeline_id: str, last_event_id: str | None = None
) -> AsyncGenerator[ServerSentEventMessage, None]:
    """A pipeline's logs live: each launched stage's in launch order (``log`` events whose Log names its
    ``stage``; a stage's lines wait until the stages launched before it have ended), then one ``end`` event with the
    pipeline's status once it ended.

    Each ``log`` event's id is ``<stage>:<sequence>``: the stage and its batch's position in that stage's log. A
    client reconnecting with ``Last-Event-ID`` gets what came after it: the rest of that stage, then the stages
    launched after it (those before it were sent whole, since a stage is sent only once the one before it ended).
    An id that names no launched stage is ignored: the whole log again.
    """
    resume_stage, after = _resume_point(last_event_id)
    followed, quiet = 0, 0.0
    while True:
        state = await pipeline_state(services, pipeline_id)
        if state is None or state.progress is None:
            return
        launched = state.progress.launched
        if resume_stage is not None:
            names = [launch.name for launch in launched]
            followed = names.index(resume_stage) if resume_stage in names else 0
            after = after if resume_stage in names else 0
            resume_stage = None
        if followed < len(launched):
            launch = launched[followed]
            followed += 1
            async for frame in _follow_stage(services, launch.name, launch.job_id, after):
                yield frame
            after = 0
            continue
        if state.status.is_terminal:
            end = {"status": state.status.value, "reason": state.reason}
            yield ServerSentEventMessage(data=json.dumps(end), event="end")
            return
        if services.stopping.is_set():
            return  # the API stops: the client resumes (Last-Event-ID) on another replica, or after the restart
        await asyncio.sleep(PIPELINE_POLL_SECONDS)
        quiet += PIPELINE_POLL_SECONDS
        if quiet >= KEEPALIVE_SECONDS:
            quiet = 0.0
            yield ServerSentEventMessage(comment="keepalive", data=None)


def _resume_point(last_event_id: str | None) -> tuple[str | None, int]:
    """The stage and the position in its log a ``Last-Event-ID`` names; (None, 0) for none, or one not of ours."""
    stage, _, seq = (last_event_id or "").rpartition(":")
    if STAGE_NAME.fullmatch(stage) is None or not seq.isdigit() or len(seq) >= 20:
        return None, 0
    return stage, int(seq)


async def _follow_stage(
    services: ApiServices, stage: str, job_id: str, after: int = 0
) -> AsyncGenerator[ServerSentEventMessage, None]:
    """One stage's batches (those after ``after``, a position in its log) until its job ended and all were sent."""
    for _ in range(int(60 / PIPELINE_POLL_SECONDS)):  # its job is submitted just after its launch
        if services.jobs.get(job_id) is not None:
            break
        await asyncio.sleep(PIPELINE_POLL_SECONDS)
    else:
        return
    async for item in log_items(services, job_id, KEEPALIVE_SECONDS, after):
        if isinstance(item, Batch):
            data = {"stage": stage, **item.log.wire()}
            yield ServerSentEventMessage(data=json.dumps(data), event="log", id=f"{stage}:{item.seq}")
        elif isinstance(item, Heartbeat):
            yield ServerSentEventMessage(comment="keepalive", data=None)
