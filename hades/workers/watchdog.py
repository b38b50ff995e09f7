"""The scheduler's periodic duties over the jobs it can see: due ends, lost executors and priority ageing.

- A job whose events already imply its end (``lifecycle.conclusion``: its last step's end landed, the job's did
  not, because its writer stopped in between) gets that end appended, once its executor is lost or the end has
  been due for ``conclude_after`` seconds.
- A job ``Running`` on an executor whose heartbeat expired is handed back to the queue as a new attempt, up to
  ``MAX_ATTEMPTS``, then failed with a reason that says so. So is one whose executor lives on but, in a heartbeat
  ``orphan_after`` seconds or more after the attempt started, no longer lists it among the jobs it runs (the
  attempt's runner died: the event log was away while it recorded the step's or the job's end).
- A job submitted ``queue_after`` seconds ago and still not queued is queued (at most ``queue_per_round`` a round):
  the scheduler that fetched its ``submitted`` died before queueing it (its message comes back only after the
  consumer's 30 s ack wait), or the message ran out of deliveries while the log was away, which left the job
  waiting forever before this.
- With ``PRIORITY_AGING_SECONDS`` set, a job that waited that long in its queue moves up one priority, so a
  low job cannot starve behind a steady stream of high ones.
- An unfinished pipeline is reconciled (``hades.workers.pipelines``): what a scheduler stopped between two appends
  left undone (a stage launched but its job not submitted, a stage's end not recorded, the pipeline's end) is done.
- A queued job with constraints or resources that no live (not draining) executor takes (its labels satisfy them, or
  it is a Kubernetes executor that can express them as node affinity) is marked
  unschedulable with a reason ("no executor with os=windows is alive"), an event, so every API replica shows the
  same; the mark is cleared when such an executor appears, and with ``UNSCHEDULABLE_TIMEOUT`` set the job fails
  once it has been unschedulable that long. Busy matching executors do not make a job unschedulable: it waits.
- Every ``pools_every`` seconds, a pool idle for ``pool_idle`` seconds is removed, and the pool of every queued
  job is registered again if it was removed meanwhile (``hades.workers.idle_pools``).

Any number of schedulers may run this: the per-job concurrency check lets exactly one of them act on a job.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hades.adapters.k8s.placement import accepts as k8s_places
from hades.adapters.nats.connection import log_failure
from hades.adapters.nats.heartbeats import Heartbeats
from hades.adapters.nats.pools import Pools
from hades.core.constraints import Placement, satisfies
from hades.core.errors import ConcurrencyConflict, InvalidTransition
from hades.core.lifecycle import (
    Command,
    ConcludeJob,
    FailJob,
    JobState,
    MarkSchedulable,
    MarkUnschedulable,
    PromoteJob,
    Status,
    conclusion,
    hand_back,
)
from hades.core.ports import Clock, EventStore
from hades.core.spec import Priority
from hades.projections.jobs import JobsView
from hades.tracing import continuing
from hades.workers.idle_pools import PoolKeeper
from hades.workers.jobs import JobHandle
from hades.workers.pipelines import PipelineCoordinator
from hades.workers.scheduler import queue_job

log = logging.getLogger(__name__)

_UP = {Priority.LOW: Priority.MEDIUM, Priority.MEDIUM: Priority.HIGH}


@dataclass(frozen=True)
class WatchdogPolicy:
    """How the scheduler treats lost executors and waiting jobs."""

    max_attempts: int = 3
    aging_seconds: float | None = None
    interval: float = 2.0
    conclude_after: float = 30.0
    orphan_after: float = 30.0
    unschedulable_timeout: float | None = None
    queue_after: float = 10.0
    queue_per_round: int = 50
    pool_idle: float = 3600.0
    pools_every: float = 10.0


class Watchdog:
    """Looks over unfinished jobs every ``interval`` seconds."""

    def __init__(
        self,
        store: EventStore,
        clock: Clock,
        jobs: JobsView,
        heartbeats: Heartbeats,
        policy: WatchdogPolicy,
        pipelines: PipelineCoordinator | None = None,
        pools: Pools | None = None,
    ) -> None:
        self._pipelines = pipelines
        self._pools = pools
        self._store = store
        self._clock = clock
        self._jobs = jobs
        self._heartbeats = heartbeats
        self._policy = policy
        self._keeper = PoolKeeper(pools, clock, policy.pool_idle) if pools is not None else None
        self._pools_at: datetime | None = None

    async def run(self) -> None:
        """Until cancelled."""
        while True:
            try:
                await self.tick()
            except Exception:
                log_failure(log, "watchdog round failed; trying again")
            await asyncio.sleep(self._policy.interval)

    async def tick(self) -> int:
        """One look over the unfinished jobs; returns how many were acted on."""
        executors = await self._heartbeats.alive()
        alive = set(executors)
        takers = [_taker(info) for info in executors.values() if not info.get("draining")]
        acted, unqueued = 0, 0
        for job in self._jobs.unfinished():
            if job.progress is not None:  # a pipeline: never queued nor run; its coordinator moves it on
                acted += await self._pipelines.reconcile(job.job_id) if self._pipelines is not None else 0
                continue
            if self._never_queued(job):
                unqueued += 1
                if unqueued <= self._policy.queue_per_round:
                    acted += await self._queue(job.job_id)
                continue
            command = (
                self._command_for(job, alive) or self._orphaned(job, executors) or self._placement_command(job, takers)
            )
            if command is not None and await self._apply(job.job_id, command):
                acted += 1
        await self._sweep_pools()
        return acted

    async def _sweep_pools(self) -> None:
        """Remove idle pools and register the pool of any queued job, every ``pools_every`` seconds."""
        now = self._clock.now()
        if self._keeper is None or (
            self._pools_at is not None and (now - self._pools_at).total_seconds() < self._policy.pools_every
        ):
            return
        self._pools_at = now
        try:
            await self._keeper.sweep(self._jobs.unfinished())
        except Exception:
            log_failure(log, "looking over the executor pools failed; trying again next round")

    def _command_for(self, job: JobState, alive: set[str]) -> Command | None:
        now = self._clock.now()
        due = conclusion(job, now)
        if due is not None and (job.executor_id not in alive or _due_for(job, now) >= self._policy.conclude_after):
            return ConcludeJob()
        if job.status is Status.RUNNING and job.executor_id not in alive:
            lost = f"executor {job.executor_id} was lost (its heartbeat expired)"
            return hand_back(job.attempt, job.attempts_allowed(self._policy.max_attempts), lost)
        aging = self._policy.aging_seconds
        if aging and job.status is Status.QUEUED and job.queued_at is not None and job.priority in _UP:
            waited = (now - job.queued_at).total_seconds()
            if waited >= aging:
                up = _UP[job.priority]
                return PromoteJob(job.attempt, up, f"waited {waited:.0f} s in the {job.priority} queue; now {up}")
        return None

    def _never_queued(self, job: JobState) -> bool:
        waited = (self._clock.now() - job.submitted_at).total_seconds()
        return job.awaiting_queue and waited >= self._policy.queue_after

    async def _queue(self, job_id: str) -> int:
        """Queue a job the scheduler's consumer has not (as it would: its pool registered first)."""
        try:
            queued = await queue_job(self._store, self._clock, job_id, pools=self._pools, pipelines=self._pipelines)
        except ConcurrencyConflict:
            return 0
        if queued:
            log.warning("job %s was submitted but not queued after %g s; queued it", job_id, self._policy.queue_after)
        return int(queued)

    def _placement_command(self, job: JobState, takers: list[Callable[[Placement], bool]]) -> Command | None:
        """Mark a queued job that no live executor can take, clear the mark, or give up on it after the timeout."""
        placement = job.spec.placement
        if placement is None or job.status is not Status.QUEUED or job.queued_at is None:
            return None
        if any(takes(placement) for takes in takers):
            return MarkSchedulable(job.attempt) if job.unschedulable_since is not None else None
        reason = f"no executor with {placement.describe()} is alive"
        timeout, since = self._policy.unschedulable_timeout, job.unschedulable_since
        if timeout is not None and since is not None and (self._clock.now() - since).total_seconds() >= timeout:
            return FailJob(job.attempt, f"{reason}; gave up after {timeout:g} s (UNSCHEDULABLE_TIMEOUT)")
        if since is None or job.reason != reason:
            return MarkUnschedulable(job.attempt, reason)
        return None

    def _orphaned(self, job: JobState, executors: dict[str, dict[str, Any]]) -> Command | None:
        """An attempt whose executor lives on but, in a heartbeat well after the attempt started, no longer lists
        it among the jobs it runs (its runner died, e.g. the event log was away while it recorded the end):
        handed back, as for a lost executor."""
        beat = executors.get(job.executor_id or "")
        if job.status is not Status.RUNNING or beat is None or job.started_at is None:
            return None
        running, said_at = beat.get("running"), _moment(beat.get("at"))
        if not isinstance(running, list) or said_at is None or job.job_id in running:
            return None  # an executor that does not say (older, or the operator's), or still runs it
        if (said_at - job.started_at).total_seconds() < self._policy.orphan_after:
            return None  # a heartbeat from before (or just after) the attempt started need not list it yet
        lost = f"executor {job.executor_id} no longer runs attempt {job.attempt} (it lost track of it)"
        return hand_back(job.attempt, job.attempts_allowed(self._policy.max_attempts), lost)

    async def _apply(self, job_id: str, command: Command) -> bool:
        job = await JobHandle.load(self._store, self._clock, job_id)
        try:
            with continuing(job.trace):  # the next attempt stays in the job's trace
                await job.run(job_id, command)
        except (InvalidTransition, ConcurrencyConflict) as why:
            log.debug("watchdog left job %s alone: %s", job_id, why)
            return False
        log.info("job %s: %s", job_id, getattr(command, "reason", command))
        return True


def _taker(info: dict[str, Any]) -> Callable[[Placement], bool]:
    """Which placements an executor takes, from its heartbeat: those its labels satisfy (none advertised by an
    executor older than pools), or, for a cluster executor (Kubernetes), those its engine can express. An operator
    takes none, whatever its labels: it runs what the hand-off executors took from the queues."""
    if "operator" in info:
        return lambda _placement: False
    if info.get("places") == "cluster":
        return k8s_places
    raw = info.get("labels")
    labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    return lambda placement: satisfies(placement, labels)


def _due_for(job: JobState, now: datetime) -> float:
    """Seconds since the job's newest own change (its last step's end, its start or its queueing)."""
    moments = [step.finished_at for step in job.steps if step.finished_at is not None]
    moments += [moment for moment in (job.started_at, job.queued_at, job.submitted_at) if moment is not None]
    return (now - max(moments)).total_seconds()


def _moment(value: object) -> datetime | None:
    """A heartbeat's ISO 8601 time, None when it is missing or not one."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None
