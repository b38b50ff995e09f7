"""The executor role in operator mode (``HADES_EXECUTOR=k8s-operator``): a queued attempt becomes a BuildJob.

It takes queued attempts from the same priority queues as every executor and, instead of running them, creates
the job's BuildJob (named by the job id, so every attempt of a job meets the same one: AlreadyExists is success)
and lets the queue message go; the operator starts the attempt when it admits the BuildJob. A BuildJob the API
refuses (the CRD's validation: 422, RBAC: 403) fails the job with the API server's message, so no job is left
queued for a resource that will never exist (the Go scheduler's hole). An API that cannot be reached raises,
so the queue message is delivered again later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubernetes_asyncio.client.exceptions import ApiException

from hades.adapters.k8s.buildjob import BuildJobError, buildjob_manifest
from hades.adapters.k8s.operator.resources import CONFLICT, BuildJobs
from hades.core.errors import InvalidTransition, StoreUnavailable
from hades.core.lifecycle import FailJob, JobState, Status
from hades.core.ports import StepLogs, StepResult
from hades.core.spec import Priority
from hades.workers.attempt import AttemptRunner, JobWatcher, WriterFactory
from hades.workers.jobs import JobHandle

log = logging.getLogger(__name__)


def still_queued(state: JobState, attempt: int, priority: Priority | None) -> bool:
    """Whether the job still waits for ``attempt`` in the queue of ``priority`` (any, when None), uncancelled."""
    return (
        state.status is Status.QUEUED
        and state.attempt == attempt
        and (priority is None or state.priority is priority)
        and state.cancel_requested_by is None
    )


class NoPods:
    """The Executor an operator-mode executor role holds: it runs nothing itself (the operator does)."""

    async def prepare(self, job: JobState) -> dict[str, float]:
        raise NotImplementedError("in operator mode the operator runs jobs")

    async def run_step(self, job: JobState, index: int, logs: StepLogs) -> StepResult:
        raise NotImplementedError("in operator mode the operator runs jobs")

    async def cleanup(self, job: JobState) -> None:
        return None

    async def sweep(self, running: Callable[[str], bool], live_executors: set[str]) -> int:
        return 0


class BuildJobHandoff(AttemptRunner):
    """Takes a queued attempt by creating its job's BuildJob; the queue message is then done."""

    def __init__(
        self,
        buildjobs: BuildJobs,
        writers: WriterFactory,
        executor_id: str,
        watch: JobWatcher,
        max_retries: int = 0,
    ) -> None:
        super().__init__(NoPods(), writers, executor_id, watch)
        self._buildjobs = buildjobs
        self._max_retries = max_retries

    async def run(
        self,
        job: JobHandle,
        attempt: int,
        traceparent: str | None = None,
        claim: str | None = None,
        priority: Priority | None = None,
    ) -> bool:
        """Create the BuildJob (AlreadyExists is success); a refusal fails the job with the API's message.

        The job is handed as the queue message left it; it is read afresh first, since no append of this role
        would meet a cancel or a promotion that came since (the operator appends ``started``, so ``claim`` is not
        used here)."""
        assert job.state is not None
        job_id, seen = job.state.job_id, job.seq
        await job.reload(job_id)
        if job.seq < seen:  # read from a replica behind the message: have it again later
            raise StoreUnavailable(f"job {job_id}: its history was read from a replica behind its queue message")
        state = job.state
        if state is None or not still_queued(state, attempt, priority):
            return False
        try:
            manifest = buildjob_manifest(
                state.job_id,
                state.spec,
                self._buildjobs.namespace,
                state.priority,
                state.attempts_allowed(self._max_retries + 1) - 1,  # the job's own budget where it carries one
            )
            await self._buildjobs.create(manifest)
        except BuildJobError as error:
            return await self._refused(job, attempt, f"the job cannot be a BuildJob: {error}")
        except ApiException as error:
            if error.status == CONFLICT:
                return True
            if error.status is not None and 400 <= error.status < 500:
                return await self._refused(
                    job, attempt, f"Kubernetes refused the BuildJob: {error.status} {error.reason}"
                )
            raise
        log.info("job %s attempt %d handed to the operator as BuildJob %s", state.job_id, attempt, state.job_id)
        return True

    @staticmethod
    async def _refused(job: JobHandle, attempt: int, reason: str) -> bool:
        assert job.state is not None
        try:
            await job.run(job.state.job_id, FailJob(attempt, reason))
        except InvalidTransition:
            return False
        return True
