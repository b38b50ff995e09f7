"""The job lifecycle: ``decide`` turns commands into events, ``evolve`` folds them, terminal states absorb.

Example tests walk the paths a job takes; a Hypothesis state machine then throws random commands at one job and
checks the invariants after every step. Time and ids come from outside, as they do in the workers.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from hades.core.codec import decode_event, encode_event
from hades.core.errors import InvalidTransition
from hades.core.events import (
    Event,
    JobFailed,
    JobQueued,
    JobStarted,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    StepFinished,
    StepOutcome,
    StepStarted,
)
from hades.core.lifecycle import (
    MAX_REASON_CHARS,
    Command,
    ConcludeJob,
    FailJob,
    FinishStep,
    JobState,
    QueueJob,
    RequeueJob,
    StartAttempt,
    StartStep,
    Status,
    StepState,
    StepStatus,
    StopJob,
    SubmitJob,
    cap_reason,
    conclusion,
    decide,
    evolve,
    fold,
)
from hades.core.spec import JobSpec, Priority, Step

JOB_ID = "0b7e3b52-5d0f-4f4e-9a53-2d6f8f1d6c11"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TERMINAL = (JobSucceeded, JobFailed, JobStopped)


def make_step(index: int, *, continue_on_error: bool = False) -> Step:
    return Step(
        id=index + 1, name=f"step-{index}", image=f"img-{index}", script="true", continue_on_error=continue_on_error
    )


def make_spec(*steps: Step, priority: int = 3) -> JobSpec:
    return JobSpec(name="grade", steps=steps, priority=priority)


class Job:
    """One job driven through decide + evolve, with a clock that moves one second per command."""

    def __init__(self, spec: JobSpec, job_id: str = JOB_ID) -> None:
        self.job_id = job_id
        self.state: JobState | None = None
        self.history: list[Event] = []
        self.tick = 0
        self.run(SubmitJob(job_id=job_id, spec=spec, submitted_by="tester"))

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.tick)

    def run(self, command: Command) -> list[Event]:
        self.tick += 1
        events = decide(self.state, command, self.now())
        for event in events:
            self.state = evolve(self.state, event)
        self.history.extend(events)
        return events

    @property
    def current(self) -> JobState:
        assert self.state is not None
        return self.state

    def status(self) -> Status:
        """The current status (a call, so type checkers do not narrow it across commands)."""
        return self.current.status

    def started(self) -> Job:
        """Queue the first attempt and start it."""
        self.run(QueueJob())
        self.run(StartAttempt(attempt=1, executor_id="exec-1"))
        return self


def types(events: list[Event]) -> list[str]:
    return [event.type for event in events]


# -- the happy path ----------------------------------------------------------------------------------------------


def test_submit_records_the_spec_under_the_job_id_and_its_priority() -> None:
    job = Job(make_spec(make_step(0), priority=1))
    [submitted] = job.history
    assert isinstance(submitted, JobSubmitted)
    assert str(submitted.spec.id) == JOB_ID
    assert submitted.priority is Priority.LOW
    assert submitted.submitted_by == "tester"
    assert submitted.at == T0 + timedelta(seconds=1)
    state = job.current
    assert state.status is Status.QUEUED
    assert state.awaiting_queue
    assert state.attempt == 0
    assert state.submitted_at == submitted.at


def test_happy_path_runs_every_step_and_succeeds() -> None:
    job = Job(make_spec(make_step(0), make_step(1)))

    [queued] = job.run(QueueJob())
    assert isinstance(queued, JobQueued)
    assert (queued.attempt, queued.priority, queued.reason) == (1, Priority.HIGH, None)
    assert queued.subject_token == "queued.high"
    assert job.status() is Status.QUEUED
    assert not job.current.awaiting_queue

    assert types(job.run(StartAttempt(attempt=1, executor_id="exec-1"))) == ["started"]
    assert job.status() is Status.RUNNING
    assert job.current.executor_id == "exec-1"
    assert [s.status for s in job.current.steps] == [StepStatus.PENDING, StepStatus.PENDING]

    [step_started] = job.run(StartStep(attempt=1, step_index=0))
    assert isinstance(step_started, StepStarted)
    assert (step_started.step_id, step_started.image) == (1, "img-0")
    assert job.current.steps[0].status is StepStatus.RUNNING

    [step_finished] = job.run(FinishStep(attempt=1, step_index=0, exit_code=0, last_log_seq=7))
    assert isinstance(step_finished, StepFinished)
    assert step_finished.outcome is StepOutcome.SUCCEEDED
    assert step_finished.reason is None
    assert job.status() is Status.RUNNING
    first = job.current.steps[0]
    assert (first.status, first.last_log_seq) == (StepStatus.SUCCEEDED, 7)

    job.run(StartStep(attempt=1, step_index=1))
    last = job.run(FinishStep(attempt=1, step_index=1, exit_code=0))
    assert types(last) == ["step_finished", "succeeded"]
    state = job.current
    assert state.status is Status.SUCCEEDED
    assert state.reason is None
    assert state.finished_at == job.now()
    assert [s.status for s in state.steps] == [StepStatus.SUCCEEDED, StepStatus.SUCCEEDED]
    assert state.events == len(job.history) == 8
    assert fold(job.history) == state


def test_a_failing_step_fails_the_job_in_the_same_decision() -> None:
    job = Job(make_spec(make_step(0), make_step(1), make_step(2))).started()
    job.run(StartStep(attempt=1, step_index=0))
    job.run(FinishStep(attempt=1, step_index=0, exit_code=0))
    job.run(StartStep(attempt=1, step_index=1))

    events = job.run(FinishStep(attempt=1, step_index=1, exit_code=3))

    assert types(events) == ["step_finished", "failed"]
    finished, failed = events
    assert isinstance(finished, StepFinished) and isinstance(failed, JobFailed)
    assert finished.outcome is StepOutcome.FAILED
    assert finished.exit_code == 3
    assert finished.reason == failed.reason == "container exited with status 3"
    assert not finished.tolerated
    assert job.status() is Status.FAILED
    assert job.current.steps[2].status is StepStatus.PENDING
    with pytest.raises(InvalidTransition):
        job.run(StartStep(attempt=1, step_index=2))


def test_a_step_error_is_the_reason_whatever_the_exit_code() -> None:
    job = Job(make_spec(make_step(0))).started()
    job.run(StartStep(attempt=1, step_index=0))
    events = job.run(FinishStep(attempt=1, step_index=0, exit_code=None, error="pull failed: manifest unknown"))
    assert types(events) == ["step_finished", "failed"]
    assert job.current.reason == "pull failed: manifest unknown"
    assert job.current.steps[0].exit_code is None


def test_continue_on_error_records_the_failure_and_goes_on_to_success() -> None:
    job = Job(make_spec(make_step(0, continue_on_error=True), make_step(1))).started()
    job.run(StartStep(attempt=1, step_index=0))

    [tolerated] = job.run(FinishStep(attempt=1, step_index=0, exit_code=2))
    assert isinstance(tolerated, StepFinished)
    assert tolerated.outcome is StepOutcome.FAILED
    assert tolerated.tolerated
    assert tolerated.reason == "container exited with status 2"
    assert job.status() is Status.RUNNING
    assert job.current.steps[0].status is StepStatus.FAILED

    job.run(StartStep(attempt=1, step_index=1))
    assert types(job.run(FinishStep(attempt=1, step_index=1, exit_code=0))) == ["step_finished", "succeeded"]
    assert job.status() is Status.SUCCEEDED


def test_a_tolerated_failure_of_the_last_step_still_succeeds() -> None:
    job = Job(make_spec(make_step(0), make_step(1, continue_on_error=True))).started()
    job.run(StartStep(attempt=1, step_index=0))
    job.run(FinishStep(attempt=1, step_index=0, exit_code=0))
    job.run(StartStep(attempt=1, step_index=1))
    assert types(job.run(FinishStep(attempt=1, step_index=1, exit_code=1))) == ["step_finished", "succeeded"]
    assert job.status() is Status.SUCCEEDED
    assert job.current.steps[1].status is StepStatus.FAILED


def test_a_job_without_steps_succeeds_as_it_starts() -> None:
    job = Job(make_spec())
    job.run(QueueJob())
    events = job.run(StartAttempt(attempt=1, executor_id="exec-1"))
    assert types(events) == ["started", "succeeded"]
    assert all(event.attempt == 1 for event in events if isinstance(event, JobStarted | JobSucceeded))
    assert job.status() is Status.SUCCEEDED
    assert job.current.steps == ()


# -- ending and handing back -------------------------------------------------------------------------------------


@pytest.mark.parametrize("running", [False, True], ids=["queued", "running"])
def test_fail_job_ends_the_attempt_as_failed(running: bool) -> None:
    job = Job(make_spec(make_step(0)))
    job.run(QueueJob())
    if running:
        job.run(StartAttempt(attempt=1, executor_id="exec-1"))
    [failed] = job.run(FailJob(attempt=1, reason="job timed out after 5 seconds"))
    assert isinstance(failed, JobFailed)
    assert (failed.attempt, failed.reason) == (1, "job timed out after 5 seconds")
    assert job.status() is Status.FAILED
    assert job.current.reason == "job timed out after 5 seconds"


@pytest.mark.parametrize("running", [False, True], ids=["queued", "running"])
def test_stop_job_ends_the_attempt_as_stopped(running: bool) -> None:
    job = Job(make_spec(make_step(0)))
    job.run(QueueJob())
    if running:
        job.run(StartAttempt(attempt=1, executor_id="exec-1"))
    [stopped] = job.run(StopJob(attempt=1, reason="cancelled by alice"))
    assert isinstance(stopped, JobStopped)
    assert (stopped.attempt, stopped.reason) == (1, "cancelled by alice")
    assert job.status() is Status.STOPPED


def test_requeue_hands_the_attempt_back_as_the_next_one() -> None:
    job = Job(make_spec(make_step(0), make_step(1))).started()
    job.run(StartStep(attempt=1, step_index=0))

    [queued] = job.run(RequeueJob(attempt=1, reason="executor shut down; attempt handed back"))

    assert isinstance(queued, JobQueued)
    assert (queued.attempt, queued.reason, queued.priority) == (2, "executor shut down; attempt handed back", "high")
    state = job.current
    assert state.status is Status.QUEUED
    assert state.attempt == 2
    assert state.steps == ()
    assert state.executor_id is None
    assert state.started_at is None
    assert state.reason == "executor shut down; attempt handed back"
    assert not state.awaiting_queue  # the requeue is itself the queue entry
    with pytest.raises(InvalidTransition):
        job.run(QueueJob())
    with pytest.raises(InvalidTransition):
        job.run(StartAttempt(attempt=1, executor_id="exec-1"))
    job.run(StartAttempt(attempt=2, executor_id="exec-2"))
    assert [s.status for s in job.current.steps] == [StepStatus.PENDING, StepStatus.PENDING]
    assert job.current.reason is None
    job.run(StartStep(attempt=2, step_index=0))


def test_reasons_are_capped_at_500_characters_plus_an_ellipsis() -> None:
    assert cap_reason("x" * MAX_REASON_CHARS) == "x" * MAX_REASON_CHARS
    assert cap_reason("y" * (MAX_REASON_CHARS + 1)) == "y" * MAX_REASON_CHARS + "…"
    long = "z" * 2000

    for command in (FailJob(1, long), StopJob(1, long), RequeueJob(1, long)):
        job = Job(make_spec(make_step(0))).started()
        [event] = job.run(command)
        assert isinstance(event, JobFailed | JobStopped | JobQueued)
        assert event.reason == "z" * 500 + "…"

    job = Job(make_spec(make_step(0))).started()
    job.run(StartStep(attempt=1, step_index=0))
    finished, failed = job.run(FinishStep(attempt=1, step_index=0, exit_code=None, error=long))
    assert isinstance(finished, StepFinished) and isinstance(failed, JobFailed)
    assert finished.reason == failed.reason == "z" * 500 + "…"


# -- invalid transitions -----------------------------------------------------------------------------------------


def _queued() -> Job:
    job = Job(make_spec(make_step(0), make_step(1)))
    job.run(QueueJob())
    return job


def _running() -> Job:
    return Job(make_spec(make_step(0), make_step(1))).started()


def _step_running() -> Job:
    job = _running()
    job.run(StartStep(attempt=1, step_index=0))
    return job


INVALID = {
    "queue twice": (_queued, QueueJob()),
    "start before queued": (lambda: Job(make_spec(make_step(0))), StartAttempt(attempt=0, executor_id="e")),
    "start a wrong attempt": (_queued, StartAttempt(attempt=2, executor_id="e")),
    "start attempt zero": (_queued, StartAttempt(attempt=0, executor_id="e")),
    "start the same attempt twice": (_running, StartAttempt(attempt=1, executor_id="e")),
    "step before started": (_queued, StartStep(attempt=1, step_index=0)),
    "step of another attempt": (_running, StartStep(attempt=2, step_index=0)),
    "second step first": (_running, StartStep(attempt=1, step_index=1)),
    "step index out of range": (_running, StartStep(attempt=1, step_index=2)),
    "negative step index": (_running, StartStep(attempt=1, step_index=-1)),
    "same step twice": (_step_running, StartStep(attempt=1, step_index=0)),
    "finish a step not started": (_running, FinishStep(attempt=1, step_index=0, exit_code=0)),
    "finish another step": (_step_running, FinishStep(attempt=1, step_index=1, exit_code=0)),
    "finish of another attempt": (_step_running, FinishStep(attempt=2, step_index=0, exit_code=0)),
    "fail another attempt": (_running, FailJob(attempt=2, reason="r")),
    "stop an earlier attempt": (_running, StopJob(attempt=0, reason="r")),
    "requeue another attempt": (_running, RequeueJob(attempt=3, reason="r")),
    "submit twice": (_running, SubmitJob(job_id=JOB_ID, spec=make_spec())),
}


@pytest.mark.parametrize(("setup", "command"), INVALID.values(), ids=INVALID.keys())
def test_invalid_transitions_are_refused(setup: Callable[[], Job], command: Command) -> None:
    job = setup()
    before = job.state
    with pytest.raises(InvalidTransition):
        job.run(command)
    assert job.state is before


def _ended(how: str) -> Job:
    job = _step_running()
    if how == "succeeded":
        job.run(FinishStep(attempt=1, step_index=0, exit_code=0))
        job.run(StartStep(attempt=1, step_index=1))
        job.run(FinishStep(attempt=1, step_index=1, exit_code=0))
    elif how == "failed":
        job.run(FinishStep(attempt=1, step_index=0, exit_code=1))
    else:
        job.run(StopJob(attempt=1, reason="cancelled"))
    assert job.current.status.is_terminal
    return job


ANY_COMMAND: list[Command] = [
    SubmitJob(job_id=JOB_ID, spec=make_spec()),
    QueueJob(),
    StartAttempt(attempt=1, executor_id="e"),
    StartAttempt(attempt=2, executor_id="e"),
    StartStep(attempt=1, step_index=0),
    StartStep(attempt=1, step_index=1),
    FinishStep(attempt=1, step_index=0, exit_code=0),
    FinishStep(attempt=1, step_index=1, exit_code=0),
    RequeueJob(attempt=1, reason="r"),
    FailJob(attempt=1, reason="r"),
    StopJob(attempt=1, reason="r"),
]


@pytest.mark.parametrize("how", ["succeeded", "failed", "stopped"])
@pytest.mark.parametrize("command", ANY_COMMAND, ids=lambda c: type(c).__name__)
def test_terminal_states_absorb_every_command(how: str, command: Command) -> None:
    job = _ended(how)
    with pytest.raises(InvalidTransition):
        job.run(command)


@pytest.mark.parametrize("command", ANY_COMMAND[1:], ids=lambda c: type(c).__name__)
def test_no_command_but_submit_applies_to_an_unknown_job(command: Command) -> None:
    with pytest.raises(InvalidTransition):
        decide(None, command, T0)


def test_evolve_refuses_a_second_submitted_and_events_before_it() -> None:
    job = Job(make_spec(make_step(0)))
    submitted = job.history[0]
    with pytest.raises(InvalidTransition):
        evolve(job.state, submitted)
    with pytest.raises(InvalidTransition):
        evolve(None, JobQueued(job_id=JOB_ID, at=T0, attempt=1, priority=Priority.HIGH))


def test_the_fold_builds_states_as_their_constructors_do() -> None:
    """evolve copies templates instead of calling the dataclasses' __init__ (for speed): same fields, same values,
    same field order in ``__dict__``, still frozen."""
    job = Job(make_spec(make_step(0), make_step(1))).started()
    [submitted, *_] = job.history
    assert isinstance(submitted, JobSubmitted)
    new = evolve(None, submitted)
    built = JobState(
        job_id=JOB_ID,
        spec=submitted.spec,
        priority=submitted.priority,
        status=Status.QUEUED,
        submitted_at=submitted.at,
        events=1,
    )
    assert new == built
    assert list(vars(new).items()) == list(vars(built).items())
    steps = job.current.steps
    assert steps == (StepState(index=0, step_id=1), StepState(index=1, step_id=2))
    assert [list(vars(s)) for s in steps] == [list(vars(StepState(index=0, step_id=0)))] * 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        new.attempt = 3  # type: ignore[misc]


def test_a_step_cannot_start_while_the_previous_one_runs() -> None:
    job = _step_running()
    with pytest.raises(InvalidTransition):
        job.run(StartStep(attempt=1, step_index=1))


# -- properties --------------------------------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), max_size=8)
_steps = st.builds(
    Step,
    id=st.integers(0, 2**31),
    name=_text,
    image=_text,
    script=_text,
    continue_on_error=st.booleans(),
    metadata=st.dictionaries(_text, _text, max_size=2),
)
specs = st.builds(
    JobSpec,
    name=_text.filter(bool),
    steps=st.lists(_steps, max_size=4).map(tuple),
    priority=st.integers(-1, 5),
    metadata=st.dictionaries(_text, _text, max_size=2),
    timestamp=st.none() | st.datetimes(timezones=st.just(UTC)),
    timeout_seconds=st.integers(0, 3600),
)
#: None stands for "the value that fits the state" (current attempt, next step), so deep states are reached.
attempts = st.none() | st.integers(-1, 5)
indices = st.none() | st.integers(-1, 5)
#: Ending an attempt hits the current one less often, so jobs live long enough to run their steps.
ending_attempts = st.sampled_from([-1, 0, 1, 2, 3, 4])
exit_codes = st.none() | st.sampled_from([0, 0, 0, 1, 2, 137]) | st.integers(-1, 255)
errors = st.none() | st.text(max_size=600)
reasons = st.text(max_size=600)


class LifecycleMachine(RuleBasedStateMachine):
    """Random commands against one job; every accepted decision is folded and the invariants checked."""

    def __init__(self) -> None:
        super().__init__()
        self.state: JobState | None = None
        self.history: list[Event] = []
        self.tick = 0
        self.highest_attempt = 0
        self.job_id = ""

    # -- driving

    def apply(self, command: Command) -> None:
        self.tick += 1
        now = T0 + timedelta(seconds=self.tick)
        before = self.state
        if before is not None and before.status.is_terminal:
            with pytest.raises(InvalidTransition):
                decide(before, command, now)
            return
        try:
            events = decide(before, command, now)
        except InvalidTransition:
            return
        assert events, f"{command} was accepted but decided nothing"
        state = before
        for event in events:
            assert event.job_id == self.job_id
            assert event.at == now
            state = evolve(state, event)
        self.check_decision(before, events)
        self.state = state
        self.history.extend(events)

    def check_decision(self, before: JobState | None, events: list[Event]) -> None:
        terminal = [event for event in events if isinstance(event, TERMINAL)]
        assert len(terminal) <= 1
        assert not terminal or events[-1] is terminal[0], "a terminal event is always the last of a decision"
        for event in events:
            if isinstance(event, JobQueued):
                assert before is not None
                assert event.attempt == before.attempt + 1, "a new attempt is numbered one above the last"

    def attempt(self, drawn: int | None) -> int:
        return self.state.attempt if drawn is None and self.state is not None else (drawn or 0)

    def next_step(self, drawn: int | None) -> int:
        if drawn is not None or self.state is None:
            return drawn or 0
        pending = [s.index for s in self.state.steps if s.status is StepStatus.PENDING]
        return pending[0] if pending else len(self.state.steps)

    def running_step(self, drawn: int | None) -> int:
        if drawn is not None or self.state is None:
            return drawn or 0
        running = [s.index for s in self.state.steps if s.status is StepStatus.RUNNING]
        return running[0] if running else 0

    # -- rules

    @initialize(job_id=st.uuids().map(str), spec=specs, by=st.none() | _text)
    def submit(self, job_id: str, spec: JobSpec, by: str | None) -> None:
        self.job_id = job_id
        self.apply(SubmitJob(job_id=job_id, spec=spec, submitted_by=by))
        assert self.state is not None
        assert self.state.spec.id is not None and str(self.state.spec.id) == job_id

    @rule(spec=specs)
    def submit_again(self, spec: JobSpec) -> None:
        with pytest.raises(InvalidTransition):
            decide(self.state, SubmitJob(job_id=self.job_id, spec=spec), T0)

    @rule(exit_code=st.sampled_from([0, 0, 0, 1]))
    def advance(self, exit_code: int) -> None:
        """What a well-behaved executor sends next, so that random runs also reach the later steps."""
        state = self.state
        assert state is not None
        running = [s.index for s in state.steps if s.status is StepStatus.RUNNING]
        if state.awaiting_queue or state.status.is_terminal:
            self.apply(QueueJob())
        elif state.status is Status.QUEUED:
            self.apply(StartAttempt(attempt=state.attempt, executor_id="exec-a"))
        elif running:
            self.apply(FinishStep(attempt=state.attempt, step_index=running[0], exit_code=exit_code))
        else:
            self.apply(StartStep(attempt=state.attempt, step_index=self.next_step(None)))

    @rule()
    def queue(self) -> None:
        self.apply(QueueJob())

    @rule(attempt=attempts, executor=st.sampled_from(["exec-a", "exec-b"]))
    def start_attempt(self, attempt: int | None, executor: str) -> None:
        self.apply(StartAttempt(attempt=self.attempt(attempt), executor_id=executor))

    @rule(attempt=attempts, index=indices)
    def start_step(self, attempt: int | None, index: int | None) -> None:
        self.apply(StartStep(attempt=self.attempt(attempt), step_index=self.next_step(index)))

    @rule(attempt=attempts, index=indices, exit_code=exit_codes, error=errors, seq=st.none() | st.integers(0, 10**6))
    def finish_step(
        self, attempt: int | None, index: int | None, exit_code: int | None, error: str | None, seq: int | None
    ) -> None:
        command = FinishStep(self.attempt(attempt), self.running_step(index), exit_code, error, seq)
        self.apply(command)

    @rule(end=st.sampled_from([RequeueJob, FailJob, StopJob]), attempt=ending_attempts, reason=reasons)
    def end_attempt(self, end: type[RequeueJob | FailJob | StopJob], attempt: int, reason: str) -> None:
        self.apply(end(attempt=attempt, reason=reason))

    # -- invariants

    @invariant()
    def at_most_one_terminal_event_and_it_is_last(self) -> None:
        terminal = [i for i, event in enumerate(self.history) if isinstance(event, TERMINAL)]
        assert len(terminal) <= 1
        assert not terminal or terminal[0] == len(self.history) - 1
        if self.state is not None:
            assert self.state.status.is_terminal == bool(terminal)

    @invariant()
    def attempts_never_go_back_and_only_the_latest_is_active(self) -> None:
        if self.state is None:
            return
        assert self.state.attempt >= self.highest_attempt
        self.highest_attempt = self.state.attempt
        latest = 0
        for event in self.history:
            if isinstance(event, JobQueued):
                assert event.attempt == latest + 1
                latest = event.attempt
            elif not isinstance(event, JobSubmitted):
                assert event.attempt == latest, f"{event.type} for attempt {event.attempt} while {latest} is active"
        assert self.state.attempt == latest
        started = Counter(event.attempt for event in self.history if isinstance(event, JobStarted))
        assert all(count == 1 for count in started.values()), "an attempt is started once"

    @invariant()
    def each_step_starts_once_per_attempt_in_order(self) -> None:
        started: dict[int, list[int]] = {}
        finished: dict[int, list[int]] = {}
        for event in self.history:
            if isinstance(event, StepStarted):
                started.setdefault(event.attempt, []).append(event.step_index)
            elif isinstance(event, StepFinished):
                assert event.step_index in started.get(event.attempt, []), "a step finishes only after it started"
                finished.setdefault(event.attempt, []).append(event.step_index)
        for attempt, indices in started.items():
            assert indices == list(range(len(indices))), f"attempt {attempt} started steps {indices}"
        for indices in finished.values():
            assert len(indices) == len(set(indices)), "a step finishes once"

    @invariant()
    def steps_follow_the_spec(self) -> None:
        if self.state is None or not self.state.steps:
            return
        assert [(s.index, s.step_id) for s in self.state.steps] == [
            (i, step.id) for i, step in enumerate(self.state.spec.steps)
        ]
        for step in self.state.steps:
            assert step.reason is None or len(step.reason) <= MAX_REASON_CHARS + 1

    @invariant()
    def replay_reproduces_the_state(self) -> None:
        assert fold(self.history) == self.state
        assert fold(list(self.history)) == fold(self.history), "evolve is deterministic"
        if self.state is not None:
            assert self.state.events == len(self.history)

    @invariant()
    def the_history_round_trips_through_the_codec(self) -> None:
        decoded = [decode_event(encode_event(event)) for event in self.history]
        assert decoded == self.history
        assert [type(event) for event in decoded] == [type(event) for event in self.history]
        assert fold(decoded) == self.state

    @invariant()
    def an_end_is_due_exactly_where_a_decision_was_cut_before_its_end(self) -> None:
        """Decisions are appended event by event, so a writer may stop between a step's (or a cancel's) event and
        the job's end. Wherever the history is cut, ``conclusion`` names an end exactly when the next recorded
        event is that end; a whole decision never leaves one due."""
        state: JobState | None = None
        for position, event in enumerate(self.history):
            state = evolve(state, event)
            due = conclusion(state, event.at)
            following = self.history[position + 1] if position + 1 < len(self.history) else None
            if due is None:  # the machine's clock moves per command: the same moment means the same decision
                assert not (isinstance(following, TERMINAL) and following.at == event.at)
            else:
                assert following is not None and following.model_copy(update={"at": event.at}) == due

    @rule()
    def conclude(self) -> None:
        self.apply(ConcludeJob())  # a whole history never has an end due: always refused


LifecycleMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestLifecycle = LifecycleMachine.TestCase


class StrictStepOrderMachine(LifecycleMachine):
    """Steps run one after the other: a step starts only once every earlier step has finished."""

    @invariant()
    def a_step_starts_only_after_the_earlier_ones_finished(self) -> None:
        if self.state is None:
            return
        running = [s.index for s in self.state.steps if s.status is StepStatus.RUNNING]
        assert len(running) <= 1, f"steps {running} run at once"
        if self.state.status is Status.SUCCEEDED:
            assert all(s.status in (StepStatus.SUCCEEDED, StepStatus.FAILED) for s in self.state.steps)


StrictStepOrderMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStrictStepOrder = StrictStepOrderMachine.TestCase
