"""Phase-time distributions of finished jobs, folded from the timing view as each job ends: bucket counts, sums
and counts, the shape a Prometheus histogram is exported in. Bounded label sets: the fixed phase names only."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from hades.projections.timing import JobTiming

#: Seconds. Container work spans milliseconds (a cached image) to hours (a long build).
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


@dataclass
class Distribution:
    """Counts per upper bound (non-cumulative), plus the sum and count of all observations."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        """Add one observation."""
        self.counts[bisect.bisect_left(BUCKETS, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, cumulative count)`` pairs ending with ``+Inf``."""
        running, pairs = 0, []
        for bound, count in zip((*map(str, BUCKETS), "+Inf"), self.counts, strict=True):
            running += count
            pairs.append((bound, running))
        return pairs


@dataclass
class PhaseDistributions:
    """Where finished jobs spent their time, phase by phase, plus their overhead and duration."""

    phases: dict[str, Distribution] = field(default_factory=dict)
    overhead: Distribution = field(default_factory=Distribution)
    duration: Distribution = field(default_factory=Distribution)

    def add(self, timing: JobTiming) -> None:
        """Count a job that has just ended."""
        phases, total, overhead = timing.breakdown()
        known = self.phases
        for phase, seconds in phases.items():
            if seconds is not None:
                distribution = known.get(phase)
                if distribution is None:
                    distribution = known[phase] = Distribution()
                # Distribution.observe, inline: a job ends with a dozen observations
                distribution.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
                distribution.total += seconds
                distribution.count += 1
        if overhead is not None:
            self.overhead.observe(overhead)
        if total is not None:
            self.duration.observe(total)
