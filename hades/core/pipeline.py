"""A pipeline's progress as its own events record it: the stages added, launched and ended.

The pipeline is one job (one aggregate); its stages run as jobs of their own. Its history holds ``submitted`` (the
declared stages), then ``stages_added``, ``stage_launched`` and ``stage_ended`` as the scheduler's coordinator
appends them, then one terminal event. ``evolve_pipeline`` folds those three kinds into :class:`PipelineProgress`;
what to do next is :mod:`hades.core.reconcile`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hades.core.events import StageEnded, StageLaunched, StagesAdded
from hades.core.spec import JobSpec
from hades.core.stages import Stage

__all__ = ["LaunchedStage", "PipelineProgress", "StageOutcome", "evolve_pipeline"]


@dataclass(frozen=True, slots=True)
class LaunchedStage:
    """A stage whose job was launched, and when."""

    name: str
    job_id: str
    at: datetime


@dataclass(frozen=True, slots=True)
class StageOutcome:
    """How a launched stage's job ended, as the pipeline recorded it."""

    name: str
    status: str
    reason: str | None
    at: datetime


@dataclass(frozen=True, slots=True)
class PipelineProgress:
    """The stages added after submission, launched and ended, in the order the pipeline recorded them."""

    added: tuple[Stage, ...] = ()
    launched: tuple[LaunchedStage, ...] = ()
    ended: tuple[StageOutcome, ...] = ()

    def stages(self, spec: JobSpec) -> tuple[Stage, ...]:
        """Every stage: the declared ones, then the added ones."""
        return (*spec.stages, *self.added)

    def launch_of(self, name: str) -> LaunchedStage | None:
        """The stage's launch, if it was launched."""
        return next((launch for launch in self.launched if launch.name == name), None)

    def outcome_of(self, name: str) -> StageOutcome | None:
        """The stage's recorded end, if it ended."""
        return next((outcome for outcome in self.ended if outcome.name == name), None)

    def running(self) -> list[LaunchedStage]:
        """Launched stages whose end is not recorded yet."""
        ended = {outcome.name for outcome in self.ended}
        return [launch for launch in self.launched if launch.name not in ended]


class PipelineEventError(ValueError):
    """A pipeline event that does not fit the pipeline's progress (the lifecycle turns it into InvalidTransition)."""


def evolve_pipeline(
    progress: PipelineProgress, spec: JobSpec, event: StageLaunched | StagesAdded | StageEnded
) -> PipelineProgress:
    """The progress after one of the pipeline's own events; raises PipelineEventError when it does not fit."""
    names = {stage.name for stage in progress.stages(spec)}
    if isinstance(event, StagesAdded):
        clash = names & {stage.name for stage in event.stages}
        if clash:
            raise PipelineEventError(f"stage {sorted(clash)[0]!r} exists already")
        added = (*progress.added, *event.stages)
        return PipelineProgress(added=added, launched=progress.launched, ended=progress.ended)
    if event.stage not in names:
        raise PipelineEventError(f"no stage {event.stage!r}")
    if isinstance(event, StageLaunched):
        if progress.launch_of(event.stage) is not None:
            raise PipelineEventError(f"stage {event.stage!r} was launched already")
        launch = LaunchedStage(name=event.stage, job_id=event.stage_job_id, at=event.at)
        return PipelineProgress(added=progress.added, launched=(*progress.launched, launch), ended=progress.ended)
    if progress.launch_of(event.stage) is None or progress.outcome_of(event.stage) is not None:
        raise PipelineEventError(f"stage {event.stage!r} is not running")
    outcome = StageOutcome(name=event.stage, status=event.status, reason=event.reason, at=event.at)
    return PipelineProgress(added=progress.added, launched=progress.launched, ended=(*progress.ended, outcome))
