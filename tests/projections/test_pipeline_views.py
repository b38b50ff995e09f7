"""A pipeline and its stage jobs in the read models: folded like any job, and a snapshot keeps their pipeline parts."""

from __future__ import annotations

from datetime import UTC, datetime

from hades.core.events import JobSubmitted, PipelineRef, StageEnded, StageLaunched, StagesAdded
from hades.core.ports import Recorded
from hades.core.spec import JobSpec, Priority, Step
from hades.core.stages import Stage, stage_job_id
from hades.projections.snapshot import restore, take
from hades.projections.views import ReadModels

PID = "7d1c2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
AT = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
STEPS = (Step(id=1, script="true"),)


def test_a_pipeline_survives_a_snapshot() -> None:
    spec = JobSpec(name="p", stages=(Stage(name="a", steps=STEPS, artifacts=("dist",)), Stage(name="b", steps=STEPS)))
    a = stage_job_id(PID, "a")
    events = [
        JobSubmitted(job_id=PID, at=AT, spec=spec, priority=Priority.HIGH),
        StageLaunched(job_id=PID, at=AT, stage="a", stage_job_id=a),
        JobSubmitted(
            job_id=a,
            at=AT,
            spec=JobSpec(name="p/a", steps=STEPS),
            priority=Priority.HIGH,
            pipeline=PipelineRef(id=PID, stage="a"),
        ),
        StagesAdded(job_id=PID, at=AT, stages=(Stage(name="c", needs=(), steps=STEPS),), by="stage:a"),
        StageEnded(job_id=PID, at=AT, stage="a", status="Succeeded"),
    ]
    views = ReadModels()
    for seq, event in enumerate(events, start=1):
        views.apply(Recorded(seq=seq, event=event))
    restored = restore(take(views))
    assert restored is not None
    for job_id in (PID, a):
        assert restored.jobs.state(job_id) == views.jobs.state(job_id)
    pipeline = restored.jobs.state(PID)
    assert pipeline is not None and pipeline.progress is not None
    assert [s.name for s in pipeline.progress.stages(pipeline.spec)] == ["a", "b", "c"]
    assert restored.jobs.state(a).pipeline == PipelineRef(id=PID, stage="a")  # type: ignore[union-attr]
