"""The pipeline reconcile, pure: hand-made states, then random DAGs with random stage outcomes driven to a fixed
point (every pipeline ends exactly once, every stage launches at most once and never before its needs succeeded)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from hades.core.events import (
    Event,
    JobCancelRequested,
    JobFailed,
    JobStopped,
    JobSubmitted,
    JobSucceeded,
    StageEnded,
    StageLaunched,
    StagesAdded,
)
from hades.core.lifecycle import evolve, fold
from hades.core.reconcile import (
    Action,
    CancelStageJob,
    EndPipeline,
    EndStage,
    LaunchStage,
    ObservedJob,
    StageStatus,
    SubmitStageJob,
    reconcile,
    stage_views,
)
from hades.core.redact import Redactor
from hades.core.spec import JobSpec, Priority, Step
from hades.core.stages import Stage, stage_job_id
from hades.core.state import JobState, Status

PID = "7d1c2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
AT = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
STEP = (Step(id=1, script="true"),)


def stage(name: str, needs: tuple[str, ...] | None = None) -> Stage:
    return Stage(name=name, needs=needs, steps=STEP)


def pipeline(*stages: Stage) -> JobState:
    spec = JobSpec(name="p", stages=stages)
    state = fold([JobSubmitted(job_id=PID, at=AT, spec=spec, priority=Priority.HIGH)])
    assert state is not None
    return state


def apply(state: JobState, *events: Event) -> JobState:
    for event in events:
        state = evolve(state, event)
    return state


def launched(name: str) -> StageLaunched:
    return StageLaunched(job_id=PID, at=AT, stage=name, stage_job_id=stage_job_id(PID, name))


def ended(name: str, status: str = "Succeeded", reason: str | None = None) -> StageEnded:
    return StageEnded(job_id=PID, at=AT, stage=name, status=status, reason=reason)


def launches(actions: list[Action]) -> list[str]:
    return [a.stage.name for a in actions if isinstance(a, LaunchStage)]


def test_stages_run_in_order_by_default() -> None:
    state = pipeline(stage("build"), stage("test"), stage("deploy"))
    assert state.status is Status.QUEUED
    assert launches(reconcile(state, {})) == ["build"]
    state = apply(state, launched("build"))
    assert state.status is Status.RUNNING and state.started_at == AT
    assert reconcile(state, {}) == []  # build runs
    done = ObservedJob(Status.SUCCEEDED)
    assert reconcile(state, {"build": done}) == [EndStage("build", Status.SUCCEEDED, None)]
    state = apply(state, ended("build"))
    assert launches(reconcile(state, {})) == ["test"]
    state = apply(state, launched("test"), ended("test"), launched("deploy"), ended("deploy"))
    assert reconcile(state, {}) == [EndPipeline(Status.SUCCEEDED, None)]
    assert [v.needs for v in stage_views(state)] == [(), ("build",), ("test",)]


def test_a_dag_starts_its_roots_together_and_joins() -> None:
    state = pipeline(stage("a", ()), stage("b", ()), stage("join", ("a", "b")))
    assert launches(reconcile(state, {})) == ["a", "b"]
    state = apply(state, launched("a"), launched("b"), ended("a"))
    assert reconcile(state, {}) == []  # join waits for b
    state = apply(state, ended("b"))
    assert launches(reconcile(state, {})) == ["join"]


def test_a_failure_skips_its_dependents_but_not_independent_branches() -> None:
    state = pipeline(stage("lint", ()), stage("unit", ()), stage("package", ("lint",)), stage("ship", ("package",)))
    state = apply(state, launched("lint"), launched("unit"), ended("lint", "Failed", "exit 3"))
    views = {v.stage.name: v for v in stage_views(state)}
    assert views["package"].status is StageStatus.SKIPPED and views["package"].reason == "stage lint failed"
    assert views["ship"].status is StageStatus.SKIPPED and views["ship"].reason == "stage package skipped"
    assert reconcile(state, {}) == []  # unit still runs: the pipeline waits for it
    state = apply(state, ended("unit"))
    assert reconcile(state, {}) == [EndPipeline(Status.FAILED, "stage lint failed: exit 3; skipped: package, ship")]


def test_a_stage_cancelled_on_its_own_ends_the_pipeline_stopped() -> None:
    state = pipeline(stage("a"), stage("b"))
    state = apply(state, launched("a"), ended("a", "Stopped", "cancelled by bob"))
    assert reconcile(state, {}) == [EndPipeline(Status.STOPPED, "stage a was stopped: cancelled by bob; skipped: b")]


def test_cancel_stops_running_stages_then_the_pipeline() -> None:
    state = pipeline(stage("a", ()), stage("b", ()), stage("c", ("a",)))
    state = apply(state, launched("a"), launched("b"))
    state = apply(state, JobCancelRequested(job_id=PID, at=AT, by="alice"))
    running = {"a": ObservedJob(Status.RUNNING), "b": ObservedJob(Status.QUEUED)}
    assert reconcile(state, running) == [
        CancelStageJob("a", stage_job_id(PID, "a")),
        CancelStageJob("b", stage_job_id(PID, "b")),
    ]
    asked = {name: ObservedJob(seen.status, cancel_requested=True) for name, seen in running.items()}
    assert reconcile(state, asked) == []
    stopped = {"a": ObservedJob(Status.STOPPED, "cancelled by alice"), "b": asked["b"]}
    assert reconcile(state, stopped) == [EndStage("a", Status.STOPPED, "cancelled by alice")]
    state = apply(state, ended("a", "Stopped"), ended("b", "Stopped"))
    assert reconcile(state, {}) == [EndPipeline(Status.STOPPED, "cancelled by alice")]
    assert {v.stage.name: v.status for v in stage_views(state)}["c"] is StageStatus.SKIPPED


def test_a_launched_stage_whose_job_is_missing_is_submitted_and_an_ended_pipeline_does_nothing() -> None:
    state = apply(pipeline(stage("a")), launched("a"))
    assert reconcile(state, {"a": None}) == [SubmitStageJob(stage("a"), stage_job_id(PID, "a"))]
    over = apply(state, ended("a"), JobSucceeded(job_id=PID, at=AT, attempt=0))
    assert reconcile(over, {}) == []


def test_added_stages_follow_the_last_stage_unless_they_say() -> None:
    state = apply(pipeline(stage("plan")), launched("plan"))
    state = apply(state, StagesAdded(job_id=PID, at=AT, stages=(stage("extra"), stage("side", ())), by="stage:plan"))
    assert [v.needs for v in stage_views(state)] == [(), ("plan",), ()]
    assert launches(reconcile(state, {})) == ["side"]


def test_the_token_is_masked_wherever_metadata_is_shown() -> None:
    masked = Redactor().metadata({"HADES_PIPELINE_TOKEN": "ab12" * 16, "HADES_STAGE": "build"})
    assert masked["HADES_PIPELINE_TOKEN"] != "ab12" * 16 and masked["HADES_STAGE"] == "build"


# -- random DAGs, random outcomes, to a fixed point --------------------------------------------------------------


@st.composite
def dags(draw: st.DrawFn) -> tuple[tuple[Stage, ...], dict[str, str]]:
    """A pipeline of 1-8 stages, each needing the stage before (absent), nothing, or some earlier stages; and the
    outcome each stage's job will have if it runs."""
    count = draw(st.integers(1, 8))
    stages: list[Stage] = []
    for index in range(count):
        name = f"s{index}"
        kind = draw(st.sampled_from(["before", "none", "some"]))
        needs: tuple[str, ...] | None = None
        if kind == "none":
            needs = ()
        elif kind == "some" and stages:
            needs = tuple(draw(st.sets(st.sampled_from([s.name for s in stages]), max_size=3)))
        stages.append(stage(name, needs))
    outcomes = {s.name: draw(st.sampled_from(["Succeeded", "Succeeded", "Failed", "Stopped"])) for s in stages}
    return tuple(stages), outcomes


class Simulation:
    """The events a coordinator would append for each action, and stage jobs that end as the DAG's outcomes say."""

    def __init__(self, stages: tuple[Stage, ...], outcomes: dict[str, str]) -> None:
        self.state = pipeline(*stages)
        self.outcomes = outcomes
        self.jobs: dict[str, str] = {}  # stage -> the status of its job: Queued, or how it ended
        self.ends = 0
        self.launched: set[str] = set()

    def observed(self) -> dict[str, ObservedJob | None]:
        return {name: ObservedJob(Status(status)) for name, status in self.jobs.items()}

    def running(self) -> list[str]:
        return [name for name, status in self.jobs.items() if not Status(status).is_terminal]

    def act(self, action: Action) -> None:
        if isinstance(action, LaunchStage):
            views = {v.stage.name: v for v in stage_views(self.state)}
            assert all(views[need].status is StageStatus.SUCCEEDED for need in views[action.stage.name].needs)
            assert action.stage.name not in self.launched
            self.launched.add(action.stage.name)
            self.state = apply(self.state, launched(action.stage.name))
            self.jobs[action.stage.name] = "Queued"
        elif isinstance(action, EndStage):
            self.state = apply(self.state, ended(action.stage, action.status.value, action.reason))
        elif isinstance(action, CancelStageJob):
            self.jobs[action.stage] = "Stopped"  # a cancelled job stops (at once when queued, soon when running)
        elif isinstance(action, EndPipeline):
            self.ends += 1
            self.state = apply(self.state, _end_event(action))
        else:
            raise AssertionError(f"unexpected {action}")


def _end_event(action: EndPipeline) -> Event:
    if action.status is Status.SUCCEEDED:
        return JobSucceeded(job_id=PID, at=AT, attempt=0)
    if action.status is Status.FAILED:
        return JobFailed(job_id=PID, at=AT, attempt=0, reason=action.reason or "")
    return JobStopped(job_id=PID, at=AT, attempt=0, reason=action.reason or "")


@settings(max_examples=300, deadline=None)
@given(dags(), st.integers(0, 30), st.booleans(), st.randoms(use_true_random=False))
def test_reconcile_to_a_fixed_point_ends_once_and_launches_in_order(
    dag: tuple[tuple[Stage, ...], dict[str, str]], cancel_after: int, cancels: bool, rnd: random.Random
) -> None:
    sim = Simulation(*dag)
    for round_ in range(200):
        if cancels and round_ == cancel_after and not sim.state.status.is_terminal:
            sim.state = apply(sim.state, JobCancelRequested(job_id=PID, at=AT, by="tester"))
        actions = reconcile(sim.state, sim.observed())
        for action in actions:
            sim.act(action)
        if not actions:
            if not sim.running():
                break
            name = rnd.choice(sim.running())
            sim.jobs[name] = sim.outcomes[name]  # a stage's job ends, in any order
    state = sim.state
    assert state.status.is_terminal and sim.ends == 1
    assert reconcile(state, {}) == []
    views = {v.stage.name: v for v in stage_views(state)}
    if state.status is Status.SUCCEEDED:
        assert all(v.status is StageStatus.SUCCEEDED for v in views.values())
    if state.status is Status.FAILED:
        assert any(v.status is StageStatus.FAILED for v in views.values())
    assert all(v.status not in (StageStatus.PENDING, StageStatus.RUNNING) for v in views.values())
