"""The deployment's timeout policy: the timeout a job runs with, whatever its client asked.

``timeout_seconds`` 0 means "no timeout" in the Go contract, so one endless script holds an executor slot forever.
A deployment may set a default (for a job that sets none) and a maximum (a job asking for more is capped to it,
not refused: Go clients send large values, and a 400 for a value the contract accepts would break them). The API
applies the policy once, at submission: the ``submitted`` event holds the effective timeout in its spec, so every
executor, a replay and every retry agree on it, and the executor's own settings never matter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hades.core.spec import JobSpec
from hades.core.stages import Stage

__all__ = ["TimeoutPolicy"]


@dataclass(frozen=True, slots=True)
class TimeoutPolicy:
    """``HADES_DEFAULT_TIMEOUT_SECONDS`` and ``HADES_MAX_TIMEOUT_SECONDS``; 0 is "none" for each."""

    default_seconds: int = 0
    max_seconds: int = 0

    def effective(self, requested: int) -> int:
        """The timeout a job asking for ``requested`` seconds (0: none) runs with: its own, else the default,
        else the maximum; never more than the maximum."""
        seconds = requested or self.default_seconds
        if self.max_seconds and (seconds == 0 or seconds > self.max_seconds):
            return self.max_seconds
        return seconds

    def capped(self, requested: int) -> int:
        """A stage's timeout: capped, but 0 stays 0 (the stage then runs with its pipeline's, already effective)."""
        return self.effective(requested) if requested else 0

    def applied(self, spec: JobSpec) -> tuple[JobSpec, int | None]:
        """``spec`` with its effective timeout (and its stages' capped), and what the client asked when that
        differs (None when the spec is the client's)."""
        seconds = self.effective(spec.timeout_seconds)
        stages = self.capped_stages(spec.stages)
        if seconds == spec.timeout_seconds and stages == spec.stages:
            return spec, None
        changed = spec.model_copy(update={"timeout_seconds": seconds, "stages": stages})
        return changed, spec.timeout_seconds if seconds != spec.timeout_seconds else None

    def capped_stages(self, stages: Sequence[Stage]) -> tuple[Stage, ...]:
        """``stages`` with each one's own timeout capped (one without keeps inheriting its pipeline's)."""
        return tuple(
            stage
            if (seconds := self.capped(stage.timeout_seconds)) == stage.timeout_seconds
            else stage.model_copy(update={"timeout_seconds": seconds})
            for stage in stages
        )
