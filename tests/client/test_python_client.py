"""``hades.client`` against a real Hades (process executor, real nats-server): every method of ``Hades`` and
``AsyncHades``, the errors as the server words them, and the log stream ending exactly at the job's end.

The blocking client runs in a thread: the Hades it talks to runs in this test's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hades.client import AsyncHades, Hades, HadesClientError, HadesUnreachable, JobEnded, JobEvent
from hades.core.events import JobCancelRequested, JobSucceeded, StepFinished
from hades.core.logs import Log
from hades.core.spec import parse_job_request
from tests.client.conftest import Api, gated, job
from tests.conftest import free_port
from tests.support.receiver import receiving

pytestmark = pytest.mark.timeout(60)


def sync(api: Api) -> Hades:
    return Hades(api.url, api.key)


def lines(batches: list[Log | JobEnded]) -> list[str]:
    return [entry.message for batch in batches if isinstance(batch, Log) for entry in batch.logs or []]


def read_everything(client: Hades, job_id: str) -> dict[str, Any]:
    """Every read of one job with the blocking client."""
    return {
        "status": client.status(job_id),
        "job": client.job(job_id),
        "logs": client.logs(job_id),
        "events": client.events(job_id),
        "timing": client.timing(job_id),
        "deliveries": client.deliveries(job_id),
    }


async def aread_everything(client: AsyncHades, job_id: str) -> dict[str, Any]:
    """The same reads with the asyncio client."""
    return {
        "status": await client.status(job_id),
        "job": await client.job(job_id),
        "logs": await client.logs(job_id),
        "events": await client.events(job_id),
        "timing": await client.timing(job_id),
        "deliveries": await client.deliveries(job_id),
    }


async def test_both_clients_submit_wait_and_read_a_job_alike(api: Api) -> None:
    body = job("echo one; echo two >&2", "echo three")
    async with AsyncHades(api.url, api.key) as client:
        job_id = await client.submit(body)
        assert await client.wait(job_id, timeout=30) == "Succeeded"
        seen = await aread_everything(client, job_id)

    with sync(api) as blocking:
        seen_sync = await asyncio.to_thread(read_everything, blocking, job_id)

    assert seen_sync == seen
    assert seen["status"] == "Succeeded"
    assert seen["job"]["id"] == job_id and seen["job"]["status"] == "Succeeded"
    assert [s["name"] for s in seen["job"]["steps"]] == ["step-1", "step-2"]
    assert [[(e.message, e.output_stream) for e in log.logs or []] for log in seen["logs"]] == [
        [("one", "stdout"), ("two", "stderr")],
        [("three", "stdout")],
    ]
    assert all(isinstance(log, Log) and log.job_id == job_id for log in seen["logs"])
    assert seen["timing"] == seen["job"]["timing"] and "phases" in seen["timing"]
    assert seen["deliveries"] == {"job_id": job_id, "deliveries": []}


async def test_events_are_decoded_into_the_servers_models(api: Api) -> None:
    async with AsyncHades(api.url, api.key) as client:
        job_id = await client.submit(job("true"))
        await client.wait(job_id, timeout=30)
        events = await client.events(job_id)

    assert all(isinstance(e, JobEvent) for e in events)
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert events[0].type == "submitted" and events[0].event is None  # the route leaves the spec out
    decoded = [e.event for e in events[1:]]
    assert all(
        d is not None and d.job_id == job_id and d.type == e.type for d, e in zip(decoded, events[1:], strict=True)
    )
    assert isinstance(decoded[-1], JobSucceeded) and decoded[-1].at == events[-1].at
    step = next(d for d in decoded if isinstance(d, StepFinished))
    assert step.exit_code == 0
    assert {"seq": events[-1].seq, "type": "succeeded"}.items() <= events[-1].row.items()


async def test_a_job_spec_or_the_bodys_bytes_are_submitted_as_they_are(api: Api) -> None:
    body = json.dumps(job("echo from-bytes")).encode()
    async with AsyncHades(api.url, api.key) as client:
        from_bytes = await client.submit(body)
        from_spec = await client.submit(parse_job_request(json.dumps(job("echo from-spec")).encode()))
        assert await client.wait(from_bytes, timeout=30) == await client.wait(from_spec, timeout=30) == "Succeeded"
        assert (await client.logs(from_bytes))[0].logs[0].message == "from-bytes"  # type: ignore[index]
        assert (await client.logs(from_spec))[0].logs[0].message == "from-spec"  # type: ignore[index]


async def test_a_submission_sent_again_with_its_idempotency_key_is_the_same_job(api: Api) -> None:
    key = f"client-{uuid.uuid4()}"
    async with AsyncHades(api.url, api.key) as client:
        first = await client.submit(job("echo once"), idempotency_key=key)
        assert await client.submit(job("echo once"), idempotency_key=key) == first
        with pytest.raises(HadesClientError, match="was used for a different job"):
            await client.submit(job("echo other"), idempotency_key=key)
        assert await client.wait(first, timeout=30) == "Succeeded"
    blocking = await asyncio.to_thread(submit_blocking, api, job("echo once"), key)  # the API runs in this loop
    assert blocking == first


def submit_blocking(api: Api, body: dict[str, Any], key: str) -> str:
    with Hades(api.url, api.key) as client:
        return client.submit(body, idempotency_key=key)


# -- the log stream ------------------------------------------------------------------------------------------------


async def test_follow_streams_live_and_ends_exactly_at_the_jobs_end(api: Api, tmp_path: Path) -> None:
    gate = api.gates / uuid.uuid4().hex
    async with AsyncHades(api.url, api.key) as client:
        job_id = await client.submit(job(gated(gate), "echo last"))
        items: list[Log | JobEnded] = []
        async for item in client.follow(job_id):
            items.append(item)
            if lines(items) == ["waiting"]:
                assert await client.status(job_id) == "Running"  # live: the job waits for us
                gate.touch()
        assert await client.status(job_id) == "Succeeded"

    assert lines(items) == ["waiting", "through", "last"]
    assert items[-1] == JobEnded(status="Succeeded", reason=None)
    assert [i for i in items if isinstance(i, JobEnded)] == [items[-1]]


async def test_the_blocking_follow_and_wait_end_at_the_end_too(api: Api) -> None:
    async with AsyncHades(api.url, api.key) as client:
        job_id = await client.submit(job("echo a; exit 3"))

    def follow_then_wait() -> tuple[list[Log | JobEnded], str]:
        with sync(api) as blocking:
            stream: Iterator[Log | JobEnded] = blocking.follow(job_id)
            items = list(stream)
            return items, blocking.wait(job_id, timeout=30)

    items, status = await asyncio.to_thread(follow_then_wait)
    assert lines(items) == ["a"]
    end = items[-1]
    assert isinstance(end, JobEnded) and end.status == status == "Failed" and end.reason


async def test_wait_times_out_while_the_job_runs_then_returns_its_end(api: Api) -> None:
    gate = api.gates / uuid.uuid4().hex
    async with AsyncHades(api.url, api.key) as client:
        job_id = await client.submit(job(gated(gate)))
        with pytest.raises(TimeoutError):
            await client.wait(job_id, timeout=0.3)
        with sync(api) as blocking, pytest.raises(TimeoutError):
            await asyncio.to_thread(blocking.wait, job_id, 0.3)
        assert await client.status(job_id) in ("Queued", "Running")
        gate.touch()
        assert await client.wait(job_id, timeout=30) == "Succeeded"


def frame(job_id: str, seq: int | str, message: str) -> bytes:
    """One ``log`` event as the server frames it."""
    line = {"timestamp": "2024-01-01T00:00:00Z", "message": message, "output_stream": "stdout"}
    log = {"job_id": job_id, "container_id": "c1", "logs": [line]}
    return f"event: log\r\ndata: {json.dumps(log)}\r\nid: {seq}\r\n\r\n".encode()


class BrokenStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A stream that carries one frame, then the connection resets."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    def __iter__(self) -> Iterator[bytes]:
        yield self.first
        raise httpx.ReadError("connection reset")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        raise httpx.ReadError("connection reset")


@pytest.mark.parametrize("blocking", [True, False], ids=["Hades", "AsyncHades"])
@pytest.mark.parametrize(("first", "then"), [("5", "7"), ("build:5", "test:3")], ids=["job", "pipeline"])
async def test_a_broken_stream_is_resumed_and_each_batch_handed_on_once(blocking: bool, first: str, then: str) -> None:
    """A server that sends the backlog again on a reconnect: the client sends Last-Event-ID and drops what it saw.
    A pipeline's ids name the stage and the position in its log: a later stage's lower position is not "seen"."""
    job_id = str(uuid.uuid4())
    asked: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("last-event-id"))
        if len(asked) == 1:
            return httpx.Response(200, stream=BrokenStream(frame(job_id, first, "one")))
        end = b'event: end\r\ndata: {"status": "Succeeded", "reason": null}\r\n\r\n'
        again = frame(job_id, first, "one") + b": keepalive\r\n\r\n" + frame(job_id, then, "two") + end
        return httpx.Response(200, content=again)

    transport = httpx.MockTransport(answer)
    if blocking:
        with Hades("http://hades.test", "", transport=transport) as client:
            items = list(client.follow(job_id))
    else:
        async with AsyncHades("http://hades.test", "", transport=transport) as aclient:
            items = [item async for item in aclient.follow(job_id)]

    assert asked == [None, first]
    assert lines(items) == ["one", "two"]
    assert items[-1] == JobEnded(status="Succeeded", reason=None)


# -- cancel and deliveries -------------------------------------------------------------------------------------------


async def test_cancel_stops_a_running_job_and_a_second_cancel_is_refused(api: Api) -> None:
    gate = api.gates / uuid.uuid4().hex
    async with AsyncHades(api.url, api.key) as client:
        job_id = await client.submit(job(gated(gate)))
        async with contextlib.aclosing(client.follow(job_id)) as stream:
            first = await anext(stream)  # it runs
        accepted = await client.cancel(job_id, reason="enough")
        assert accepted["job_id"] == job_id and accepted["cancel_requested"] is True
        assert await client.wait(job_id, timeout=30) == "Stopped"
        requested = [e.event for e in await client.events(job_id) if isinstance(e.event, JobCancelRequested)]
        with sync(api) as blocking, pytest.raises(HadesClientError) as again:
            await asyncio.to_thread(blocking.cancel, job_id)

    assert isinstance(first, Log)
    assert [r.reason for r in requested] == ["enough"]
    assert again.value.status == 409
    assert again.value.message == f"job {job_id} has ended already (Stopped)"


async def test_deliveries_and_a_redelivery_of_the_status_webhook(api: Api) -> None:
    async with receiving(200) as hooks, AsyncHades(api.url, api.key) as client:
        job_id = await client.submit(job("true", status_callback_url=f"{hooks.url}/hook"))
        await client.wait(job_id, timeout=30)
        with sync(api) as blocking:
            redelivered = await asyncio.to_thread(blocking.redeliver, job_id)
        deliveries = await client.deliveries(job_id)

    assert redelivered["job_id"] == job_id and redelivered["kind"] == "webhook" and redelivered["ok"] is True
    assert redelivered["redelivered_by"] == "hades"
    webhook = [row for row in deliveries["deliveries"] if row["kind"] == "webhook"]
    assert webhook[-1]["delivery_attempt"] == redelivered["delivery_attempt"] >= 1
    assert webhook[-1]["redelivered_by"] == "hades"


# -- errors --------------------------------------------------------------------------------------------------------


async def test_an_unknown_job_is_404_with_the_servers_message(api: Api) -> None:
    unknown = str(uuid.uuid4())
    async with AsyncHades(api.url, api.key) as client:
        for call in (client.status, client.job, client.events, client.deliveries, client.timing):
            with pytest.raises(HadesClientError) as refused:
                await call(unknown)
            assert (refused.value.status, refused.value.message) == (404, f"job not found: {unknown}")
        with pytest.raises(HadesClientError) as streamed:
            await client.wait(unknown, timeout=10)
    assert (streamed.value.status, streamed.value.message) == (404, f"job not found: {unknown}")


async def test_a_bad_job_is_400_with_the_go_apis_text(api: Api) -> None:
    with sync(api) as client, pytest.raises(HadesClientError) as refused:
        await asyncio.to_thread(client.submit, {"steps": []})
    assert refused.value.status == 400
    assert refused.value.message == 'Invalid request payload: "name" is required'


async def test_no_key_is_401_and_no_server_is_unreachable(api: Api) -> None:
    async with AsyncHades(api.url, auth_key="") as client:
        with pytest.raises(HadesClientError) as refused:
            await client.submit(job("true"))
    assert (refused.value.status, refused.value.message) == (401, "Unauthorized")

    async with AsyncHades(f"http://127.0.0.1:{free_port()}", api.key) as nowhere:
        with pytest.raises(HadesUnreachable) as unreachable:
            await nowhere.status(str(uuid.uuid4()))
    assert unreachable.value.status is None and "cannot reach" in unreachable.value.message


def test_the_url_and_key_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "Queued"})

    monkeypatch.setenv("HADES_API_URL", "http://from-env.test:9000")
    monkeypatch.setenv("AUTH_KEY", "env-key")
    with Hades(transport=httpx.MockTransport(answer)) as client:
        assert client.status("a/../b") == "Queued"

    assert str(seen[0].url) == "http://from-env.test:9000/jobs/a%2F..%2Fb/status"  # an id never leaves its path
    assert seen[0].headers["authorization"] == httpx.BasicAuth("hades", "env-key")._auth_header


# -- pipelines -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("blocking", [True, False])
async def test_add_stages_sends_the_pipeline_token_from_the_stage_environment(
    blocking: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HADES_PIPELINE_TOKEN", "tok")
    monkeypatch.setenv("HADES_STAGE", "plan")
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.headers["authorization"] != "Bearer tok":
            return httpx.Response(401, json={"error": "a pipeline token is required"})
        return httpx.Response(202, json={"job_id": "p", "stages": ["extra"], "status": "Running"})

    stages = [{"name": "extra", "steps": [{"id": 1, "script": "true"}]}]
    transport = httpx.MockTransport(answer)
    if blocking:
        with Hades("http://hades.test", "", transport=transport) as client:
            answered = client.add_stages("p", stages)
            with pytest.raises(HadesClientError) as refused:
                client.add_stages("p", stages, token="wrong")
    else:
        async with AsyncHades("http://hades.test", "", transport=transport) as aclient:
            answered = await aclient.add_stages("p", stages)
            with pytest.raises(HadesClientError) as refused:
                await aclient.add_stages("p", stages, token="wrong")
    assert answered["stages"] == ["extra"] and refused.value.status == 401
    assert seen[0].url.path == "/jobs/p/stages" and json.loads(seen[0].content) == {"stages": stages, "stage": "plan"}
