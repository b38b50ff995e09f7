"""Forwarding a finished job's logs to its ``callback_url``: the backoff maths, the POST, and the notifier role on
the real session nats-server against a real HTTP receiver on 127.0.0.1 (retries, final failure, dropped
connections, jobs without a callback URL)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.aio.client import Client
from nats.js.errors import NotFoundError

from hades.adapters.http_delivery import HttpDelivery
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore, StepLogWriter
from hades.adapters.nats.topology import EVENTS_STREAM, ConsumerSpec
from hades.clock import SystemClock
from hades.core.backoff import backoff_ceiling, backoff_delay
from hades.core.events import JobStopped, LogsForwarded, LogsForwardFailed
from hades.core.lifecycle import (
    FinishStep,
    QueueJob,
    RequestCancel,
    StartAttempt,
    StartStep,
    Status,
    StopJob,
    SubmitJob,
    decide,
)
from hades.core.logs import Log, LogEntry, OutputStream
from hades.core.spec import JobSpec, Step
from hades.runtime import Roles
from hades.workers.jobs import JobHandle
from hades.workers.notifier import (
    NOTIFIER_CONSUMER,
    TERMINAL_SUBJECTS,
    LogForwarder,
    NotifierSettings,
    logs_payload,
    notifier_consumer,
    recorded_url,
)
from tests.conftest import StartHades, eventually
from tests.support.receiver import receiving

T0 = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
FAST = NotifierSettings(max_attempts=3, timeout=2.0, backoff_base=0.02, backoff_max=0.1)

Delivery = LogsForwarded | LogsForwardFailed


# -- backoff ------------------------------------------------------------------------------------------------------


def test_the_ceiling_doubles_per_attempt_up_to_the_cap() -> None:
    assert [backoff_ceiling(n, 1.0, 60.0) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_full_jitter_scales_the_ceiling_by_the_draw() -> None:
    assert backoff_delay(3, 0.5, 60.0, 0.0) == 0.0
    assert backoff_delay(3, 0.5, 60.0, 0.5) == 1.0
    assert backoff_delay(20, 0.5, 60.0, 0.999) == pytest.approx(59.94)


def test_a_huge_attempt_number_is_the_cap_not_an_overflow() -> None:
    assert backoff_ceiling(10**6, 1.0, 60.0) == 60.0
    assert backoff_ceiling(10**6, 1e300, 5.0) == 5.0


@pytest.mark.parametrize(
    ("attempt", "base", "cap", "draw"),
    [(0, 1.0, 60.0, 0.5), (1, -1.0, 60.0, 0.5), (1, 1.0, -1.0, 0.5), (1, 1.0, 60.0, 1.0), (1, 1.0, 60.0, -0.1)],
)
def test_nonsense_is_refused(attempt: int, base: float, cap: float, draw: float) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        backoff_delay(attempt, base, cap, draw)


@given(
    attempt=st.integers(1, 10_000),
    base=st.floats(0, 1e6),
    cap=st.floats(0, 1e6),
    draw=st.floats(0, 1, exclude_max=True),
)
def test_the_delay_stays_within_zero_and_the_ceiling(attempt: int, base: float, cap: float, draw: float) -> None:
    delay = backoff_delay(attempt, base, cap, draw)
    assert 0.0 <= delay <= min(cap, base * 2.0 ** min(attempt - 1, 1000))


# -- the payload ---------------------------------------------------------------------------------------------------


def test_the_payload_is_one_log_per_step_without_step_ids_and_silent_steps_null() -> None:
    line = LogEntry(timestamp=T0, message="hi", output_stream="stderr")
    batches = [
        Log(job_id="j", container_id="a", step_id=1),
        Log(job_id="j", container_id="a", step_id=1, logs=[line]),
        Log(job_id="j", container_id="b", step_id=2),
        Log(job_id="j", container_id="a", step_id=1, logs=[line]),
    ]
    entry = {"timestamp": "2026-03-04T05:06:07.123456Z", "message": "hi", "output_stream": "stderr"}
    assert logs_payload(batches) == [
        {"job_id": "j", "container_id": "a", "logs": [entry, entry]},
        {"job_id": "j", "container_id": "b", "logs": None},
    ]


def test_events_record_the_url_without_credentials_or_query() -> None:
    assert recorded_url("https://u:cb-secret@Example.org:8443/cb/x?token=s3cret#f") == "https://example.org:8443/cb/x"
    assert recorded_url("http://[::1]:9/hook") == "http://[::1]:9/hook"
    assert recorded_url("http://h:99999999/") == "<unparseable url>"


# -- the POST ------------------------------------------------------------------------------------------------------


async def test_a_2xx_is_a_delivery_with_the_json_body_and_header() -> None:
    async with receiving(204) as receiver:
        delivery = HttpDelivery(timeout=2.0)
        result = await delivery.post_json(f"{receiver.url}/hook/x", b'[{"a":1}]')
        await delivery.aclose()
    assert (result.ok, result.status_code, result.error) == (True, 204, None)
    assert result.duration_ms >= 0
    [request] = receiver.requests
    assert (request.method, request.headers["content-type"], request.body) == ("POST", "application/json", b'[{"a":1}]')


@pytest.mark.parametrize(
    ("answer", "status", "error"),
    [
        (500, 500, "receiver answered HTTP 500"),
        (302, 302, "receiver answered HTTP 302"),
        ("close", None, "RemoteProtocolError: Server disconnected without sending a response."),
        ("hang", None, "no answer within 0.3 s"),
    ],
)
async def test_anything_but_a_2xx_is_a_failed_attempt(answer: int | str, status: int | None, error: str) -> None:
    async with receiving(answer) as receiver:
        delivery = HttpDelivery(timeout=0.3)
        result = await delivery.post_json(f"{receiver.url}/hook/x", b"[]")
        await delivery.aclose()
    assert (result.ok, result.status_code, result.error) == (False, status, error)


async def test_nobody_listening_is_a_failed_attempt() -> None:
    async with receiving(200) as receiver:
        url = receiver.url
    delivery = HttpDelivery(timeout=2.0)
    result = await delivery.post_json(f"{url}/hook/x", b"[]")
    await delivery.aclose()
    assert not result.ok and result.status_code is None
    assert result.error is not None and result.error.startswith("ConnectError")


# -- finished jobs, made without an engine -------------------------------------------------------------------------


async def running_job(store: NatsEventStore, callback_url: str, steps: int) -> JobHandle:
    job_id = str(uuid.uuid4())
    clock = SystemClock()
    url = f"{callback_url}/hook/{job_id}" if callback_url else ""
    images = tuple(Step(id=10 + i, image="busybox") for i in range(steps))
    spec = JobSpec(name="forward", callback_url=url, steps=images)
    await store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), clock.now()), 0)
    job = await JobHandle.load(store, clock, job_id)
    await job.run(job_id, QueueJob())
    await job.run(job_id, StartAttempt(attempt=1, executor_id="test-executor"))
    return job


async def run_step(nc: Client, job: JobHandle, index: int, lines: Sequence[str]) -> int | None:
    """Start step ``index``, write its lines (stderr for lines starting with '!'), close its writer."""
    assert job.state is not None
    job_id = job.state.job_id
    await job.run(job_id, StartStep(attempt=1, step_index=index))
    writer = StepLogWriter(nc, job_id, job.state.spec.steps[index].id, attempt=job.state.attempt)
    await writer.open(f"container-{index}")
    for n, line in enumerate(lines):
        stream: OutputStream = "stderr" if line.startswith("!") else "stdout"
        await writer.write(stream, T0 + timedelta(seconds=n), line.lstrip("!"))
    return await writer.close()


async def finished_job(
    store: NatsEventStore, nc: Client, callback_url: str, steps: Sequence[Sequence[str]], fail_at: int | None = None
) -> str:
    """A job whose steps wrote ``steps`` (an empty list is a silent step); it fails at step ``fail_at``."""
    job = await running_job(store, callback_url, len(steps))
    assert job.state is not None
    job_id = job.state.job_id
    for index, lines in enumerate(steps):
        last = await run_step(nc, job, index, lines)
        code = 1 if index == fail_at else 0
        await job.run(job_id, FinishStep(attempt=1, step_index=index, exit_code=code, last_log_seq=last))
        if job.state.status.is_terminal:
            break
    return job_id


def line(n: int, message: str, stream: str = "stdout") -> dict[str, str]:
    stamp = (T0 + timedelta(seconds=n)).isoformat().replace("+00:00", "Z")
    return {"timestamp": stamp, "message": message, "output_stream": stream}


async def deliveries(store: NatsEventStore, job_id: str) -> list[Delivery]:
    return [r.event for r in await store.history(job_id) if isinstance(r.event, LogsForwarded | LogsForwardFailed)]


async def settled(store: NatsEventStore, job_id: str) -> list[Delivery]:
    """The job's delivery events once the last one settles it (forwarded, or failed for good)."""

    async def check() -> list[Delivery] | None:
        found = await deliveries(store, job_id)
        if found and (isinstance(found[-1], LogsForwarded) or found[-1].final):
            return found
        return None

    result: list[Delivery] = await eventually(check, timeout=30)
    return result


def outcomes(events: list[Delivery]) -> list[tuple[str, int, int | None, bool]]:
    return [(e.type, e.delivery_attempt, e.status_code, isinstance(e, LogsForwardFailed) and e.final) for e in events]


# -- the notifier on the real server -------------------------------------------------------------------------------


async def ensure_notifier_consumer(nc: Client) -> None:
    """The ``notifier`` consumer as streams.yaml will declare it, unless the topology has it already."""
    js = nc.jetstream()
    try:
        await js.consumer_info(EVENTS_STREAM, NOTIFIER_CONSUMER)
    except NotFoundError:
        spec = ConsumerSpec(filter_subjects=list(TERMINAL_SUBJECTS), ack_wait=30, max_deliver=-1)
        await js.add_consumer(EVENTS_STREAM, config=spec.config(NOTIFIER_CONSUMER))


@pytest.fixture
async def notifier(nats_url: str, nc: Client, event_store: NatsEventStore) -> AsyncIterator[None]:
    """The notifier role running in this test's loop, with tiny retry settings."""
    await ensure_notifier_consumer(nc)
    delivery = HttpDelivery(FAST.timeout)
    forwarder = LogForwarder(event_store, SystemClock(), NatsLogStore(nc), delivery.post_json, FAST)
    consumer = notifier_consumer(nc, forwarder)
    await consumer.start()
    running = asyncio.create_task(consumer.run())
    try:
        yield
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await delivery.aclose()


async def nothing_left_to_deliver(nc: Client) -> bool:
    info = await nc.jetstream().consumer_info(EVENTS_STREAM, NOTIFIER_CONSUMER)
    return bool(info.num_ack_pending == 0 and info.num_pending == 0)


@pytest.mark.usefixtures("notifier")
async def test_logs_are_forwarded_after_failed_attempts_exactly_as_the_api_shows_them(
    nc: Client, event_store: NatsEventStore, start_hades: StartHades
) -> None:
    async with receiving(500, 500, 200) as receiver:
        job_id = await finished_job(event_store, nc, receiver.url, [["hello", "!oops"], [], ["bye"]])
        events = await settled(event_store, job_id)

    assert outcomes(events) == [
        ("logs_forward_failed", 1, 500, False),
        ("logs_forward_failed", 2, 500, False),
        ("logs_forwarded", 3, 200, False),
    ]
    forwarded = events[-1]
    assert isinstance(forwarded, LogsForwarded) and forwarded.lines == 3
    assert forwarded.url == f"{receiver.url}/hook/{job_id}"
    requests = receiver.for_job(job_id)
    assert len(requests) == 3 and len({r.body for r in requests}) == 1
    assert all(r.method == "POST" and r.headers["content-type"] == "application/json" for r in requests)
    body = requests[-1].json()
    assert body == [
        {"job_id": job_id, "container_id": "container-0", "logs": [line(0, "hello"), line(1, "oops", "stderr")]},
        {"job_id": job_id, "container_id": "container-1", "logs": None},
        {"job_id": job_id, "container_id": "container-2", "logs": [line(0, "bye")]},
    ]
    api = await start_hades(Roles(api=True))
    assert (await api.client.get(f"/jobs/{job_id}/logs")).json() == {"logs": body}
    state = (await JobHandle.load(event_store, SystemClock(), job_id)).state
    assert state is not None and (state.logs_delivery, state.logs_delivery_attempts) == ("forwarded", 3)


@pytest.mark.usefixtures("notifier")
async def test_a_receiver_that_never_answers_2xx_gets_max_attempts_then_a_final_failure(
    nc: Client, event_store: NatsEventStore
) -> None:
    async with receiving(500) as receiver:
        job_id = await finished_job(event_store, nc, receiver.url, [["compiling"], ["never runs"]], fail_at=0)
        events = await settled(event_store, job_id)
        await eventually(lambda: nothing_left_to_deliver(nc))

    assert outcomes(events) == [
        ("logs_forward_failed", 1, 500, False),
        ("logs_forward_failed", 2, 500, False),
        ("logs_forward_failed", 3, 500, True),
    ]
    assert all(isinstance(e, LogsForwardFailed) and e.error == "receiver answered HTTP 500" for e in events)
    requests = receiver.for_job(job_id)
    assert len(requests) == FAST.max_attempts
    assert requests[0].json() == [{"job_id": job_id, "container_id": "container-0", "logs": [line(0, "compiling")]}]
    state = (await JobHandle.load(event_store, SystemClock(), job_id)).state
    assert state is not None and state.status is Status.FAILED
    assert (state.logs_delivery, state.logs_delivery_attempts) == ("failed", 3)


@pytest.mark.usefixtures("notifier")
async def test_a_dropped_connection_is_retried_and_a_stopped_job_forwards_what_its_steps_wrote(
    nc: Client, event_store: NatsEventStore
) -> None:
    async with receiving("close", 204) as receiver:
        job = await running_job(event_store, receiver.url, steps=3)
        assert job.state is not None
        job_id = job.state.job_id
        last = await run_step(nc, job, 0, ["one"])
        await job.run(job_id, FinishStep(attempt=1, step_index=0, exit_code=0, last_log_seq=last))
        await run_step(nc, job, 1, ["two"])  # cancelled while running: its writer closes, no step_finished
        await job.run(job_id, RequestCancel(by="tester"))
        await job.run(job_id, StopJob(attempt=1, reason="cancelled by tester"))
        events = await settled(event_store, job_id)

    assert outcomes(events) == [("logs_forward_failed", 1, None, False), ("logs_forwarded", 2, 204, False)]
    failed = events[0]
    assert isinstance(failed, LogsForwardFailed) and "disconnected" in failed.error
    assert receiver.for_job(job_id)[-1].json() == [
        {"job_id": job_id, "container_id": "container-0", "logs": [line(0, "one")]},
        {"job_id": job_id, "container_id": "container-1", "logs": [line(0, "two")]},
    ]


@pytest.mark.usefixtures("notifier")
async def test_a_job_without_callback_url_is_acknowledged_and_nothing_is_sent(
    nc: Client, event_store: NatsEventStore
) -> None:
    async with receiving(200) as receiver:
        job_id = await finished_job(event_store, nc, "", [["quiet"]])
        terminal_seq = (await event_store.history(job_id))[-1].seq

        async def passed() -> bool:
            info = await nc.jetstream().consumer_info(EVENTS_STREAM, NOTIFIER_CONSUMER)
            return bool(info.ack_floor.stream_seq >= terminal_seq)

        await eventually(passed)
    assert await deliveries(event_store, job_id) == []
    assert receiver.requests == []


@pytest.mark.usefixtures("notifier")
async def test_a_terminal_event_from_before_follow_ups_is_still_forwarded(
    nc: Client, event_store: NatsEventStore
) -> None:
    """An end written by an older Hades does not say what follows it: the job's ``submitted`` is read instead."""
    async with receiving(200) as receiver:
        job = await running_job(event_store, receiver.url, steps=1)
        assert job.state is not None
        job_id = job.state.job_id
        await run_step(nc, job, 0, ["old"])
        older = JobStopped(job_id=job_id, at=datetime.now(UTC), attempt=1, reason="cancelled by an old hades")
        await event_store.append(job_id, [older], job.seq)
        events = await settled(event_store, job_id)
    assert outcomes(events) == [("logs_forwarded", 1, 200, False)]
    assert receiver.for_job(job_id)[-1].json() == [
        {"job_id": job_id, "container_id": "container-0", "logs": [line(0, "old")]}
    ]


async def test_the_attempt_number_never_goes_back_and_a_settled_job_is_left_alone(
    nc: Client, event_store: NatsEventStore
) -> None:
    settings = NotifierSettings(max_attempts=2, timeout=2.0, backoff_base=4.0, backoff_max=60.0)
    async with receiving(503) as receiver:
        job_id = await finished_job(event_store, nc, receiver.url, [["x"]])
        delivery = HttpDelivery(settings.timeout)
        logs = NatsLogStore(nc)
        forwarder = LogForwarder(event_store, SystemClock(), logs, delivery.post_json, settings, lambda: 0.5)
        try:
            assert await forwarder.forward(job_id, delivered=1) == 2.0  # half of the 4 s ceiling after attempt 1
            # A delivery count that restarted (a re-created consumer) still continues the job's own count.
            assert await forwarder.forward(job_id, delivered=1) is None
            assert await forwarder.forward(job_id, delivered=3) is None  # settled: nothing is sent
        finally:
            await delivery.aclose()
    assert outcomes(await deliveries(event_store, job_id)) == [
        ("logs_forward_failed", 1, 503, False),
        ("logs_forward_failed", 2, 503, True),
    ]
    assert len(receiver.requests) == 2
