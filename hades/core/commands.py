"""The commands ``decide`` accepts: what a client, the scheduler or an executor asks of a job."""

from __future__ import annotations

from dataclasses import dataclass, field

from hades.core.artifacts import SkippedArtifact, StoredArtifact
from hades.core.spec import JobSpec, Priority
from hades.core.timeouts import TimeoutPolicy


@dataclass(frozen=True, slots=True)
class SubmitJob:
    """Accept a validated job."""

    job_id: str
    spec: JobSpec
    submitted_by: str | None = None
    max_attempts: int | None = None  # the job's attempt budget (MAX_ATTEMPTS of the API that accepts it)
    timeouts: TimeoutPolicy = field(default_factory=TimeoutPolicy)  # the timeouts of the API that accepts it


@dataclass(frozen=True, slots=True)
class QueueJob:
    """Put the job's next attempt into its priority queue."""


@dataclass(frozen=True, slots=True)
class StartAttempt:
    """An executor takes the queued attempt (from the queue of ``priority``, when given: a job promoted since that
    queueing is not started from it)."""

    attempt: int
    executor_id: str
    executor_labels: dict[str, str] | None = None
    claim: str | None = None  # the queue message's delivery decided on (``JobStarted.claim``)
    priority: Priority | None = None


@dataclass(frozen=True, slots=True)
class MarkUnschedulable:
    """No live executor can take the queued attempt; say why (the scheduler's watchdog decides)."""

    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class MarkSchedulable:
    """An executor that can take the queued attempt is alive again."""

    attempt: int


@dataclass(frozen=True, slots=True)
class MarkPrepared:
    """The executor made the attempt's workspace and images ready."""

    attempt: int
    phases: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StartStep:
    """The executor starts the next step (the first one with how long preparing the attempt took)."""

    attempt: int
    step_index: int
    prepare: dict[str, float] | None = None


@dataclass(frozen=True, slots=True)
class FinishStep:
    """A step ended with an exit code, or an error that kept it from running (``error``)."""

    attempt: int
    step_index: int
    exit_code: int | None
    error: str | None = None
    last_log_seq: int | None = None
    phases: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RequeueJob:
    """Hand the attempt back to the queue as a new attempt (executor shutting down, executor or container lost)."""

    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class PromoteJob:
    """Move a job that waited long in its queue up to a higher priority (opt-in ageing)."""

    attempt: int
    priority: Priority
    reason: str


@dataclass(frozen=True, slots=True)
class RequestCancel:
    """A client asks to stop the job: queued jobs stop at once, running ones once their executor reacts."""

    by: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class RecordLogsDelivery:
    """The notifier tried to POST a finished job's logs to its ``callback_url``."""

    url: str
    delivery_attempt: int
    duration_ms: int
    status_code: int | None = None
    error: str | None = None
    lines: int = 0
    final: bool = False


@dataclass(frozen=True, slots=True)
class RecordWebhookDelivery:
    """Someone (the notifier, or a manual redelivery) tried to POST the job-status webhook of a finished job."""

    url: str
    delivery_attempt: int
    duration_ms: int
    status_code: int | None = None
    error: str | None = None
    final: bool = False
    redelivered_by: str | None = None


@dataclass(frozen=True, slots=True)
class FailJob:
    """End the job as failed (set-up errors, timeouts, engine trouble)."""

    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class ConcludeJob:
    """Record the end the job's own events already imply (``lifecycle.conclusion``), left due by a writer that
    stopped between a decision's events."""


@dataclass(frozen=True, slots=True)
class StopJob:
    """End the job as stopped (cancel)."""

    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class RecordArtifacts:
    """The executor kept the ended attempt's artifacts (``files``) and says what it did not keep (``skipped``)."""

    attempt: int
    files: tuple[StoredArtifact, ...] = ()
    skipped: tuple[SkippedArtifact, ...] = ()


Command = (
    SubmitJob
    | ConcludeJob
    | QueueJob
    | StartAttempt
    | MarkUnschedulable
    | MarkSchedulable
    | MarkPrepared
    | StartStep
    | FinishStep
    | RequeueJob
    | PromoteJob
    | RequestCancel
    | RecordLogsDelivery
    | RecordWebhookDelivery
    | FailJob
    | StopJob
    | RecordArtifacts
)


def hand_back(attempt: int, max_attempts: int, lost: str) -> RequeueJob | FailJob:
    """An attempt lost to an infrastructure fault (its executor, its container or its engine went away, not its
    steps' doing): handed back as a new attempt while the job has attempts left (``max_attempts`` in all: the
    job's own, ``JobState.max_attempts``, where it has one), else failed with a reason that says so."""
    if attempt >= max_attempts:
        return FailJob(attempt, f"{lost}; gave up after {attempt} attempts")
    return RequeueJob(attempt, f"{lost}; attempt {attempt} handed back")
