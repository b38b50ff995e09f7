"""The redelivery guard: a queue message never starts an attempt twice.

A redelivered message is folded against the job's history first: if the job is no longer queued for that attempt,
the message is acked and dropped (``queued_for``). That alone did not do: while a NATS node was down an executor
could not extend its message's ack deadline, so the message came back to that same executor, which judged it on a
read from a replica behind its own ``started``, and the step ran twice. So an executor also knows which job each of
its running tasks has in hand, and by which queue message (``RunningAttempts``): a message for a job that runs here
never starts an attempt beside it. And ``started`` carries a claim, the queue message's stream sequence and delivery,
part of its message id (``claim``), so a start decided again on a redelivery meets a conflict instead of passing for
its own retried append.
"""

from __future__ import annotations

import asyncio
import logging

from nats.aio.msg import Msg

from hades.core.events import JobQueued
from hades.core.lifecycle import Status
from hades.workers.jobs import JobHandle

log = logging.getLogger(__name__)


class RunningAttempts:
    """The tasks running attempts in this executor, each with its job and its queue message's stream sequence
    (both unknown until the task has decoded its message)."""

    def __init__(self) -> None:
        self._jobs: dict[asyncio.Task[None], str] = {}
        self._in_hand: dict[asyncio.Task[None], int] = {}

    def __len__(self) -> int:
        return len(self._jobs)

    def add(self, task: asyncio.Task[None]) -> None:
        self._jobs[task] = ""

    def hold(self, task: asyncio.Task[None] | None, job_id: str, seq: int) -> None:
        """Note which job, by which queue message, a running task has in hand."""
        if task is not None and task in self._jobs:
            self._jobs[task] = job_id
            self._in_hand[task] = seq

    def remove(self, task: asyncio.Task[None]) -> None:
        self._jobs.pop(task, None)
        self._in_hand.pop(task, None)

    def tasks(self) -> set[asyncio.Task[None]]:
        return set(self._jobs)

    def job_ids(self) -> list[str]:
        return sorted({job_id for job_id in self._jobs.values() if job_id})

    def runs(self, job_id: str) -> bool:
        """Whether this executor runs the job right now (asked at the moment of the check, not before)."""
        return job_id in self._jobs.values()

    async def leave(self, msg: Msg, queued: JobQueued, retry_after: float) -> None:
        """A queue message for a job whose attempt runs here already: never start it beside itself.

        The message in hand redelivered (its deadline passed while NATS could not take ``in_progress``) is left
        alone: the handler that runs its attempt still extends and acks it (both go by the stream sequence). Any
        other queueing of the job (a newer attempt, handed back while this executor's heartbeat was not heard) waits
        until the attempt here has ended.
        """
        seq = msg.metadata.sequence.stream
        if seq in self._in_hand.values():
            log.info("job %s: its queue message came again while its attempt runs here; left to it", queued.job_id)
            return
        log.info("job %s: attempt %d is queued while an older one runs here", queued.job_id, queued.attempt)
        await msg.nak(delay=retry_after)


def claim(msg: Msg) -> str:
    """This delivery of the queue message, as ``started`` carries it: its stream sequence and delivery count."""
    delivery = msg.metadata
    return f"{delivery.sequence.stream}.{delivery.num_delivered}"


def queued_for(job: JobHandle, queued: JobQueued) -> bool:
    """Whether this queue message is still the job's current place in a queue (not promoted, taken or ended)."""
    state = job.state
    return (
        state is not None
        and state.status is Status.QUEUED
        and state.attempt == queued.attempt
        and state.priority is queued.priority
    )
