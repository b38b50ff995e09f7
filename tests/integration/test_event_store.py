"""The event store against a real nats-server: per-job concurrency, idempotent retries, history, replay, and the
trace context carried in the events' headers."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from nats.aio.client import Client
from opentelemetry.sdk.trace import TracerProvider

from hades.adapters.nats import event_store as event_store_module
from hades.adapters.nats.event_store import NatsEventStore, event_subject
from hades.adapters.nats.subjects import job_events
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.codec import encode_event
from hades.core.errors import ConcurrencyConflict
from hades.core.events import JobQueued, JobStarted, JobSubmitted
from hades.core.spec import JobSpec, Priority

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def submitted(job_id: str) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, at=NOW, spec=JobSpec(name="t"), priority=Priority.HIGH)


def queued(job_id: str, attempt: int = 1) -> JobQueued:
    return JobQueued(job_id=job_id, at=NOW, attempt=attempt, priority=Priority.HIGH)


async def test_appends_chain_across_event_kinds_of_one_job(event_store: NatsEventStore) -> None:
    job = str(uuid.uuid4())
    first = await event_store.append(job, [submitted(job)], 0)
    last = await event_store.append(
        job, [queued(job), JobStarted(job_id=job, at=NOW, attempt=1, executor_id="x")], first
    )
    history = await event_store.history(job)
    assert [r.event.type for r in history] == ["submitted", "queued", "started"]
    assert history[-1].seq == last
    assert await event_store.last_seq(job) == last


async def test_stale_expectation_is_a_conflict(event_store: NatsEventStore) -> None:
    job = str(uuid.uuid4())
    seq = await event_store.append(job, [submitted(job)], 0)
    await event_store.append(job, [queued(job)], seq)
    with pytest.raises(ConcurrencyConflict) as caught:
        await event_store.append(job, [JobStarted(job_id=job, at=NOW, attempt=1, executor_id="late")], seq)
    assert caught.value.expected == seq
    assert caught.value.actual == seq + 1 or caught.value.actual is not None


async def test_two_executors_racing_for_one_attempt_only_one_wins(event_store: NatsEventStore) -> None:
    job = str(uuid.uuid4())
    seq = await event_store.append(job, [submitted(job), queued(job)], 0)
    starts = [JobStarted(job_id=job, at=NOW, attempt=1, executor_id=f"e{i}") for i in range(5)]
    results = await asyncio.gather(*(event_store.append(job, [s], seq) for s in starts), return_exceptions=True)
    winners = [r for r in results if isinstance(r, int)]
    assert len(winners) == 1
    assert sum(isinstance(r, ConcurrencyConflict) for r in results) == 4
    history = await event_store.history(job)
    assert [r.event.type for r in history].count("started") == 1


async def test_a_retried_append_whose_ack_was_lost_is_recognised(event_store: NatsEventStore) -> None:
    job = str(uuid.uuid4())
    seq = await event_store.append(job, [submitted(job)], 0)
    event = queued(job)
    landed = await event_store.append(job, [event], seq)
    # The client retries with the same (now stale) expectation: the server refuses it as a conflict, and the
    # store recognises its own msg id on the job's newest event instead of reporting a conflict.
    assert await event_store.append(job, [event], seq) == landed
    assert len(await event_store.history(job)) == 2


async def test_a_conflict_is_reported_when_someone_else_appended(event_store: NatsEventStore, nc: Client) -> None:
    job = str(uuid.uuid4())
    seq = await event_store.append(job, [submitted(job)], 0)
    other = queued(job)
    await nc.jetstream().publish(
        event_subject(other),
        encode_event(other),
        headers={
            "Nats-Expected-Last-Subject-Sequence": str(seq),
            "Nats-Expected-Last-Subject-Sequence-Subject": job_events(job),
        },
    )
    with pytest.raises(ConcurrencyConflict):
        await event_store.append(job, [queued(job)], seq)


async def test_other_jobs_do_not_conflict(event_store: NatsEventStore) -> None:
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    seq_a = await event_store.append(a, [submitted(a)], 0)
    await event_store.append(b, [submitted(b)], 0)
    await event_store.append(a, [queued(a)], seq_a)
    assert [r.event.type for r in await event_store.history(a)] == ["submitted", "queued"]


async def test_history_of_an_unknown_job_is_empty(event_store: NatsEventStore) -> None:
    assert await event_store.history(str(uuid.uuid4())) == []


async def test_readers_of_one_jobs_submitted_share_a_read_and_a_miss_is_read_again(
    event_store: NatsEventStore, nc: Client
) -> None:
    job = str(uuid.uuid4())
    assert await event_store.submitted(job) is None  # not written yet: not remembered as missing
    seq = await event_store.append(job, [submitted(job)], 0)
    requests = 0

    async def count(_msg: object) -> None:
        nonlocal requests
        requests += 1

    spy = await nc.subscribe(f"$JS.API.DIRECT.GET.{EVENTS_STREAM}.>", cb=count)
    try:
        first, second = await asyncio.gather(event_store.submitted(job), event_store.submitted(job))
        assert first is not None and first is second and first.seq == seq
        assert await event_store.submitted(job) is first  # kept once found
        await nc.flush()
        await asyncio.sleep(0.1)
        assert requests == 1
    finally:
        await spy.unsubscribe()


async def test_a_history_longer_than_one_read_batch_is_read_whole_and_in_order(
    event_store: NatsEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_store_module, "_HISTORY_BATCH", 2)
    job, other = str(uuid.uuid4()), str(uuid.uuid4())
    seq = await event_store.append(job, [submitted(job)], 0)
    await event_store.append(other, [submitted(other)], 0)  # another job's events in between are skipped
    for attempt in range(1, 5):
        seq = await event_store.append(job, [queued(job, attempt)], seq)
    reads = await asyncio.gather(*(event_store.history(job) for _ in range(3)))  # side by side, one inbox
    for history in reads:
        assert [r.event.type for r in history] == ["submitted"] + ["queued"] * 4
        assert [getattr(r.event, "attempt", 0) for r in history] == [0, 1, 2, 3, 4]
        assert history[-1].seq == seq
        assert all(r.msg_id for r in history)


async def test_a_history_with_an_event_written_by_other_means_is_still_read_whole(
    event_store: NatsEventStore, nc: Client
) -> None:
    """An event published without the chain headers (by hand, an older tool): the read falls back to the scan."""
    job = str(uuid.uuid4())
    seq = await event_store.append(job, [submitted(job)], 0)
    await nc.jetstream().publish(event_subject(queued(job)), encode_event(queued(job)))
    history = await event_store.history(job)
    assert [r.event.type for r in history] == ["submitted", "queued"]
    assert history[0].seq == seq


async def test_replay_reads_everything_then_follows_live(event_store: NatsEventStore) -> None:
    job = str(uuid.uuid4())
    seq = await event_store.append(job, [submitted(job)], 0)
    seen: list[int] = []
    live = asyncio.Event()

    async def follow() -> None:
        async for recorded in event_store.replay(1):
            seen.append(recorded.seq)
            if recorded.event.job_id == job and recorded.event.type == "queued":
                live.set()
                return

    task = asyncio.create_task(follow())
    await event_store.append(job, [queued(job)], seq)
    await asyncio.wait_for(live.wait(), 10)
    await task
    assert seen == sorted(seen) and seen[0] == 1 and seq in seen


async def test_a_multi_event_append_lands_whole_or_not_at_all(event_store: NatsEventStore) -> None:
    job = str(uuid.uuid4())
    seq = await event_store.append(job, [submitted(job)], 0)
    await event_store.append(job, [queued(job)], seq)
    stale = [JobStarted(job_id=job, at=NOW, attempt=1, executor_id="x"), queued(job, attempt=2)]

    with pytest.raises(ConcurrencyConflict):
        await event_store.append(job, stale, seq)

    assert [r.event.type for r in await event_store.history(job)] == ["submitted", "queued"]


async def test_a_retried_multi_event_append_is_recognised(event_store: NatsEventStore) -> None:
    job = str(uuid.uuid4())
    both = [submitted(job), queued(job)]
    landed = await event_store.append(job, both, 0)

    assert await event_store.append(job, both, 0) == landed
    assert len(await event_store.history(job)) == 2


async def test_an_append_inside_a_span_carries_its_traceparent_to_every_reader(
    event_store: NatsEventStore, nc: Client
) -> None:
    tracer = TracerProvider().get_tracer("test")
    job = str(uuid.uuid4())
    seq = await event_store.append(job, [submitted(job)], 0)  # no span: no header
    with tracer.start_as_current_span("append") as span:
        context = span.get_span_context()
        last = await event_store.append(
            job, [queued(job), JobStarted(job_id=job, at=NOW, attempt=1, executor_id="x")], seq
        )
    traceparent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"

    assert [r.trace for r in await event_store.history(job)] == [None, traceparent, traceparent]
    replayed = []
    async for recorded in event_store.replay(seq):
        replayed.append(recorded.trace)
        if recorded.seq == last:
            break
    assert replayed[0] is None and replayed[-2:] == [traceparent, traceparent]
    raw = await nc.jetstream().get_msg(EVENTS_STREAM, seq=seq, direct=True)
    assert "traceparent" not in (raw.headers or {})
