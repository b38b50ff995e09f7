"""Running one attempt of a job on an executor, from ``started`` to a terminal event.

Every way out of here ends the attempt: steps run to their end (succeeded or failed), set-up errors and engine
refusals fail it with a reason a person can act on, the job's timeout fails it, a cancel stops it, and a shutdown
hands it back to the queue; so does the engine losing the attempt (its container removed from outside, the engine
gone away: ``AttemptLost``), counted against ``MAX_ATTEMPTS`` as a lost executor is. While it runs, the runner
follows the job's own events, so a cancel (or the scheduler handing the attempt to someone else) interrupts the
running step at once. Whatever happened, the engine is cleaned up. A job's inputs are placed into its workspace
before its first step; its artifacts are kept after its end (its terminal event already appended) and before the
workspace is removed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from opentelemetry import trace
from opentelemetry.trace import Span, StatusCode
from opentelemetry.util.types import AttributeValue

from hades.adapters.nats.log_store import StepLogWriter
from hades.core.errors import InvalidTransition
from hades.core.events import Event, JobCancelRequested, JobQueued
from hades.core.lifecycle import (
    ConcludeJob,
    FailJob,
    FinishStep,
    JobState,
    RequeueJob,
    StartAttempt,
    StartStep,
    Status,
    StopJob,
    cancel_reason,
    conclusion,
    hand_back,
)
from hades.core.logs import LogBudget
from hades.core.ports import AttemptLost, ExecutionError, Executor, StepResult, WorkspaceFiles
from hades.core.spec import Priority
from hades.core.state import replace
from hades.metrics import ProcessMetrics
from hades.tasks import stop_all
from hades.tracing import parent_context
from hades.workers.artifacts import Artifacts
from hades.workers.jobs import JobHandle

log = logging.getLogger(__name__)

#: A step's log writer: job id, step id, the attempt's log budget, the attempt.
WriterFactory = Callable[[str, int, LogBudget, int], StepLogWriter]
Unwatch = Callable[[], Awaitable[None]]
#: Follow one job's events: ``watch(job_id, on_event)`` returns how to stop following.
JobWatcher = Callable[[str, Callable[[Event], None]], Awaitable[Unwatch]]
#: The environment a pipeline's stage gets: ``stage_env(pipeline_id, stage)``.
StageEnv = Callable[[str, str], Awaitable[dict[str, str]]]

HANDED_BACK = "executor shut down; attempt handed back to the queue"
#: Seconds between checks of a heard cancel while the store cannot be read.
_CHECK_RETRY_SECONDS = 0.5


class AttemptRunner:
    """Takes a queued attempt and drives it to a terminal event."""

    def __init__(
        self,
        executor: Executor,
        writers: WriterFactory,
        executor_id: str,
        watch: JobWatcher,
        log_limits: LogBudget | None = None,
        tracer: trace.Tracer | None = None,
        metrics: ProcessMetrics | None = None,
        labels: dict[str, str] | None = None,
        artifacts: Artifacts | None = None,
        stage_env: StageEnv | None = None,
        max_attempts: int = 3,
    ) -> None:
        self._stage_env = stage_env
        self._max_attempts = max_attempts  # MAX_ATTEMPTS: attempts lost to the engine count against it
        self._limits = log_limits or LogBudget()
        self._artifacts = artifacts
        self._labels = labels  # recorded on every attempt this executor starts
        self._executor = executor
        self._writers = writers
        self._executor_id = executor_id
        self._watch = watch
        self._tracer = tracer or trace.NoOpTracer()
        self._metrics = metrics

    async def run(
        self,
        job: JobHandle,
        attempt: int,
        traceparent: str | None = None,
        claim: str | None = None,
        priority: Priority | None = None,
    ) -> bool:
        """Run the attempt; False when it was no longer ours to run (someone else took or ended it).

        ``traceparent`` is the queued event's: the attempt's span (and its steps') continue the job's trace.
        ``claim`` names the queue message's delivery the start is decided on (``JobStarted.claim``).
        ``priority`` is the queue's it was taken from: a job promoted since is not started from the older queueing.

        The job's interruptions are listened to before ``started`` is appended: one published after that is heard,
        and one stored before it makes the append a conflict, so no read of the store is needed to know the attempt
        began uninterrupted (that was one request per job).
        """
        assert job.state is not None
        job_id = job.state.job_id
        began = time.time_ns()
        heard = _Interruptions(job, job_id, attempt)
        unwatch = await self._watch(job_id, heard.on_event)
        try:
            await job.run(job_id, StartAttempt(attempt, self._executor_id, self._labels, claim, priority))
        except BaseException as error:
            await asyncio.shield(unwatch())
            if isinstance(error, InvalidTransition):
                return False  # no span: the attempt was never ours
            raise
        attributes: dict[str, AttributeValue] = {
            "hades.job_id": job_id,
            "hades.attempt": attempt,
            "hades.executor_id": self._executor_id,
        }
        span = self._tracer.start_span(
            "hades.attempt", parent_context(traceparent), attributes=attributes, start_time=began
        )
        if self._metrics is not None:
            self._metrics.attempts_started.inc()
        try:
            with trace.use_span(span):
                await self._run_started(job, job_id, attempt, heard, unwatch)
        finally:
            self._ended(job, span)
        return True

    def _ended(self, job: JobHandle, span: Span) -> None:
        """Record how the attempt left the job on its span and in the counters."""
        state = job.state
        status = state.status.value if state is not None else "unknown"
        span.set_attribute("hades.status", status)
        if state is not None and state.status is Status.FAILED:
            span.set_status(StatusCode.ERROR, state.reason)
        span.end()
        if self._metrics is not None:
            self._metrics.attempts_finished.labels(status).inc()

    async def _run_started(
        self, job: JobHandle, job_id: str, attempt: int, heard: _Interruptions, unwatch: Unwatch
    ) -> None:
        assert job.state is not None
        started = job.state  # the attempt as it began: what cleanup removes, whatever the job does next
        work = asyncio.create_task(self._work(job, job_id, attempt), name=f"attempt-{job_id}-{attempt}")
        heard.follow(work)
        try:
            await work
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                await asyncio.shield(self._end(job, RequeueJob(attempt, HANDED_BACK)))
                raise
            await asyncio.shield(self._interrupted(job, job_id, attempt))
        finally:
            heard.stop()
            await asyncio.shield(unwatch())
            await asyncio.shield(self._keep_artifacts(job, attempt))
            await asyncio.shield(self._cleanup(started))

    async def _work(self, job: JobHandle, job_id: str, attempt: int) -> None:
        assert job.state is not None
        timeout = job.state.spec.timeout_seconds or None
        try:
            async with asyncio.timeout(timeout):
                await self._prepare_and_run(job, job_id, attempt)
        except TimeoutError:
            await self._end(job, FailJob(attempt, f"job timed out after {timeout} seconds"))
        except AttemptLost as lost:  # before ExecutionError, its base: the engine's fault, not the job's
            log.warning("job %s attempt %d lost: %s", job_id, attempt, lost.reason)
            await self._end(job, hand_back(attempt, job.state.attempts_allowed(self._max_attempts), lost.reason))
        except ExecutionError as error:
            await self._end(job, FailJob(attempt, error.reason))
        except InvalidTransition:
            await self._interrupted(job, job_id, attempt)
        except Exception as error:  # engine unreachable, a bug: the job still ends, with the cause
            log.exception("job %s attempt %d failed in the executor", job_id, attempt)
            await self._end(job, FailJob(attempt, f"executor error: {type(error).__name__}: {error}"))

    async def _prepare_and_run(self, job: JobHandle, job_id: str, attempt: int) -> None:
        assert job.state is not None
        if job.state.status.is_terminal:  # a job without steps ends as it starts
            return
        budget = LogBudget(self._limits.max_job_bytes, self._limits.max_line_bytes)
        phases = await self._executor.prepare(await self._as_run(job.state))  # a Pod takes its env here
        phases |= await self._place_inputs(job.state)
        prepare: dict[str, float] | None = phases  # on the first step_started: no append of its own
        for index in range(len(job.state.spec.steps)):
            await self._step(job, job_id, attempt, index, budget, prepare)
            if job.state.status is not Status.RUNNING:
                return
            prepare = None

    def _workspace_files(self, job: JobState) -> tuple[Artifacts, WorkspaceFiles] | None:
        """Where the job's inputs and artifacts go; raises ExecutionError when it declares some and this executor
        cannot handle them, None when it declares none."""
        if not job.spec.artifacts and not job.spec.inputs:
            return None
        if self._artifacts is None or not isinstance(self._executor, WorkspaceFiles):
            raise ExecutionError("artifacts and inputs are not supported on this executor")
        return self._artifacts, self._executor

    async def _place_inputs(self, job: JobState) -> dict[str, float]:
        """Put the job's inputs into its workspace; the seconds it took, as the ``inputs`` phase."""
        handled = self._workspace_files(job)
        if handled is None or not job.spec.inputs:
            return {}
        began = time.perf_counter()
        await handled[0].place_inputs(job, handled[1])
        return {"inputs": round(time.perf_counter() - began, 6)}

    async def _keep_artifacts(self, job: JobHandle, attempt: int) -> None:
        """Keep the declared paths of an attempt that ended here, and record what was kept."""
        state = job.state
        if state is None or state.attempt != attempt or not state.status.is_terminal or not state.spec.artifacts:
            return
        try:
            handled = self._workspace_files(state)
            command = await handled[0].collect(state, handled[1]) if handled is not None else None
            if command is not None:
                await job.run(state.job_id, command)
        except Exception:
            log.exception("job %s attempt %d: keeping its artifacts failed", state.job_id, attempt)

    async def _step(
        self,
        job: JobHandle,
        job_id: str,
        attempt: int,
        index: int,
        budget: LogBudget,
        prepare: dict[str, float] | None = None,
    ) -> None:
        """Run one step, from ``step_started`` to ``step_finished``, in its own span."""
        assert job.state is not None
        step = job.state.spec.steps[index]
        attributes: dict[str, AttributeValue] = {
            "hades.job_id": job_id,
            "hades.step.index": index,
            "hades.step.id": step.id,
            "hades.step.image": step.image,
        }
        with self._tracer.start_as_current_span("hades.step", attributes=attributes) as span:
            await job.run(job_id, StartStep(attempt=attempt, step_index=index, prepare=prepare))
            writer = self._writers(job_id, step.id, budget, attempt)
            try:
                result = await self._executor.run_step(await self._as_run(job.state), index, writer)
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
                    phases=result.phases,
                ),
            )
            _record_step(span, result)

    async def _as_run(self, state: JobState) -> JobState:
        """The job as its steps see it: a pipeline stage's gets the pipeline's variables (its token among them)
        over its metadata, here and not in its spec, so the token is never written to an event."""
        ref = state.pipeline
        if ref is None or self._stage_env is None:
            return state
        env = await self._stage_env(ref.id, ref.stage)
        spec = state.spec.model_copy(update={"metadata": {**state.spec.metadata, **env}})
        return replace(state, spec=spec)

    async def _interrupted(self, job: JobHandle, job_id: str, attempt: int) -> None:
        """The job's own events stopped the work: stop it if cancelled, let go if it moved to another attempt."""
        await job.reload(job_id)
        state = job.state
        if state is None or state.attempt != attempt or state.status is not Status.RUNNING:
            log.info("job %s attempt %d is no longer ours; letting go", job_id, attempt)
            return
        if state.cancel_requested_by is not None:
            await self._end(job, StopJob(attempt, cancel_reason(state)))

    async def _end(self, job: JobHandle, command: FailJob | RequeueJob | StopJob | ConcludeJob) -> None:
        assert job.state is not None
        if conclusion(job.state, job.clock.now()) is not None:
            # The job's events already say how it ended (its last step's end landed, the job's did not).
            command = ConcludeJob()
        try:
            await job.run(job.state.job_id, command)
        except InvalidTransition:
            log.info("job %s ended meanwhile; %s not needed", job.state.job_id, type(command).__name__)

    async def _cleanup(self, attempt: JobState | None) -> None:
        assert attempt is not None
        try:
            await self._executor.cleanup(attempt)
        except Exception:
            log.exception("cleanup of job %s failed; the periodic sweep will retry", attempt.job_id)


def _record_step(span: Span, result: StepResult) -> None:
    """The step's exit code on its span, and an error status when it did not exit 0."""
    if result.exit_code is not None:
        span.set_attribute("hades.step.exit_code", result.exit_code)
    if result.error is not None or result.exit_code != 0:
        span.set_status(StatusCode.ERROR, result.error or f"exited with status {result.exit_code}")


class _Interruptions:
    """An attempt's cancel requests and re-queueings as heard, each checked against the store before the work is
    interrupted (a plain subscription also sees publishes the stream refused). One heard before the work began is
    checked as it begins."""

    def __init__(self, job: JobHandle, job_id: str, attempt: int) -> None:
        self._job = job
        self._job_id = job_id
        self._attempt = attempt
        self._work: asyncio.Task[None] | None = None
        self._heard_early = False
        self._checks: set[asyncio.Task[None]] = set()

    def on_event(self, event: Event) -> None:
        """The ``JobWatcher`` callback."""
        if isinstance(event, JobCancelRequested) or (isinstance(event, JobQueued) and event.attempt > self._attempt):
            if self._work is None:
                self._heard_early = True
            else:
                self._check_soon(self._work)

    def follow(self, work: asyncio.Task[None]) -> None:
        """The work to interrupt, from now on."""
        self._work = work
        if self._heard_early:
            self._check_soon(work)

    def stop(self) -> None:
        """Cancel the checks still running."""
        for check in self._checks:
            check.cancel()

    def _check_soon(self, work: asyncio.Task[None]) -> None:
        check = asyncio.create_task(self._check(work))
        self._checks.add(check)
        check.add_done_callback(self._checks.discard)

    async def _check(self, work: asyncio.Task[None]) -> None:
        """Interrupt the work if the stored history says the job was cancelled or moved to another attempt; a store
        that cannot be read yet (NATS restarting) is asked again for as long as the work runs (a check that died
        with its error left a cancel unheeded until the attempt's next append)."""
        while not work.done():
            try:
                await self._check_once(work)
                return
            except Exception as error:
                log.warning("could not check job %s for a cancel (%r); asking again", self._job_id, error)
                await asyncio.sleep(_CHECK_RETRY_SECONDS)

    async def _check_once(self, work: asyncio.Task[None]) -> None:
        job = self._job
        if await job.store.last_seq(self._job_id) <= job.seq:
            return  # nothing was appended but by this attempt: one index lookup instead of reading the history
        fresh = await JobHandle.load(job.store, job.clock, self._job_id)
        state = fresh.state
        if state is not None and (state.cancel_requested_by is not None or state.attempt != self._attempt):
            await stop_all([work], patience=30)  # a cancel lost mid-reply would let the next step run
