"""What a pipeline needs next, from its state alone: a level-triggered reconcile.

:func:`reconcile` looks at the pipeline's progress (stages declared and added, launched, ended, a cancel asked
for) and at what the coordinator saw of its running stages' jobs, and returns the actions that move it on. The
coordinator applies them, folds the events they append, and asks again until nothing is left: so a scheduler that
stopped between two appends leaves work that the next look (its watchdog's) finds and finishes.

- A launched stage whose job has ended gets its end recorded (``stage_ended``); one whose job is missing (its
  launcher stopped after ``stage_launched``) has its job submitted.
- A stage starts once every stage it needs Succeeded. A stage one of whose needs Failed, was Stopped or was
  Skipped is Skipped; stages that do not depend on it go on (as GitLab's ``needs``).
- After a cancel, every running stage's job is asked to stop and nothing more starts (the stages not launched are
  Skipped); the pipeline is Stopped once every launched stage has ended.
- Otherwise the pipeline ends once nothing runs and nothing can start: Succeeded when every stage did, Failed when a
  stage failed (the reason names it), Stopped when a stage was cancelled on its own and none failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from hades.core.decisions import cancel_reason
from hades.core.stages import Stage, resolved_needs, stage_job_id
from hades.core.state import JobState, Status

__all__ = [
    "Action",
    "CancelStageJob",
    "EndPipeline",
    "EndStage",
    "LaunchStage",
    "ObservedJob",
    "StageStatus",
    "StageView",
    "SubmitStageJob",
    "reconcile",
    "stage_views",
]


class StageStatus(StrEnum):
    """Where one stage of a pipeline stands."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    STOPPED = "Stopped"
    SKIPPED = "Skipped"


@dataclass(frozen=True, slots=True)
class StageView:
    """One stage as the pipeline's own events have it."""

    stage: Stage
    needs: tuple[str, ...]
    job_id: str | None
    status: StageStatus
    reason: str | None = None
    launched_at: datetime | None = None
    ended_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ObservedJob:
    """What the coordinator saw of a running stage's job."""

    status: Status
    reason: str | None = None
    cancel_requested: bool = False


@dataclass(frozen=True, slots=True)
class LaunchStage:
    """Append ``stage_launched`` to the pipeline, then submit the stage's job."""

    stage: Stage
    job_id: str


@dataclass(frozen=True, slots=True)
class SubmitStageJob:
    """The stage was launched but its job is missing: submit it (idempotent)."""

    stage: Stage
    job_id: str


@dataclass(frozen=True, slots=True)
class EndStage:
    """Record that a launched stage's job ended (``stage_ended``)."""

    stage: str
    status: Status
    reason: str | None


@dataclass(frozen=True, slots=True)
class CancelStageJob:
    """Ask a running stage's job to stop (the pipeline was cancelled)."""

    stage: str
    job_id: str


@dataclass(frozen=True, slots=True)
class EndPipeline:
    """Append the pipeline's terminal event."""

    status: Status
    reason: str | None


Action = LaunchStage | SubmitStageJob | EndStage | CancelStageJob | EndPipeline
_BLOCKING = (StageStatus.FAILED, StageStatus.STOPPED, StageStatus.SKIPPED)
_ENDED = {"Succeeded": StageStatus.SUCCEEDED, "Failed": StageStatus.FAILED, "Stopped": StageStatus.STOPPED}


def stage_views(state: JobState) -> list[StageView]:
    """Every stage of the pipeline in declaration order, with the status its events give it."""
    progress = state.progress
    if progress is None:
        return []
    stages = progress.stages(state.spec)
    needs = resolved_needs(stages)
    views: dict[str, StageView] = {}
    for stage in stages:
        launch, outcome = progress.launch_of(stage.name), progress.outcome_of(stage.name)
        status, reason = StageStatus.PENDING, None
        if outcome is not None:
            status, reason = _ENDED.get(outcome.status, StageStatus.FAILED), outcome.reason
        elif launch is not None:
            status = StageStatus.RUNNING
        else:
            blocked = [n for n in needs[stage.name] if views[n].status in _BLOCKING]
            if blocked:
                status, reason = StageStatus.SKIPPED, f"stage {blocked[0]} {views[blocked[0]].status.lower()}"
            elif state.cancel_requested_by is not None or state.status.is_terminal:
                status, reason = StageStatus.SKIPPED, "the pipeline was cancelled"
        views[stage.name] = StageView(
            stage=stage,
            needs=needs[stage.name],
            job_id=launch.job_id if launch is not None else None,
            status=status,
            reason=reason,
            launched_at=launch.at if launch is not None else None,
            ended_at=outcome.at if outcome is not None else None,
        )
    return list(views.values())


def reconcile(state: JobState, observed: Mapping[str, ObservedJob | None]) -> list[Action]:
    """The actions that move the pipeline on; empty when it waits (or has ended).

    ``observed`` maps a running stage's name to what its job's history says (None: the job is not there); a
    running stage not in it is taken to be still running.
    """
    if state.progress is None or state.status.is_terminal:
        return []
    views = stage_views(state)
    running = [view for view in views if view.status is StageStatus.RUNNING]
    actions = _running_actions(state, running, observed)
    if actions:
        return actions
    if state.cancel_requested_by is not None:
        if running:
            return []
        return [EndPipeline(Status.STOPPED, cancel_reason(state))]
    pending = [view for view in views if view.status is StageStatus.PENDING]
    ready = [view for view in pending if all(_status(views, need) is StageStatus.SUCCEEDED for need in view.needs)]
    if ready:
        return [LaunchStage(view.stage, stage_job_id(state.job_id, view.stage.name)) for view in ready]
    if running or pending:
        return []
    return [_end(views)]


def _running_actions(
    state: JobState, running: list[StageView], observed: Mapping[str, ObservedJob | None]
) -> list[Action]:
    """Repairs, recorded ends and cancels for the running stages."""
    actions: list[Action] = []
    for view in running:
        assert view.job_id is not None
        seen = observed.get(view.stage.name, ObservedJob(Status.RUNNING))
        if seen is None:
            actions.append(SubmitStageJob(view.stage, view.job_id))
        elif seen.status.is_terminal:
            actions.append(EndStage(view.stage.name, seen.status, seen.reason))
        elif state.cancel_requested_by is not None and not seen.cancel_requested:
            actions.append(CancelStageJob(view.stage.name, view.job_id))
    return actions


def _status(views: list[StageView], name: str) -> StageStatus:
    return next(view.status for view in views if view.stage.name == name)


def _end(views: list[StageView]) -> EndPipeline:
    """How a pipeline ends once every stage ended or was skipped."""
    skipped = [view.stage.name for view in views if view.status is StageStatus.SKIPPED]
    also = f"; skipped: {', '.join(skipped)}" if skipped else ""
    for status, verb in ((StageStatus.FAILED, "failed"), (StageStatus.STOPPED, "was stopped")):
        first = next((view for view in views if view.status is status), None)
        if first is not None:
            detail = f": {first.reason}" if first.reason else ""
            ended = Status.FAILED if status is StageStatus.FAILED else Status.STOPPED
            return EndPipeline(ended, f"stage {first.stage.name} {verb}{detail}{also}")
    return EndPipeline(Status.SUCCEEDED, None)
