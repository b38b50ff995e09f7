"""The scheduler: how often a job is tried, how it ages in its queue, and how often the watchdog looks."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SchedulerSettings(BaseModel):
    """Attempts, priority aging and the watchdog."""

    # scheduler
    max_attempts: int = Field(
        default=3,
        ge=1,
        validation_alias="MAX_ATTEMPTS",
        description=(
            "attempts a job gets when its executors (or its containers, or their engine) are lost; then it fails"
            " with a reason that says so. The API stamps it on each job it accepts, and every role goes by the"
            " job's number (a role's own counts only for jobs from before)"
        ),
    )
    priority_aging_seconds: float | None = Field(
        default=None,
        gt=0,
        validation_alias="PRIORITY_AGING_SECONDS",
        description="seconds a job waits in its queue before it moves up one priority; unset: never",
    )
    watchdog_seconds: float = Field(
        default=2.0,
        gt=0,
        validation_alias="HADES_WATCHDOG_SECONDS",
        description="seconds between the scheduler's looks for jobs on lost executors and jobs to promote",
    )
    unschedulable_timeout: float | None = Field(
        default=None,
        gt=0,
        validation_alias="UNSCHEDULABLE_TIMEOUT",
        description="seconds a job no live executor can take waits before it fails; default: forever",
    )
    pool_idle_seconds: float = Field(
        default=3600.0,
        ge=0,
        validation_alias="HADES_POOL_IDLE_SECONDS",
        description=(
            "seconds an executor pool (docs/pools.md) stays after it fell idle (no unfinished job placed in it,"
            " nothing pending in its queues) before the scheduler removes its HADES_POOLS entry and its three"
            " consumers; the next job placed in it registers it again. 0: pools are never removed"
        ),
    )
