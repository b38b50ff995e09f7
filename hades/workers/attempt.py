"""Running one attempt of a job on an executor, from ``started`` to a terminal event.

Every way out of here ends the job: steps run to their end (succeeded or failed), set-up errors and engine
trouble fail it with a reason a person can act on, the job's timeout fails it, and a shutdown hands the
attempt back to the queue. Whatever happened, the engine is cleaned up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from hades.adapters.nats.log_store import StepLogWriter
from hades.core.errors import InvalidTransition
from hades.core.lifecycle import FailJob, FinishStep, RequeueJob, StartAttempt, StartStep, Status
from hades.core.ports import ExecutionError, Executor
from hades.workers.jobs import JobHandle

log = logging.getLogger(__name__)

WriterFactory = Callable[[str, int], StepLogWriter]


class AttemptRunner:
    """Takes a queued attempt and drives it to a terminal event."""

    def __init__(self, executor: Executor, writers: WriterFactory, executor_id: str) -> None:
        self._executor = executor
        self._writers = writers
        self._executor_id = executor_id

    async def run(self, job: JobHandle, attempt: int) -> bool:
        """Run the attempt; False when it was no longer ours to run (someone else took or ended it)."""
        assert job.state is not None
        job_id = job.state.job_id
        try:
            await job.run(job_id, StartAttempt(attempt=attempt, executor_id=self._executor_id))
        except InvalidTransition:
            return False
        try:
            await self._run_steps(job, job_id, attempt)
        except asyncio.CancelledError:
            await asyncio.shield(self._end(job, RequeueJob(attempt, "executor shut down; attempt handed back")))
            raise
        finally:
            await asyncio.shield(self._cleanup(job))
        return True

    async def _run_steps(self, job: JobHandle, job_id: str, attempt: int) -> None:
        assert job.state is not None
        timeout = job.state.spec.timeout_seconds or None
        try:
            async with asyncio.timeout(timeout):
                await self._prepare_and_run(job, job_id, attempt)
        except TimeoutError:
            await self._end(job, FailJob(attempt, f"job timed out after {timeout} seconds"))
        except ExecutionError as error:
            await self._end(job, FailJob(attempt, error.reason))
        except Exception as error:  # engine unreachable, a bug: the job still ends, with the cause
            log.exception("job %s attempt %d failed in the executor", job_id, attempt)
            await self._end(job, FailJob(attempt, f"executor error: {type(error).__name__}: {error}"))

    async def _prepare_and_run(self, job: JobHandle, job_id: str, attempt: int) -> None:
        assert job.state is not None
        if job.state.status.is_terminal:  # a job without steps ends as it starts
            return
        await self._executor.prepare(job.state)
        for index, step in enumerate(job.state.spec.steps):
            await job.run(job_id, StartStep(attempt=attempt, step_index=index))
            writer = self._writers(job_id, step.id)
            try:
                result = await self._executor.run_step(job.state, index, writer)
            finally:
                last_log_seq = await asyncio.shield(writer.close())
            await job.run(
                job_id,
                FinishStep(
                    attempt=attempt,
                    step_index=index,
                    exit_code=result.exit_code,
                    error=result.error,
                    last_log_seq=last_log_seq,
                ),
            )
            if job.state.status is not Status.RUNNING:
                return

    async def _end(self, job: JobHandle, command: FailJob | RequeueJob) -> None:
        assert job.state is not None
        try:
            await job.run(job.state.job_id, command)
        except InvalidTransition:
            log.info("job %s ended meanwhile; %s not needed", job.state.job_id, type(command).__name__)

    async def _cleanup(self, job: JobHandle) -> None:
        assert job.state is not None
        try:
            await self._executor.cleanup(job.state)
        except Exception:
            log.exception("cleanup of job %s failed; the periodic sweep will retry", job.state.job_id)
