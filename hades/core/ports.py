"""The Protocols the adapters implement; the core and the workers depend on these, never on an adapter."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from hades.core.events import Event
from hades.core.lifecycle import JobState
from hades.core.logs import Log, OutputStream


@dataclass(frozen=True, slots=True)
class Recorded:
    """An event as stored: its stream sequence, the id it was appended under, and the W3C ``traceparent`` of the
    span that appended it (None when tracing was off)."""

    seq: int
    event: Event
    msg_id: str | None = None
    trace: str | None = None


class EventStore(Protocol):
    """The append-only log of job events."""

    async def append(self, job_id: str, events: Sequence[Event], expected_seq: int) -> int:
        """Append after ``expected_seq`` (the job's last sequence, 0 for a new job); returns the new last seq.

        Raises ConcurrencyConflict when someone else appended first.
        """
        ...

    async def history(self, job_id: str) -> list[Recorded]:
        """The job's events, oldest first (empty for an unknown job)."""
        ...

    async def last_seq(self, job_id: str) -> int:
        """The sequence of the job's newest event, 0 for an unknown job (one cheap lookup)."""
        ...

    async def submitted(self, job_id: str) -> Recorded | None:
        """The job's first event (its ``submitted``, which carries the spec), or None for an unknown job."""
        ...

    def replay(self, from_seq: int = 1) -> AsyncGenerator[Recorded, None]:
        """Every event from ``from_seq`` on, then live ones as they are appended."""
        ...

    def replay_batches(self, from_seq: int = 1) -> AsyncGenerator[list[Recorded], None]:
        """The same, handed on in batches of whatever has arrived (the projections' fast path)."""
        ...


class StepLogs(Protocol):
    """Where an executor writes one step's output."""

    async def open(self, container_id: str) -> None:
        """Register the step's slot (a Log with no lines), so silent steps still show up in order."""
        ...

    async def write(self, stream: OutputStream, timestamp: datetime, message: str) -> None:
        """Add one line."""
        ...


class LogStore(Protocol):
    """Job logs, kept per job."""

    async def read(self, job_id: str) -> list[Log]:
        """Every batch stored for the job, oldest first."""
        ...

    async def last_seq(self, job_id: str) -> int:
        """The position of the job's newest batch, 0 when it has none."""
        ...

    def follow(self, job_id: str, idle: float = 1.0, after: int = 0) -> AsyncGenerator[tuple[int, Log] | None, None]:
        """Batches from the first on (or after stream sequence ``after``), live; None after ``idle`` seconds
        without one."""
        ...


@dataclass(frozen=True, slots=True)
class StepResult:
    """How a step ended: an exit code, or an error that kept it from running."""

    exit_code: int | None
    error: str | None = None
    phases: dict[str, float] = field(default_factory=dict)


class ExecutionError(Exception):
    """The engine could not set up or run the job; ``reason`` is what the job's failure says."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AttemptLost(ExecutionError):
    """The engine lost the attempt's allocation: its container was removed from outside while it ran, or the
    engine itself went away. An infrastructure fault, not the job's: the attempt is handed back to the queue (up to
    ``MAX_ATTEMPTS``), as for a lost executor, where a step that ran and exited non-zero fails the job."""


class Executor(Protocol):
    """Runs a job's steps on some engine."""

    async def prepare(self, job: JobState) -> dict[str, float]:
        """Create the job's workspace and make its images available; returns how long each part took
        (seconds, e.g. ``volume``, ``images``); raises ExecutionError."""
        ...

    async def run_step(self, job: JobState, index: int, logs: StepLogs) -> StepResult:
        """Run one step to its end; cancelling the call stops the step's container."""
        ...

    async def cleanup(self, job: JobState) -> None:
        """Remove everything the attempt left on the engine; never raises for things already gone."""
        ...

    async def sweep(self, running: Callable[[str], bool], live_executors: set[str]) -> int:
        """Remove what crashed attempts left: anything of a gone executor, or of ours not running now."""
        ...


@runtime_checkable
class WorkspaceFiles(Protocol):
    """An executor whose workspace files can be read and written from outside (artifacts and inputs); an executor
    without it refuses jobs that declare either."""

    async def write_inputs(self, job: JobState, archive: Path) -> None:
        """Unpack a tar archive (names relative to the workspace) into the attempt's workspace."""
        ...

    def read_path(self, job: JobState, path: str) -> AsyncIterator[bytes]:
        """A tar stream of one workspace path, a file or a directory with everything below it, its members named
        from the path's last segment on (as Docker's archive API names them); raises FileNotFoundError, when
        iterated, for a path that is not there."""
        ...


class Clock(Protocol):
    """Where time comes from, so that tests and replays control it."""

    def now(self) -> datetime:
        """The current UTC time."""
        ...
