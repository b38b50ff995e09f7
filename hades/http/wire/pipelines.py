"""The answers about a pipeline's stages (``POST /jobs/{id}/stages``, the stages of ``GET /jobs/{id}``) and a
job's artifacts (``GET /jobs/{id}/artifacts``)."""

from __future__ import annotations

from typing import TypedDict


class StageRow(TypedDict):
    """One stage of a pipeline's ``GET /jobs/{id}`` (docs/pipelines.md); ``status`` is Pending, Skipped, its job's
    status while it runs, then how it ended."""

    name: str
    needs: list[str]
    job_id: str | None
    status: str
    reason: str | None
    launched_at: str | None
    ended_at: str | None


class PipelineOfStage(TypedDict):
    """A stage's job's ``GET /jobs/{id}``: the pipeline and stage it runs."""

    id: str
    stage: str


class StagesAccepted(TypedDict):
    """``POST /jobs/{id}/stages`` 202: the stages added and the pipeline's status."""

    job_id: str
    stages: list[str]
    status: str


class ArtifactRow(TypedDict):
    """One kept file; ``expired`` once retention removed it from the object store."""

    path: str
    size: int
    sha256: str
    stored_at: str
    expired: bool


class SkippedRow(TypedDict):
    """A declared path (or a file under it) that was not kept, and why."""

    path: str
    reason: str


class ArtifactList(TypedDict):
    """``GET /jobs/{id}/artifacts``."""

    job_id: str
    artifacts: list[ArtifactRow]
    skipped: list[SkippedRow]
