"""The domain's error root and the named errors every layer above maps to responses."""


class HadesError(Exception):
    """Root of every error the domain raises on purpose."""


class SpecError(HadesError, ValueError):
    """A submitted job is invalid; the message is the plain-text body a client sees."""


class JobNotFound(HadesError, LookupError):
    """No job has this id."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job not found: {job_id}")
        self.job_id = job_id


class InvalidTransition(HadesError):
    """A command does not apply to the job in its current state."""


class ConcurrencyConflict(HadesError):
    """Someone else appended to the job first; re-read and decide again."""

    def __init__(self, job_id: str, expected: int, actual: int | None) -> None:
        super().__init__(f"job {job_id}: expected last sequence {expected}, found {actual}")
        self.job_id = job_id
        self.expected = expected
        self.actual = actual


class EventTooLarge(HadesError):
    """An event is larger than the log accepts in one message (a job spec too big to store)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"job too large: {size} bytes encoded, the limit is {limit} bytes")
        self.size = size
        self.limit = limit


class StoreUnavailable(HadesError):
    """The event log could not be reached or refused the append for a reason other than a conflict."""
