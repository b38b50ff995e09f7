"""The leader's reconcile loop: every BuildJob's job read from the event log, admitted, run, reported, cleaned up.

A BuildJob is reconciled whenever it changes (the watch), its job's events move (a NATS subscription on the
event subjects, a hint only: the history is then read from the stream), its attempt ends, and every
``resync_seconds`` in any case. Reconciling never decides a job's end by itself: the attempt's runner appends
``started``, each step and the one end through the lifecycle, so re-reconciling a finished BuildJob (a restart, a
new leader, a resync) writes its status again at most, and never a second terminal event.

- job ``Queued``: waits for a slot (phase Pending); :func:`admission.admit` picks who starts when one frees.
- admitted: its attempt runs in an ``AttemptRunner`` over :class:`OperatorPods` (a Pod per attempt).
- job ``Running``: the status follows its state and its Pod.
- job ended: the status says how, the job's Pods are deleted, and with ``delete_on_complete`` the BuildJob too.
- BuildJob deleted while its job is unfinished: the job is cancelled (it ends ``Stopped``).
- no such job in the log: the BuildJob is marked Failed (a BuildJob is made by the executor role's hand-off).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from hades.adapters.k8s.operator.admission import Candidate, admit, effective_limit
from hades.adapters.k8s.operator.pods import OperatorPods
from hades.adapters.k8s.operator.resources import BuildJobs, BuildJobWatch, Key
from hades.adapters.k8s.operator.status import buildjob_status
from hades.adapters.k8s.pods import LABEL_JOB, pod_name
from hades.core.errors import ConcurrencyConflict, InvalidTransition
from hades.core.lifecycle import JobState, RequestCancel, RequeueJob, Status
from hades.core.ports import Clock, EventStore
from hades.tasks import stop
from hades.workers.attempt import AttemptRunner
from hades.workers.jobs import JobHandle

log = logging.getLogger(__name__)
CANCELLED_BY = "kubernetes"


@dataclass(frozen=True)
class OperatorSettings:
    """How the operator runs: where, how many at once, and what it leaves behind."""

    namespace: str = "hades-executor"  # where its Pods run (and the Lease lives)
    watch_namespace: str | None = None  # whose BuildJobs it reconciles; None: every namespace
    delete_on_complete: bool = True
    max_parallelism: int = 0  # 0: 100, as in Go
    resync_seconds: float = 10.0
    pull_grace: float = 60.0  # K8S_PULL_GRACE_SECONDS: how long ErrImagePull may last before a step is stuck


@dataclass
class _Books:
    """What the loop keeps between reconciles (all of it can be rebuilt from the cluster and the log)."""

    attempts: dict[Key, asyncio.Task[None]] = field(default_factory=dict)
    waiting: dict[Key, Candidate] = field(default_factory=dict)
    jobs: dict[str, Key] = field(default_factory=dict)  # job id -> BuildJob
    keys: dict[Key, str] = field(default_factory=dict)  # BuildJob -> job id
    finished: dict[Key, str] = field(default_factory=dict)  # -> the resourceVersion it was left at
    admitted: list[Key] = field(default_factory=list)  # in order, for the record


class Controller:
    """Reconciles BuildJobs into attempts while it runs (the leader runs it)."""

    def __init__(
        self,
        nc: Client,
        store: EventStore,
        clock: Clock,
        buildjobs: BuildJobs,
        pods: OperatorPods,
        runner: AttemptRunner,
        settings: OperatorSettings,
    ) -> None:
        self._nc = nc
        self._store = store
        self._clock = clock
        self._buildjobs = buildjobs
        self._pods = pods
        self._runner = runner
        self._settings = settings
        self._limit = effective_limit(settings.max_parallelism)
        self._dirty: set[Key] = set()
        self._everything = True
        self._wake = asyncio.Event()
        self.books = _Books()
        self.watch = BuildJobWatch(buildjobs, self._changed)
        self.reconciles = 0
        pods.retry = self.retry

    @property
    def running(self) -> int:
        """Attempts this operator runs now."""
        return len(self.books.attempts)

    async def run(self) -> None:
        """Reconcile until cancelled; running attempts are then handed back to the queue (a new leader, or this
        one later, starts them again)."""
        subscription = await self._nc.subscribe("hades.events.>", cb=self._job_moved)
        try:
            async with self.watch:
                while True:
                    try:  # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel that meets a wake-up
                        async with asyncio.timeout(self._settings.resync_seconds):
                            await self._wake.wait()
                    except TimeoutError:
                        self._everything = True  # the resync
                    if self.watch.failure is not None:
                        raise RuntimeError(self.watch.failure)
                    await self.reconcile()
        finally:
            await asyncio.shield(subscription.unsubscribe())
            await asyncio.shield(self._hand_back())

    async def reconcile(self) -> None:
        """One pass over what changed (everything after a list or a resync), then admission."""
        self._wake.clear()
        keys = self._dirty | (set(self.watch.objects) if self._everything else set())
        self._dirty, self._everything = set(), False
        for key in sorted(keys):
            try:
                await self._reconcile(key, self.watch.objects.get(key))
            except Exception:
                log.exception("reconciling BuildJob %s/%s failed; the next resync tries again", *key)
        await self._admit()

    # -- wake-ups ---------------------------------------------------------------------------------------------------

    def resync(self) -> None:
        """Reconcile every BuildJob on the next pass (as the periodic resync does)."""
        self._changed(None)

    def _changed(self, key: Key | None) -> None:
        if key is None:
            self._everything = True
        else:
            self._dirty.add(key)
        self._wake.set()

    async def _job_moved(self, msg: Msg) -> None:
        parts = msg.subject.split(".")
        key = self.books.jobs.get(parts[2]) if len(parts) > 2 else None
        if key is not None:
            self._changed(key)

    # -- one BuildJob -------------------------------------------------------------------------------------------------

    async def _reconcile(self, key: Key, buildjob: dict[str, Any] | None) -> None:
        self.reconciles += 1
        if buildjob is None:
            await self._deleted(key)
            return
        if self.books.finished.get(key) == _version(buildjob):
            return  # done with, and nobody wrote it since: no need to read its history on every resync
        labels = buildjob["metadata"].get("labels") or {}
        job_id = str(labels.get(LABEL_JOB) or key[1])
        self.books.jobs[job_id], self.books.keys[key] = key, job_id
        state = (await JobHandle.load(self._store, self._clock, job_id)).state
        if state is None:
            message = f"no job {job_id} in the Hades event log (BuildJobs are made by HADES_EXECUTOR=k8s-operator)"
            await self._buildjobs.write_status(buildjob, lambda _: {"phase": "Failed", "message": message})
            return
        if state.status.is_terminal:
            self.books.waiting.pop(key, None)
            written = await self._report(buildjob, state, None)
            if key not in self.books.attempts and written is not None:
                await self._finish(key, job_id, written)
            return
        if state.status is Status.QUEUED and key not in self.books.attempts:
            self.books.waiting[key] = Candidate.of(buildjob)
            waiting = f"waiting for one of {self._limit} slots (MAX_PARALLELISM), highest priority then oldest first"
            await self._report(buildjob, state, None, waiting)
            return
        pod = await self._buildjobs.pod(pod_name(job_id, state.attempt)) if state.status is Status.RUNNING else None
        await self._report(buildjob, state, pod)

    async def _report(
        self, buildjob: dict[str, Any], state: JobState, pod: dict[str, Any] | None, waiting: str | None = None
    ) -> dict[str, Any] | None:
        """Write the status the job's state implies; returns the BuildJob as it now is (None: gone)."""

        def status_for(current: dict[str, Any]) -> dict[str, Any]:
            retries = int((current.get("status") or {}).get("retryCount") or 0)
            return buildjob_status(state, pod, retries, waiting)

        return await self._buildjobs.write_status(buildjob, status_for)

    async def _finish(self, key: Key, job_id: str, buildjob: dict[str, Any]) -> None:
        """The job ended and its attempt is over: its Pods go, and the BuildJob with DELETE_ON_COMPLETE."""
        await self._buildjobs.delete_pods(job_id)
        if self._settings.delete_on_complete:
            await self._buildjobs.delete(key)
        self.books.finished[key] = _version(buildjob)

    async def _deleted(self, key: Key) -> None:
        """The BuildJob is gone: an unfinished job is cancelled (its attempt then stops and deletes its Pod)."""
        self.books.waiting.pop(key, None)
        self.books.finished.pop(key, None)
        job_id = self.books.keys.pop(key, None)
        if job_id is None:
            return
        self.books.jobs.pop(job_id, None)
        job = await JobHandle.load(self._store, self._clock, job_id)
        reason = f"BuildJob {key[0]}/{key[1]} was deleted"
        with contextlib.suppress(InvalidTransition, ConcurrencyConflict):
            await job.run(job_id, RequestCancel(by=CANCELLED_BY, reason=reason))

    # -- admission and attempts ---------------------------------------------------------------------------------------

    async def _admit(self) -> None:
        for candidate in admit(self.books.waiting.values(), self.running, self._limit):
            self.books.waiting.pop(candidate.key, None)
            buildjob = self.watch.objects.get(candidate.key)
            if buildjob is not None:
                await self._start(candidate.key, buildjob)

    async def _start(self, key: Key, buildjob: dict[str, Any]) -> None:
        job_id = self.books.keys[key]
        job = await JobHandle.load(self._store, self._clock, job_id)
        if job.state is None or job.state.status is not Status.QUEUED:
            self._changed(key)
            return
        await self._buildjobs.delete_pods(job_id)  # an earlier attempt's, if a lost leader left one
        self._pods.owners[job_id] = buildjob
        self.books.admitted.append(key)
        task = asyncio.create_task(self._attempt(key, job_id, job), name=f"buildjob-{key[1]}")
        self.books.attempts[key] = task

    async def _attempt(self, key: Key, job_id: str, job: JobHandle) -> None:
        assert job.state is not None
        try:
            await self._runner.run(job, job.state.attempt)
        except Exception:
            log.exception("attempt of BuildJob %s/%s ended with an error", *key)
        finally:
            self.books.attempts.pop(key, None)
            self._pods.owners.pop(job_id, None)
            self._changed(key)

    async def retry(self, job: JobState, reason: str) -> bool:
        """Hand a disrupted attempt back for another Pod while its BuildJob has retries left (``retryCount`` counts
        them in the status first, so a crash in between never retries more than ``maxRetries``)."""
        key = self.books.jobs.get(job.job_id)
        buildjob = await self._buildjobs.get(key) if key is not None else None
        if buildjob is None:
            return False
        allowed = int((buildjob.get("spec") or {}).get("maxRetries") or 0)
        done = int((buildjob.get("status") or {}).get("retryCount") or 0)
        if done >= allowed:
            return False

        def counted(current: dict[str, Any]) -> dict[str, Any]:
            status = current.get("status") or {}
            return {**status, "retryCount": int(status.get("retryCount") or 0) + 1}

        await self._buildjobs.write_status(buildjob, counted)
        handle = await JobHandle.load(self._store, self._clock, job.job_id)
        try:
            await handle.run(job.job_id, RequeueJob(job.attempt, f"{reason}; retry {done + 1} of {allowed}"))
        except InvalidTransition:
            return False
        return True

    async def _hand_back(self) -> None:
        tasks = list(self.books.attempts.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(Exception):
                await stop(task)


def _version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
