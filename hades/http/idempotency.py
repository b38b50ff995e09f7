"""``Idempotency-Key`` on ``POST /build``: a client that retries a submission whose answer it never got (a timeout,
a cut connection, a NATS outage that held the request past the client's patience) gets one job, not two.

The Go contract has no such header, and without it a retried ``POST`` is a second job: the chaos suite's 25 s NATS
outage ran 144 of 300 jobs twice, each retry's first request having landed after all. With a key (any 1-255
printable ASCII characters, as the IETF's ``Idempotency-Key`` draft leaves open) the job's id is derived from it, so
the event log itself sees the repeat: the first request appends the job, and every later one with that key answers
the same job id, as long as the log keeps the job (``max_age``, 30 days by default). A key sent with a different job
is refused (422), never taken for the first.
"""

from __future__ import annotations

import uuid

from litestar.openapi.spec import OpenAPIType, Parameter, Schema

from hades.core.events import JobSubmitted
from hades.core.ports import EventStore

HEADER = "Idempotency-Key"
#: The header as the OpenAPI schema documents it.
IDEMPOTENCY_KEY = Parameter(
    name=HEADER,
    param_in="header",
    required=False,
    description="Ours, not Go's: any 1-255 printable ASCII characters standing for this one job. A request sent "
    "again with the same key (a retry whose answer was lost) answers the same job id instead of making a second "
    "job; with a different job, 422.",
    schema=Schema(type=OpenAPIType.STRING, min_length=1, max_length=255),
)
_MAX_LENGTH = 255
#: The namespace of the job ids derived from keys (a fixed UUID: the same key gives the same id everywhere).
_NAMESPACE = uuid.UUID("3e6f5c0a-7d2b-4c55-9a0e-5b1f2c8d9e47")


def key_refusal(key: str) -> str | None:
    """The 400 body for a key that cannot be one; None for a good key."""
    if not key:
        return f"Invalid {HEADER}: it is empty"
    if len(key) > _MAX_LENGTH:
        return f"Invalid {HEADER}: at most {_MAX_LENGTH} characters, not {len(key)}"
    if not (key.isascii() and key.isprintable()):
        return f"Invalid {HEADER}: only printable ASCII characters"
    return None


def job_id_for(key: str) -> str:
    """The job id a key stands for."""
    return str(uuid.uuid5(_NAMESPACE, key))


async def submitted_before(store: EventStore, job_id: str) -> tuple[int, JobSubmitted] | None:
    """The job's ``submitted`` event and the sequence of its newest event, if the log has the job."""
    history = await store.history(job_id)
    first = history[0].event if history else None
    return (history[-1].seq, first) if isinstance(first, JobSubmitted) else None


def different_job(job_id: str) -> str:
    """The 422 body for a key sent again with another job."""
    return f"{HEADER} was used for a different job ({job_id}): a key stands for one job; send a new key for a new job"
