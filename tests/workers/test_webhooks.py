"""The job-status webhook on the real session nats-server against a real HTTP receiver on 127.0.0.1: the payload
and headers, retries with backoff (failing, hanging and dropping receivers), the signature, the delivery log and
redelivery routes, two replicas on one consumer, and a notifier process SIGKILLed between attempts."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import random
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

import httpx
import pytest
from nats.aio.client import Client

from hades.adapters.http_delivery import HttpDelivery
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.clock import SystemClock
from hades.core.events import WebhookDelivered, WebhookFailed
from hades.core.lifecycle import (
    FinishStep,
    JobState,
    QueueJob,
    RequestCancel,
    StartAttempt,
    StartStep,
    SubmitJob,
    decide,
)
from hades.core.spec import JobSpec, Step
from hades.http.app import create_app
from hades.http.services import ApiServices
from hades.projections.runner import ProjectionRunner
from hades.projections.views import ReadModels
from hades.workers.jobs import JobHandle
from hades.workers.notifier import BEHIND_RETRY_SECONDS, LogForwarder, NotifierSettings, notifier_consumer
from hades.workers.webhooks import WEBHOOKS_CONSUMER, WebhookSender, WebhookSettings, webhook_consumer
from tests.conftest import SpawnRole, eventually
from tests.support.receiver import Receiver, receiving

FAST = WebhookSettings(max_attempts=4, timeout=0.5, backoff_base=0.02, backoff_max=0.1)
SEED_KEYS = ["event", "job_id", "name", "status", "reason", "queued_at", "started_at", "finished_at", "duration_ms"]
ISO_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")

Webhook = WebhookDelivered | WebhookFailed
StartWebhooks = Callable[..., Awaitable[WebhookSender]]


# -- finished jobs, made without an engine -------------------------------------------------------------------------


async def new_job(store: NatsEventStore, status_url: str, callback_url: str = "", name: str = "grade") -> JobHandle:
    """A submitted job whose hooks are ``<url>/hook/<job_id>`` (and ``<callback_url>/logs/<job_id>``)."""
    job_id = str(uuid.uuid4())
    clock = SystemClock()
    spec = JobSpec(
        name=name,
        steps=(Step(id=1, image="busybox"),),
        status_callback_url=status_url.replace("{job}", job_id),
        callback_url=callback_url.replace("{job}", job_id),
    )
    await store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), clock.now()), 0)
    job = await JobHandle.load(store, clock, job_id)
    await job.run(job_id, QueueJob())
    return job


async def ended_job(store: NatsEventStore, status_url: str, how: str = "succeeded", callback_url: str = "") -> str:
    """A job that ended ``how`` (succeeded, failed, or stopped while queued); its id."""
    job = await new_job(store, status_url, callback_url)
    assert job.state is not None
    job_id = job.state.job_id
    if how == "stopped":
        await job.run(job_id, RequestCancel(by="tester"))
        return job_id
    await job.run(job_id, StartAttempt(attempt=1, executor_id="test-executor"))
    await job.run(job_id, StartStep(attempt=1, step_index=0))
    await job.run(job_id, FinishStep(attempt=1, step_index=0, exit_code=0 if how == "succeeded" else 3))
    return job_id


def hook(receiver: Receiver) -> str:
    return f"{receiver.url}/hook/{{job}}"


async def state_of(store: NatsEventStore, job_id: str) -> JobState:
    state = (await JobHandle.load(store, SystemClock(), job_id)).state
    assert state is not None
    return state


async def webhook_events(store: NatsEventStore, job_id: str) -> list[Webhook]:
    return [r.event for r in await store.history(job_id) if isinstance(r.event, WebhookDelivered | WebhookFailed)]


async def settled(store: NatsEventStore, job_id: str, timeout: float = 30) -> list[Webhook]:
    """The job's webhook events once the last one settles the delivery (delivered, or failed for good)."""

    async def check() -> list[Webhook] | None:
        found = await webhook_events(store, job_id)
        if found and (isinstance(found[-1], WebhookDelivered) or found[-1].final):
            return found
        return None

    result: list[Webhook] = await eventually(check, timeout=timeout)
    return result


def outcomes(events: list[Webhook]) -> list[tuple[str, int, int | None, bool]]:
    return [(e.type, e.delivery_attempt, e.status_code, isinstance(e, WebhookFailed) and e.final) for e in events]


def attempts_seen(receiver: Receiver, job_id: str) -> list[int]:
    return [body["attempt"] for body in (r.json() for r in receiver.for_job(job_id)) if isinstance(body, dict)]


async def nothing_left(nc: Client) -> bool:
    info = await nc.jetstream().consumer_info(EVENTS_STREAM, WEBHOOKS_CONSUMER)
    return bool(info.num_ack_pending == 0 and info.num_pending == 0)


def verify(secret: str, headers: Mapping[str, str], body: bytes, now: float, tolerance: float = 300) -> bool:
    """What a receiver does (the README's example): the signature of ``<timestamp>.<body>``, and a fresh stamp."""
    timestamp = headers["x-hades-timestamp"]
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    fresh = abs(now - int(timestamp)) <= tolerance
    return hmac.compare_digest(f"sha256={mac}", headers["x-hades-signature"]) and fresh


# -- the webhook routers, running in this test's loop ---------------------------------------------------------------


@pytest.fixture
async def start_webhooks(nats_url: str, nc: Client, event_store: NatsEventStore) -> AsyncIterator[StartWebhooks]:
    """Start notifier replicas (a broker each) with tiny settings; ``logs`` adds the log forwarder, as runtime does."""
    running: list[tuple[list[asyncio.Task[None]], HttpDelivery]] = []

    async def start(
        settings: WebhookSettings = FAST,
        draw: Callable[[], float] = random.random,
        logs: NotifierSettings | None = None,
    ) -> WebhookSender:
        delivery = HttpDelivery(settings.timeout)
        sender = WebhookSender(event_store, SystemClock(), delivery.post_json, settings, draw)
        consumers = [webhook_consumer(nc, sender)]
        if logs is not None:
            forwarder = LogForwarder(event_store, SystemClock(), NatsLogStore(nc), delivery.post_json, logs)
            consumers.append(notifier_consumer(nc, forwarder))
        for consumer in consumers:
            await consumer.start()
        running.append(([asyncio.create_task(consumer.run()) for consumer in consumers], delivery))
        return sender

    yield start
    for tasks, delivery in running:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await delivery.aclose()


@contextlib.asynccontextmanager
async def api(
    nc: Client, store: NatsEventStore, sender: WebhookSender | None, auth_key: str = ""
) -> AsyncIterator[httpx.AsyncClient]:
    """The API app in-process (the delivery routes read the store directly; no projection needs to run)."""
    views = ReadModels()
    services = ApiServices(
        store=store,
        logs=NatsLogStore(nc),
        views=views,
        projections=ProjectionRunner(store.replay_batches, views.apply),
        clock=SystemClock(),
        auth_key=auth_key,
        webhooks=sender,
    )
    app: Any = create_app(services)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        yield http


# -- the payload and its headers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["succeeded", "failed", "stopped"])
async def test_one_post_with_the_seed_schema_exactly_and_the_delivery_headers(
    how: str, event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    await start_webhooks()
    async with receiving(200) as receiver:
        secret_url = receiver.url.replace("http://", "http://user:pw@") + "/hook/{job}?token=s3cret"
        job_id = await ended_job(event_store, secret_url, how)
        events = await settled(event_store, job_id)

    assert outcomes(events) == [("webhook_delivered", 1, 200, False)]
    assert events[0].url == f"{receiver.url}/hook/{job_id}", "credentials and query are not recorded"
    [request] = receiver.for_job(job_id)
    assert request.method == "POST" and request.path == f"/hook/{job_id}?token=s3cret"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["idempotency-key"] == job_id
    assert request.headers["x-hades-delivery"] == f"{job_id}:1"
    assert "x-hades-signature" not in request.headers and "x-hades-timestamp" not in request.headers

    body = request.json()
    assert isinstance(body, dict) and list(body) == [*SEED_KEYS, "attempt"]
    state = await state_of(event_store, job_id)
    assert body["event"] == "job.completed"
    assert (body["job_id"], body["name"], body["status"], body["reason"]) == (
        job_id,
        "grade",
        state.status.value,
        state.reason,
    )
    assert body["status"] == {"succeeded": "Succeeded", "failed": "Failed", "stopped": "Stopped"}[how]
    assert (body["reason"] is None) == (how == "succeeded")
    assert ISO_Z.fullmatch(body["queued_at"]) and ISO_Z.fullmatch(body["finished_at"])
    assert state.finished_at is not None
    assert body["finished_at"] == state.finished_at.isoformat().replace("+00:00", "Z")
    if how == "stopped":  # never started: no start, no duration
        assert (body["started_at"], body["duration_ms"]) == (None, None)
    else:
        assert state.started_at is not None and ISO_Z.fullmatch(body["started_at"])
        expected_ms = (state.finished_at - state.started_at) / timedelta(milliseconds=1)
        assert abs(body["duration_ms"] - expected_ms) <= 0.5
    assert body["attempt"] == 1
    assert (state.webhook_delivery, state.webhook_delivery_attempts) == ("delivered", 1)


# -- retries ---------------------------------------------------------------------------------------------------------


async def test_a_receiver_failing_the_first_attempts_gets_them_counted_up_until_a_2xx(
    event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    await start_webhooks()
    async with receiving(500, 503, 204) as receiver:
        job_id = await ended_job(event_store, hook(receiver), "failed")
        events = await settled(event_store, job_id)

    assert outcomes(events) == [
        ("webhook_failed", 1, 500, False),
        ("webhook_failed", 2, 503, False),
        ("webhook_delivered", 3, 204, False),
    ]
    assert [e.error for e in events if isinstance(e, WebhookFailed)] == [
        "receiver answered HTTP 500",
        "receiver answered HTTP 503",
    ]
    requests = receiver.for_job(job_id)
    assert attempts_seen(receiver, job_id) == [1, 2, 3]
    assert [r.headers["x-hades-delivery"] for r in requests] == [f"{job_id}:{n}" for n in (1, 2, 3)]
    assert {r.headers["idempotency-key"] for r in requests} == {job_id}
    bodies = [r.json() for r in requests]
    assert all(isinstance(b, dict) for b in bodies)
    assert len({tuple((k, v) for k, v in b.items() if k != "attempt") for b in bodies if isinstance(b, dict)}) == 1


async def test_a_receiver_that_hangs_past_the_timeout_is_a_failed_attempt_then_retried(
    event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    settings = WebhookSettings(max_attempts=3, timeout=0.3, backoff_base=0.02, backoff_max=0.05)
    await start_webhooks(settings)
    async with receiving("hang", 200) as receiver:
        job_id = await ended_job(event_store, hook(receiver))
        events = await settled(event_store, job_id)

    assert outcomes(events) == [("webhook_failed", 1, None, False), ("webhook_delivered", 2, 200, False)]
    hung = events[0]
    assert isinstance(hung, WebhookFailed) and hung.error == "no answer within 0.3 s"
    assert 300 <= hung.duration_ms < 2000
    assert attempts_seen(receiver, job_id) == [1, 2]


async def test_a_receiver_that_closes_the_connection_is_a_failed_attempt_then_retried(
    event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    await start_webhooks()
    async with receiving("close", "close", 202) as receiver:
        job_id = await ended_job(event_store, hook(receiver), "stopped")
        events = await settled(event_store, job_id)

    assert outcomes(events) == [
        ("webhook_failed", 1, None, False),
        ("webhook_failed", 2, None, False),
        ("webhook_delivered", 3, 202, False),
    ]
    assert all("disconnected" in e.error for e in events if isinstance(e, WebhookFailed))
    assert attempts_seen(receiver, job_id) == [1, 2, 3]


async def test_a_receiver_that_never_answers_2xx_gets_max_attempts_then_a_final_failure(
    nc: Client, event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    await start_webhooks()
    async with receiving(500) as receiver:
        job_id = await ended_job(event_store, hook(receiver), "failed")
        events = await settled(event_store, job_id)
        await eventually(lambda: nothing_left(nc))

    assert outcomes(events) == [
        ("webhook_failed", 1, 500, False),
        ("webhook_failed", 2, 500, False),
        ("webhook_failed", 3, 500, False),
        ("webhook_failed", 4, 500, True),
    ]
    assert attempts_seen(receiver, job_id) == [1, 2, 3, 4]
    state = await state_of(event_store, job_id)
    assert (state.webhook_delivery, state.webhook_delivery_attempts) == ("failed", 4)


async def test_retries_wait_the_jittered_backoff(event_store: NatsEventStore, start_webhooks: StartWebhooks) -> None:
    # A fixed draw of 0.8: 0.8 × 0.25 s after attempt 1, 0.8 × 0.5 s after attempt 2.
    await start_webhooks(WebhookSettings(max_attempts=5, timeout=1.0, backoff_base=0.25, backoff_max=30), lambda: 0.8)
    async with receiving(500, 500, 200) as receiver:
        job_id = await ended_job(event_store, hook(receiver))
        await settled(event_store, job_id)

    first, second, third = receiver.for_job(job_id)
    assert 0.2 <= second.at - first.at < 0.2 + 2.0
    assert 0.4 <= third.at - second.at < 0.4 + 2.0


async def test_the_sender_returns_the_backoff_and_never_reuses_an_attempt_number(event_store: NatsEventStore) -> None:
    settings = WebhookSettings(max_attempts=2, timeout=1.0, backoff_base=4.0, backoff_max=60.0)
    async with receiving(503) as receiver:
        job_id = await ended_job(event_store, hook(receiver))
        delivery = HttpDelivery(settings.timeout)
        sender = WebhookSender(event_store, SystemClock(), delivery.post_json, settings, lambda: 0.5)
        try:
            assert await sender.deliver(job_id, delivered=1) == 2.0  # half of the 4 s ceiling after attempt 1
            # A delivery count that restarted (a re-created consumer) still continues the job's own count.
            assert await sender.deliver(job_id, delivered=1) is None
            assert await sender.deliver(job_id, delivered=3) is None  # settled: nothing is sent
        finally:
            await delivery.aclose()
    assert outcomes(await webhook_events(event_store, job_id)) == [
        ("webhook_failed", 1, 503, False),
        ("webhook_failed", 2, 503, True),
    ]
    assert attempts_seen(receiver, job_id) == [1, 2]


async def test_a_job_without_status_callback_url_is_acknowledged_and_nothing_is_sent(
    nc: Client, event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    await start_webhooks()
    async with receiving(200) as receiver:
        job_id = await ended_job(event_store, "")
        terminal_seq = (await event_store.history(job_id))[-1].seq

        async def passed() -> bool:
            info = await nc.jetstream().consumer_info(EVENTS_STREAM, WEBHOOKS_CONSUMER)
            return bool(info.ack_floor.stream_seq >= terminal_seq)

        await eventually(passed)
    assert await webhook_events(event_store, job_id) == []
    assert receiver.requests == []


# -- the signature ---------------------------------------------------------------------------------------------------


async def test_the_signature_verifies_with_the_secret_and_the_timestamp(
    event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    secret = "whsec_" + uuid.uuid4().hex
    await start_webhooks(
        WebhookSettings(max_attempts=3, timeout=1.0, backoff_base=0.02, backoff_max=0.05, secret=secret)
    )
    before = time.time()
    async with receiving(500, 200) as receiver:
        job_id = await ended_job(event_store, hook(receiver))
        await settled(event_store, job_id)
    after = time.time()

    requests = receiver.for_job(job_id)
    assert len(requests) == 2
    for request in requests:
        stamp = int(request.headers["x-hades-timestamp"])
        assert int(before) <= stamp <= after
        assert request.headers["x-hades-signature"].startswith("sha256=")
        assert verify(secret, request.headers, request.body, now=request.at)
        assert not verify("whsec_wrong", request.headers, request.body, now=request.at)
        assert not verify(secret, request.headers, request.body.replace(b"Succeeded", b"Failed"), now=request.at)
        assert not verify(secret, request.headers, request.body, now=request.at + 600), "a replay is refused"
    assert requests[0].headers["x-hades-signature"] != requests[1].headers["x-hades-signature"]


# -- the delivery log and redelivery ---------------------------------------------------------------------------------


async def test_the_delivery_log_lists_both_kinds_as_the_receivers_saw_them(
    nc: Client, event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    logs = NotifierSettings(max_attempts=3, timeout=0.5, backoff_base=0.02, backoff_max=0.05)
    await start_webhooks(logs=logs)
    async with receiving(500, "close", 200) as hooks, receiving("hang", 200) as log_receiver:
        callback = f"{log_receiver.url}/logs/{{job}}"
        job_id = await ended_job(event_store, hook(hooks), "failed", callback_url=callback)
        await settled(event_store, job_id)
        await eventually(lambda: _logs_settled(event_store, job_id))
        async with api(nc, event_store, None) as client:
            response = await client.get(f"/jobs/{job_id}/deliveries")

    assert response.status_code == 200
    rows = response.json()["deliveries"]
    assert response.json()["job_id"] == job_id
    assert [row["at"] for row in rows] == sorted(row["at"] for row in rows), "oldest first"
    webhook = [row for row in rows if row["kind"] == "webhook"]
    forwarded = [row for row in rows if row["kind"] == "logs"]
    assert [r["delivery_attempt"] for r in webhook] == attempts_seen(hooks, job_id) == [1, 2, 3]
    assert [(r["ok"], r["status_code"], r["final"]) for r in webhook] == [
        (False, 500, False),
        (False, None, False),
        (True, 200, True),
    ]
    assert webhook[0]["error"] == "receiver answered HTTP 500" and "disconnected" in webhook[1]["error"]
    assert webhook[2]["error"] is None and webhook[2]["url"] == f"{hooks.url}/hook/{job_id}"
    assert all(isinstance(r["duration_ms"], int) and r["redelivered_by"] is None for r in rows)
    assert [(r["delivery_attempt"], r["ok"], r["status_code"]) for r in forwarded] == [(1, False, None), (2, True, 200)]
    assert len(log_receiver.for_path(f"/logs/{job_id}")) == 2
    assert forwarded[0]["error"] == "no answer within 0.5 s"
    # Sent at once, not after the logs: the first webhook attempt was recorded before the hung logs attempt ended.
    assert webhook[0]["at"] < forwarded[0]["at"]


async def _logs_settled(store: NatsEventStore, job_id: str) -> bool:
    return (await state_of(store, job_id)).logs_delivery is not None


async def test_redeliver_sends_once_more_now_as_the_next_attempt_and_records_it(
    nc: Client, event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    sender = await start_webhooks()
    async with receiving(200, 200, 503) as receiver, api(nc, event_store, sender) as client:
        job_id = await ended_job(event_store, hook(receiver))
        await settled(event_store, job_id)

        again = await client.post(f"/jobs/{job_id}/deliveries/redeliver")
        assert again.status_code == 202, again.text
        assert again.json() | {"at": None, "duration_ms": None} == {
            "job_id": job_id,
            "kind": "webhook",
            "at": None,
            "delivery_attempt": 2,
            "url": f"{receiver.url}/hook/{job_id}",
            "ok": True,
            "status_code": 200,
            "error": None,
            "duration_ms": None,
            "final": True,
            "redelivered_by": "api",
        }
        failing = await client.post(f"/jobs/{job_id}/deliveries/redeliver")
        assert failing.status_code == 202
        assert (failing.json()["delivery_attempt"], failing.json()["ok"], failing.json()["status_code"]) == (
            3,
            False,
            503,
        )
        assert failing.json()["final"] is True, "a redelivery of a settled job is not retried"
        rows = (await client.get(f"/jobs/{job_id}/deliveries")).json()["deliveries"]

    assert attempts_seen(receiver, job_id) == [1, 2, 3]
    requests = receiver.for_job(job_id)
    assert [r.headers["x-hades-delivery"] for r in requests] == [f"{job_id}:{n}" for n in (1, 2, 3)]
    assert {r.headers["idempotency-key"] for r in requests} == {job_id}
    assert [(r["delivery_attempt"], r["ok"], r["redelivered_by"]) for r in rows] == [
        (1, True, None),
        (2, True, "api"),
        (3, False, "api"),
    ]
    state = await state_of(event_store, job_id)
    assert (state.webhook_delivery, state.webhook_delivery_attempts) == ("failed", 3)


async def test_redeliver_refuses_unknown_unfinished_and_hookless_jobs_and_needs_auth(
    nc: Client, event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    sender = await start_webhooks()
    async with receiving(200) as receiver:
        running = await new_job(event_store, hook(receiver))
        assert running.state is not None
        hookless = await ended_job(event_store, "")
        done = await ended_job(event_store, hook(receiver))
        await settled(event_store, done)
        async with api(nc, event_store, sender, auth_key="k3y") as client:
            auth = httpx.BasicAuth("hades", "k3y")

            async def redeliver(job_id: str, **kwargs: Any) -> httpx.Response:
                return await client.post(f"/jobs/{job_id}/deliveries/redeliver", **kwargs)

            assert (await redeliver(done)).status_code == 401
            assert (await client.get(f"/jobs/{done}/deliveries")).status_code == 401
            unknown = str(uuid.uuid4())
            assert (await redeliver(unknown, auth=auth)).json() == {"error": f"job not found: {unknown}"}
            assert (await redeliver("not-a-job", auth=auth)).status_code == 404
            assert (await client.get(f"/jobs/{unknown}/deliveries", auth=auth)).status_code == 404
            queued = await redeliver(running.state.job_id, auth=auth)
            assert queued.status_code == 409
            assert queued.json() == {"error": f"job {running.state.job_id} has not ended (Queued)", "status": "Queued"}
            no_hook = await redeliver(hookless, auth=auth)
            assert (no_hook.status_code, no_hook.json()["error"]) == (409, f"job {hookless} has no status_callback_url")
            assert (await client.get(f"/jobs/{hookless}/deliveries", auth=auth)).json()["deliveries"] == []
            ok = await redeliver(done, auth=auth)
            assert (ok.status_code, ok.json()["redelivered_by"], ok.json()["delivery_attempt"]) == (202, "hades", 2)
        async with api(nc, event_store, None) as client:
            assert (await client.post(f"/jobs/{done}/deliveries/redeliver")).status_code == 503
    assert attempts_seen(receiver, done) == [1, 2]
    assert receiver.for_job(running.state.job_id) == receiver.for_job(hookless) == []


# -- replicas and crashes --------------------------------------------------------------------------------------------


async def test_two_replicas_on_one_consumer_make_one_delivery_per_attempt(
    nc: Client, event_store: NatsEventStore, start_webhooks: StartWebhooks
) -> None:
    await start_webhooks()
    await start_webhooks()
    async with receiving(500, 200) as receiver:
        jobs = [await ended_job(event_store, hook(receiver), how) for how in ("succeeded", "failed", "stopped") * 3]
        for job_id in jobs:
            assert outcomes(await settled(event_store, job_id)) == [
                ("webhook_failed", 1, 500, False),
                ("webhook_delivered", 2, 200, False),
            ]
        await eventually(lambda: nothing_left(nc))
    for job_id in jobs:
        assert attempts_seen(receiver, job_id) == [1, 2]
    assert len(receiver.requests) == 2 * len(jobs)


async def test_a_notifier_killed_between_attempts_loses_nothing(
    event_store: NatsEventStore, spawn_role: SpawnRole
) -> None:
    env = {
        "WEBHOOK_MAX_ATTEMPTS": "5",
        "WEBHOOK_TIMEOUT": "2",
        "WEBHOOK_BACKOFF_BASE": "1",  # a retry waits up to 1 s: room to kill the process in between
        "WEBHOOK_BACKOFF_MAX": "1",
    }
    async with receiving(500, 500, 200) as receiver:
        first = spawn_role("notifier", **env)
        job_id = await ended_job(event_store, hook(receiver), "failed")

        async def first_attempt_recorded() -> list[Webhook]:
            return await webhook_events(event_store, job_id)

        await eventually(first_attempt_recorded, timeout=60, interval=0.01)
        first.kill()
        at_kill = await webhook_events(event_store, job_id)
        spawn_role("notifier", **env)
        events = await settled(event_store, job_id, timeout=90)

    assert outcomes(events[:1]) == [("webhook_failed", 1, 500, False)]
    assert len(events) > len(at_kill), "an attempt after the kill was made by the new process and recorded"
    assert isinstance(events[-1], WebhookDelivered) and events[-1].delivery_attempt >= 3
    seen = attempts_seen(receiver, job_id)
    recorded = [e.delivery_attempt for e in events]
    assert seen == sorted(set(seen)), "attempt numbers only count up"
    assert set(recorded) <= set(seen) and seen[-1] == recorded[-1], "every recorded attempt reached the receiver"
    # Normally exactly [1, 2, 3]. The kill may add one irregularity, which at-least-once allows; the message then
    # comes back after the consumer's ack wait as the next attempt: a kill mid-POST adds an attempt the receiver saw
    # and nobody recorded ([1, 2, 3, 4] recorded [1, 3, 4]); a redelivery handed to the dead process's pull request,
    # still open on the server, skips that attempt's number ([1, 3, 4], seen in CI).
    assert seen == recorded == [1, 2, 3] or (len(set(seen) - set(recorded)) <= 1 and seen[-1] <= 4)


class LaggingReplica:
    """The real store, answering reads as a follower that has not yet stored the job's last ``missing`` events
    (on an R3 stream direct gets are answered by followers too); ``catch_up()`` makes it current."""

    def __init__(self, store: NatsEventStore, missing: int) -> None:
        self.store, self.missing = store, missing

    def catch_up(self) -> None:
        self.missing = 0

    async def submitted(self, job_id: str) -> Any:
        history = await self.history(job_id)
        return history[0] if history else None

    async def history(self, job_id: str) -> list[Any]:
        history = await self.store.history(job_id)
        return history[: len(history) - self.missing] if self.missing else history

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.mark.parametrize("missing", [1, 99])  # the terminal event only; the whole history, `submitted` too
async def test_a_history_read_from_a_replica_behind_the_terminal_event_is_read_again(
    event_store: NatsEventStore, missing: int
) -> None:
    settings = WebhookSettings(max_attempts=3, timeout=1.0, backoff_base=4.0, backoff_max=60.0)
    async with receiving(200) as receiver:
        job_id = await ended_job(event_store, hook(receiver))
        terminal_seq = (await event_store.history(job_id))[-1].seq
        replica = LaggingReplica(event_store, missing)
        delivery = HttpDelivery(settings.timeout)
        sender = WebhookSender(replica, SystemClock(), delivery.post_json, settings, lambda: 0.5)  # type: ignore[arg-type]
        try:
            assert await sender.deliver(job_id, delivered=1, seq=terminal_seq) == BEHIND_RETRY_SECONDS
            assert receiver.for_job(job_id) == []  # not taken for "nothing to deliver", nor sent
            replica.catch_up()
            assert await sender.deliver(job_id, delivered=2, seq=terminal_seq) is None
        finally:
            await delivery.aclose()
    assert [e.type for e in await webhook_events(event_store, job_id)] == ["webhook_delivered"]
    assert len(receiver.for_job(job_id)) == 1
