"""The scheduler's pipeline coordinator: runs the pure reconcile (``hades.core.reconcile``) and applies what it says.

It runs on every event that can move a pipeline (its ``submitted``, via the scheduler's consumer; ``stages_added``,
``cancel_requested`` and a stage job's terminal event, via the durable consumer ``pipelines``), and the scheduler's
watchdog runs it for every unfinished pipeline, so a scheduler stopped between two appends is repaired by the next
look. Each pipeline append carries the concurrency check: two coordinators never both launch a stage; the loser
re-reads and re-decides. A stage's job is submitted after its ``stage_launched`` with "no history yet" expected,
so submitting it twice is harmless.
"""

from __future__ import annotations

import logging

from nats.aio.client import Client
from nats.aio.msg import Msg

from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.codec import decode_event
from hades.core.decisions import follow_ups
from hades.core.errors import ConcurrencyConflict, InvalidTransition
from hades.core.events import (
    Event,
    JobCancelRequested,
    JobFailed,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    PipelineRef,
    StageEnded,
    StageLaunched,
    StagesAdded,
)
from hades.core.lifecycle import RequestCancel, evolve, fold
from hades.core.ports import Clock, EventStore
from hades.core.reconcile import (
    Action,
    CancelStageJob,
    EndPipeline,
    EndStage,
    LaunchStage,
    ObservedJob,
    SubmitStageJob,
    reconcile,
)
from hades.core.stages import Stage, stage_spec
from hades.core.state import JobState, Status
from hades.workers.consumer import PullConsumer, Settle
from hades.workers.jobs import JobHandle

log = logging.getLogger(__name__)

PIPELINES_CONSUMER = "pipelines"
PIPELINE_SUBJECTS = (
    "hades.events.*.stages_added",
    "hades.events.*.cancel_requested",
    "hades.events.*.succeeded",
    "hades.events.*.failed",
    "hades.events.*.stopped",
)
#: Rounds of reconcile-and-apply per call; each round is one fresh read of the pipeline.
MAX_ROUNDS = 50


class PipelineCoordinator:
    """Moves pipelines on: launches stages, records their ends, cancels them, ends the pipeline."""

    def __init__(self, store: EventStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def on_event(self, event: Event) -> None:
        """Reconcile the pipeline an event may move (the event's own job, or the pipeline of a stage's job)."""
        if isinstance(event, StagesAdded | JobCancelRequested):
            await self.reconcile(event.job_id)
            return
        if isinstance(event, JobSucceeded | JobFailed | JobStopped) and event.follow_ups is not None:
            # The terminal event names the pipeline of a stage's job: nothing to read for the other jobs.
            if event.follow_ups.pipeline is not None:
                await self.reconcile(event.follow_ups.pipeline)
            return
        first = await self._store.submitted(event.job_id)
        if first is not None and isinstance(first.event, JobSubmitted) and first.event.pipeline is not None:
            await self.reconcile(first.event.pipeline.id)

    async def reconcile(self, pipeline_id: str) -> int:
        """Apply the reconcile's actions until it has none; returns how many were applied (0 for a job that is not
        a pipeline)."""
        applied = 0
        for _ in range(MAX_ROUNDS):
            job = await JobHandle.load(self._store, self._clock, pipeline_id)
            state = job.state
            if state is None or state.progress is None:
                return applied
            actions = reconcile(state, await self._observe(state))
            if not actions:
                return applied
            try:
                for action in actions:
                    await self._apply(job, action)
                    applied += 1
            except ConcurrencyConflict as conflict:
                log.info("pipeline %s moved meanwhile (%s); reconciling again", pipeline_id, conflict)
        log.warning("pipeline %s: still moving after %d rounds; the watchdog goes on later", pipeline_id, MAX_ROUNDS)
        return applied

    async def _observe(self, state: JobState) -> dict[str, ObservedJob | None]:
        """What each running stage's job says: its status, or None when it is not there."""
        assert state.progress is not None
        seen: dict[str, ObservedJob | None] = {}
        for launch in state.progress.running():
            job = fold([r.event for r in await self._store.history(launch.job_id)])
            seen[launch.name] = (
                None
                if job is None
                else ObservedJob(job.status, job.reason, cancel_requested=job.cancel_requested_by is not None)
            )
        return seen

    async def _apply(self, job: JobHandle, action: Action) -> None:
        state = job.state
        assert state is not None
        now = self._clock.now()
        if isinstance(action, LaunchStage):
            await self._append(
                job, StageLaunched(job_id=state.job_id, at=now, stage=action.stage.name, stage_job_id=action.job_id)
            )
            await self._submit(state, action.stage, action.job_id)
        elif isinstance(action, SubmitStageJob):
            await self._submit(state, action.stage, action.job_id)
        elif isinstance(action, EndStage):
            ended = StageEnded(
                job_id=state.job_id, at=now, stage=action.stage, status=action.status.value, reason=action.reason
            )
            await self._append(job, ended)
        elif isinstance(action, CancelStageJob):
            await self._cancel(state, action.job_id)
        else:
            await self._append(job, _end(state, action, now))
        log.info("pipeline %s: %s", state.job_id, _described(action))

    async def _append(self, job: JobHandle, event: Event) -> None:
        assert job.state is not None
        job.seq = await self._store.append(job.state.job_id, [event], job.seq)
        job.state = evolve(job.state, event)

    async def _submit(self, pipeline: JobState, stage: Stage, job_id: str) -> None:
        """Submit the stage's job; one that is there already (another coordinator, an earlier try) is left be."""
        spec = stage_spec(pipeline.spec, stage, pipeline.job_id)
        submitted = JobSubmitted(
            job_id=job_id,
            at=self._clock.now(),
            spec=spec,
            priority=spec.priority_name,
            pipeline=PipelineRef(id=pipeline.job_id, stage=stage.name),
            max_attempts=pipeline.max_attempts,  # a stage's job has its pipeline's attempt budget
        )
        try:
            await self._store.append(job_id, [submitted], 0)
        except ConcurrencyConflict:
            log.debug("stage %s of pipeline %s: its job %s is there already", stage.name, pipeline.job_id, job_id)

    async def _cancel(self, pipeline: JobState, job_id: str) -> None:
        stage_job = await JobHandle.load(self._store, self._clock, job_id)
        by = pipeline.cancel_requested_by or "unknown"
        try:
            await stage_job.run(job_id, RequestCancel(by=by, reason=f"pipeline {pipeline.job_id} was cancelled"))
        except InvalidTransition as why:
            log.debug("stage job %s not cancelled: %s", job_id, why)


def _described(action: Action) -> str:
    """An action in a log line (without the stage's whole spec)."""
    if isinstance(action, LaunchStage | SubmitStageJob):
        return f"{type(action).__name__} {action.stage.name} as job {action.job_id}"
    return repr(action)


def _end(state: JobState, action: EndPipeline, now: object) -> JobSucceeded | JobFailed | JobStopped:
    common = {"job_id": state.job_id, "at": now, "attempt": state.attempt, "follow_ups": follow_ups(state)}
    if action.status is Status.SUCCEEDED:
        return JobSucceeded.model_validate(common)
    if action.status is Status.FAILED:
        return JobFailed.model_validate({**common, "reason": action.reason or "a stage failed"})
    return JobStopped.model_validate({**common, "reason": action.reason or "cancelled"})


def pipelines_consumer(nc: Client, coordinator: PipelineCoordinator) -> PullConsumer:
    """The coordinator's subscription, bound to the durable consumer ``pipelines`` from streams.yaml: a message is
    acked once handled, naked (redelivered, up to the consumer's ``max_deliver``) when handling it raised."""

    async def on_pipeline_event(msg: Msg) -> None:
        await coordinator.on_event(decode_event(msg.data))

    return PullConsumer(
        nc,
        EVENTS_STREAM,
        PIPELINES_CONSUMER,
        on_pipeline_event,
        subjects=list(PIPELINE_SUBJECTS),
        settle=Settle.NACK_ON_ERROR,
        batch=20,
        max_workers=20,
    )
