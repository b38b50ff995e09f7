"""An input naming an artifact of a job that has just ended: its terminal event lands before its ``artifacts_stored``
(the files are kept after the end, so the end is never held up), and a client that submits the reading job as soon
as it sees the first one end must not have it fail for coming too early. Real nats-server, the real event and
object stores."""

from __future__ import annotations

import asyncio
import io
import tarfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from nats.aio.client import Client
from nats.errors import TimeoutError as NatsTimeoutError

from hades.adapters.nats.artifacts import ArtifactStore
from hades.adapters.nats.event_store import NatsEventStore
from hades.clock import SystemClock
from hades.core.artifacts import Input, StoredArtifact
from hades.core.lifecycle import (
    FinishStep,
    JobState,
    MarkPrepared,
    QueueJob,
    RecordArtifacts,
    StartAttempt,
    StartStep,
    SubmitJob,
    decide,
    fold,
)
from hades.core.ports import AttemptLost, ExecutionError, Recorded
from hades.core.spec import JobSpec, Step
from hades.workers.artifacts import Artifacts
from hades.workers.jobs import JobHandle


@dataclass
class HistoryReads:
    """The real store, telling when a job's history has been read (so the test acts after the first look)."""

    store: NatsEventStore
    read: asyncio.Event = field(default_factory=asyncio.Event)

    async def history(self, job_id: str) -> list[Recorded]:
        history = await self.store.history(job_id)
        self.read.set()
        return history

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)


@dataclass
class Unpacked:
    """A workspace that keeps what the inputs' archive held."""

    files: dict[str, bytes] = field(default_factory=dict)

    async def write_inputs(self, job: JobState, archive: Path) -> None:
        with tarfile.open(archive) as tar:
            for member in tar:
                extracted = tar.extractfile(member) if member.isfile() else None
                if extracted is not None:
                    self.files[member.name] = extracted.read()

    def read_path(self, job: JobState, path: str) -> object:
        raise AssertionError("not read here")


async def ended_writer(store: NatsEventStore, artifacts: tuple[str, ...]) -> JobHandle:
    """A job that ran its one step and Succeeded; nothing recorded about its artifacts yet."""
    job_id, clock = str(uuid.uuid4()), SystemClock()
    spec = JobSpec(name="writer", steps=(Step(id=1, image="x"),), artifacts=artifacts)
    await store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), clock.now()), 0)
    job = await JobHandle.load(store, clock, job_id)
    for command in (QueueJob(), StartAttempt(1, "e"), MarkPrepared(1), StartStep(1, 0), FinishStep(1, 0, 0)):
        await job.run(job_id, command)
    assert job.state is not None and job.state.status.is_terminal
    return job


def reader(source: str) -> JobState:
    spec = JobSpec(name="reader", steps=(Step(id=1, image="x"),), inputs=(Input(source=source),))
    job_id = str(uuid.uuid4())
    state = fold(decide(None, SubmitJob(job_id=job_id, spec=spec), SystemClock().now()))
    assert state is not None
    return state


async def test_an_input_waits_for_the_record_that_follows_its_jobs_end(nc: Client, event_store: NatsEventStore) -> None:
    writer = await ended_writer(event_store, ("a.txt",))
    writer_id = writer.state.job_id  # type: ignore[union-attr]
    events = HistoryReads(event_store)
    objects = ArtifactStore(nc)
    workspace = Unpacked()
    placing = asyncio.create_task(
        Artifacts(objects, events).place_inputs(reader(f"{writer_id}:a.txt"), workspace)  # type: ignore[arg-type]
    )

    await events.read.wait()  # the reader looked once: the writer had ended, its files not yet recorded
    facts = await objects.put(f"{writer_id}/a.txt", io.BytesIO(b"kept"))  # type: ignore[arg-type]
    await writer.run(
        writer_id, RecordArtifacts(1, (StoredArtifact(path="a.txt", size=facts.size, sha256=facts.sha256),))
    )

    await placing
    assert workspace.files == {"a.txt": b"kept"}


async def test_an_input_of_a_job_that_keeps_nothing_fails_at_once(event_store: NatsEventStore, nc: Client) -> None:
    writer = await ended_writer(event_store, ())
    writer_id = writer.state.job_id  # type: ignore[union-attr]
    artifacts = Artifacts(ArtifactStore(nc), event_store, record_patience=3600)
    with pytest.raises(ExecutionError, match="has kept no artifacts"):
        await artifacts.place_inputs(reader(f"{writer_id}:a.txt"), Unpacked())  # type: ignore[arg-type]


async def test_an_input_whose_record_never_comes_fails_after_the_patience(
    event_store: NatsEventStore, nc: Client
) -> None:
    writer = await ended_writer(event_store, ("a.txt",))
    writer_id = writer.state.job_id  # type: ignore[union-attr]
    artifacts = Artifacts(ArtifactStore(nc), event_store, record_patience=0)
    with pytest.raises(ExecutionError, match="ended but recorded no artifacts"):
        await artifacts.place_inputs(reader(f"{writer_id}:a.txt"), Unpacked())  # type: ignore[arg-type]


@dataclass
class Unreachable:
    """The event store with NATS away: every read times out as nats-py's do."""

    store: NatsEventStore

    async def history(self, job_id: str) -> list[Recorded]:
        raise NatsTimeoutError

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)


async def test_an_input_that_cannot_be_read_while_nats_is_away_hands_the_attempt_back(
    event_store: NatsEventStore, nc: Client
) -> None:
    """No fault of the job's: the attempt goes back to the queue (AttemptLost) rather than failing the job (nats-py's
    timeout is an OSError too, which made it "cannot place it")."""
    artifacts = Artifacts(ArtifactStore(nc), Unreachable(event_store))  # type: ignore[arg-type]
    with pytest.raises(AttemptLost, match="the artifact store cannot be read"):
        await artifacts.place_inputs(reader(f"{uuid.uuid4()}:a.txt"), Unpacked())  # type: ignore[arg-type]
