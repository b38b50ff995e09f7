"""The job's events: frozen, past-tense facts, one discriminated union on ``type``.

The ``type`` tag is stable and never an import path; ``version`` lets the codec upcast old shapes. Every event
names its job and the moment it happened (``at``, UTC). The subject token is what consumers filter on without
decoding the body (``hades.events.<job_id>.<token>``).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from hades.core.artifacts import SkippedArtifact, StoredArtifact
from hades.core.spec import JobSpec, Priority
from hades.core.stages import Stage


class StepOutcome(StrEnum):
    """How one step ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    version: int = Field(default=1, ge=1, description="the shape's version; older ones are upcast when read")
    job_id: str = Field(description="the job (the aggregate) the event belongs to")
    at: datetime = Field(description="when it happened (UTC)")

    @property
    def subject_token(self) -> str:
        """The last subject tokens after the job id."""
        return str(getattr(self, "type"))  # noqa: B009 - every concrete event declares ``type``


class PipelineRef(BaseModel):
    """The pipeline a stage's job belongs to, and the stage it runs."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(description="the pipeline's job id")
    stage: str = Field(description="the stage's name")


class JobSubmitted(_Event):
    """A client's job was accepted: the validated spec as submitted, with its id and its effective
    ``timeout_seconds`` (the deployment's default or cap applied, ``hades.core.timeouts``).

    ``pipeline`` is set on the job a pipeline's stage runs as (appended by the scheduler that launched it)."""

    type: Literal["submitted"] = "submitted"
    spec: JobSpec
    priority: Priority
    submitted_by: str | None = None
    pipeline: PipelineRef | None = Field(default=None, description="the pipeline and stage this job runs, if any")
    max_attempts: int | None = Field(
        default=None,
        ge=1,
        description="the attempts the job may use in all (MAX_ATTEMPTS where it was accepted): every role hands an "
        "attempt lost to the infrastructure back, or gives up, by this number; absent on older events",
    )
    requested_timeout_seconds: int | None = Field(
        default=None,
        ge=0,
        description="the timeout_seconds the client sent (0: none) when HADES_DEFAULT_TIMEOUT_SECONDS or "
        "HADES_MAX_TIMEOUT_SECONDS made the spec's another; absent when the spec's is the client's",
    )


class JobQueued(_Event):
    """An attempt of the job waits for an executor in its priority's queue.

    ``pool`` is set for a job with constraints or resources: the key of its placement (``hades.core.constraints``),
    so only the executors whose labels satisfy it take it.
    """

    type: Literal["queued"] = "queued"
    attempt: int
    priority: Priority
    reason: str | None = None
    pool: str | None = None

    @property
    def subject_token(self) -> str:
        """Queued events carry the priority so each priority is its own queue, then the pool if there is one
        (``queued.high.<pool>``: one token more, so ``queued.high`` filters never see pooled jobs)."""
        return f"queued.{self.priority.value}" if self.pool is None else f"queued.{self.priority.value}.{self.pool}"


class JobStarted(_Event):
    """An executor took the attempt and owns it until a terminal event; ``executor_labels`` are the labels it
    advertised (absent from events written before executor pools)."""

    type: Literal["started"] = "started"
    attempt: int
    executor_id: str
    executor_labels: dict[str, str] | None = None
    claim: str | None = Field(
        default=None,
        description="which delivery of the queue message the executor decided on (`<stream seq>.<delivery>`); part "
        "of the append's message id, so a start decided again on a redelivery can never pass for its own retried "
        "append (absent from events written before it)",
    )


class JobMarkedUnschedulable(_Event):
    """No live executor can take the queued attempt (the scheduler looked); ``reason`` says what is missing."""

    type: Literal["unschedulable"] = "unschedulable"
    attempt: int
    reason: str


class JobMarkedSchedulable(_Event):
    """An executor that can take the queued attempt is alive again; the unschedulable reason no longer holds."""

    type: Literal["schedulable"] = "schedulable"
    attempt: int


class JobPrepared(_Event):
    """The attempt's workspace and images are ready; ``phases`` says how long each part took (seconds). Written
    by executors before the first ``step_started`` carried ``prepare``; still read in older logs."""

    type: Literal["prepared"] = "prepared"
    attempt: int
    phases: dict[str, float] = Field(default_factory=dict)


class StepStarted(_Event):
    """A step's container (or process) was started."""

    type: Literal["step_started"] = "step_started"
    attempt: int
    step_index: int
    step_id: int
    image: str
    prepare: dict[str, float] | None = Field(
        default=None,
        description="on the attempt's first step: how long preparing the attempt took, by part (`volume`, `images`, "
        "`inputs`; seconds), so the workspace being ready is no append of its own (older logs have `prepared`)",
    )


class StepFinished(_Event):
    """A step ended; ``last_log_seq`` is the last log-stream sequence it produced (all its logs are in)."""

    type: Literal["step_finished"] = "step_finished"
    attempt: int
    step_index: int
    step_id: int
    outcome: StepOutcome
    exit_code: int | None = None
    reason: str | None = None
    tolerated: bool = False
    last_log_seq: int | None = None
    phases: dict[str, float] = Field(default_factory=dict)


class JobCancelRequested(_Event):
    """Someone asked to stop the job; a queued job stops at once, a running one when its executor reacts."""

    type: Literal["cancel_requested"] = "cancel_requested"
    by: str
    reason: str = ""


class FollowUps(BaseModel):
    """What a job's end sets going, copied from the job's spec into its terminal event when the end is decided, so
    the roles that act on terminal events (log forwarding, the status webhook, the pipeline coordinator) need not
    read the job's ``submitted`` to learn whether there is anything to do."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    logs: bool = Field(default=False, description="the job has a callback_url: its logs are forwarded")
    webhook: bool = Field(default=False, description="the job has a status_callback_url: its webhook is sent")
    pipeline: str | None = Field(default=None, description="the pipeline whose stage the job runs, if any")


class _Ended(_Event):
    """A terminal event: the job is done; only delivery bookkeeping follows."""

    follow_ups: FollowUps | None = Field(
        default=None,
        description="what the end sets going; absent in events written before Hades recorded it (readers then "
        "look at the job's submitted)",
    )


class JobSucceeded(_Ended):
    """The attempt ran every step it had to; the job is done."""

    type: Literal["succeeded"] = "succeeded"
    attempt: int
    reason: str | None = None


class JobFailed(_Ended):
    """The job ended in failure; ``reason`` says why in words a person can act on."""

    type: Literal["failed"] = "failed"
    attempt: int
    reason: str


class JobStopped(_Ended):
    """The job was stopped before it could finish (cancelled)."""

    type: Literal["stopped"] = "stopped"
    attempt: int
    reason: str


class _Delivery(_Event):
    """One attempt to deliver something about a finished job to a client's URL."""

    url: str = Field(description="where it was POSTed, without credentials and query")
    delivery_attempt: int = Field(description="this delivery's attempt number, from 1")
    duration_ms: int = Field(description="how long the attempt took (milliseconds)")
    status_code: int | None = Field(default=None, description="the receiver's HTTP status; None if none came")


class LogsForwarded(_Delivery):
    """The job's logs were POSTed to its ``callback_url`` and the receiver answered 2xx."""

    type: Literal["logs_forwarded"] = "logs_forwarded"
    lines: int = 0


class LogsForwardFailed(_Delivery):
    """A delivery of the job's logs failed; ``final`` when no further attempt will be made."""

    type: Literal["logs_forward_failed"] = "logs_forward_failed"
    error: str
    final: bool = False


class WebhookDelivered(_Delivery):
    """The job-status webhook was POSTed to the job's ``status_callback_url`` and the receiver answered 2xx.

    ``redelivered_by`` names who asked for a manual redelivery (``POST /jobs/{id}/deliveries/redeliver``).
    """

    type: Literal["webhook_delivered"] = "webhook_delivered"
    redelivered_by: str | None = None


class WebhookFailed(_Delivery):
    """A delivery of the job-status webhook failed; ``final`` when no further attempt will be made by itself."""

    type: Literal["webhook_failed"] = "webhook_failed"
    error: str
    final: bool = False
    redelivered_by: str | None = None


class ArtifactsStored(_Event):
    """After the job's end, the files its declared ``artifacts`` held were kept in the object store
    (``<job id>/<path>``); ``skipped`` says what was not kept and why (a size limit, ``artifacts_when``, a path
    that was not there). Recorded after the terminal event, like the delivery events: it never changes the status."""

    type: Literal["artifacts_stored"] = "artifacts_stored"
    attempt: int
    files: tuple[StoredArtifact, ...] = ()
    skipped: tuple[SkippedArtifact, ...] = ()


class StageLaunched(_Event):
    """A pipeline's stage was started: its job ``stage_job_id`` (``uuid5(pipeline id, stage)``) is submitted right
    after this event. Appended to the pipeline with the concurrency check, so two schedulers never both launch it;
    the first launch moves the pipeline to Running."""

    type: Literal["stage_launched"] = "stage_launched"
    stage: str = Field(description="the stage's name")
    stage_job_id: str = Field(description="the id of the job the stage runs as")


class StagesAdded(_Event):
    """A running stage added stages to its pipeline (``POST /jobs/{id}/stages`` with the pipeline's token)."""

    type: Literal["stages_added"] = "stages_added"
    stages: tuple[Stage, ...] = Field(description="the stages added, after those declared or added before")
    by: str = Field(description="who added them: stage:<name> of the adding stage (stage:? when it did not say)")


class StageEnded(_Event):
    """A launched stage's job ended; the pipeline records how, then decides what runs next."""

    type: Literal["stage_ended"] = "stage_ended"
    stage: str = Field(description="the stage's name")
    status: str = Field(description="how its job ended: Succeeded, Failed or Stopped")
    reason: str | None = Field(default=None, description="its job's reason, if it gave one")


Event = Annotated[
    JobSubmitted
    | JobQueued
    | JobStarted
    | JobMarkedUnschedulable
    | JobMarkedSchedulable
    | JobPrepared
    | StepStarted
    | StepFinished
    | JobCancelRequested
    | JobSucceeded
    | JobFailed
    | JobStopped
    | LogsForwarded
    | LogsForwardFailed
    | WebhookDelivered
    | WebhookFailed
    | ArtifactsStored
    | StageLaunched
    | StagesAdded
    | StageEnded,
    Field(discriminator="type"),
]
TERMINAL_TYPES = frozenset({"succeeded", "failed", "stopped"})
