"""The read models one process keeps, fed together from one pass over the log."""

from __future__ import annotations

from dataclasses import dataclass, field

from hades.core.ports import Recorded
from hades.projections.distributions import PhaseDistributions
from hades.projections.jobs import JobsView
from hades.projections.metrics import MetricsView
from hades.projections.timing import TimingView


@dataclass
class ReadModels:
    """Jobs, timing and metrics."""

    jobs: JobsView = field(default_factory=JobsView)
    timing: TimingView = field(default_factory=TimingView)
    metrics: MetricsView = field(default_factory=MetricsView)
    distributions: PhaseDistributions = field(default_factory=PhaseDistributions)

    def __post_init__(self) -> None:
        self.timing.on_finished.append(self.distributions.add)

    @classmethod
    def whole(cls) -> ReadModels:
        """Views that keep ended jobs in full: for folding one job's (or a short) history."""
        return cls(jobs=JobsView(retain_ended=True), timing=TimingView(retain_ended=True))

    def apply(self, recorded: Recorded) -> None:
        """Fold one event into every view."""
        self.jobs.apply(recorded)
        self.timing.apply(recorded)
        self.metrics.apply(recorded)

    @classmethod
    def folded(cls, history: list[Recorded]) -> ReadModels:
        """The views of a whole (or partial) history, ended jobs kept in full."""
        views = cls.whole()
        for recorded in history:
            views.apply(recorded)
        return views
