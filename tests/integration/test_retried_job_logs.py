"""A retried job's logs show the attempt that counts: clients read the Logs positionally (one per step), so every
answer (the Log Manager route, the dashboard's, following live, the forward to ``callback_url``, ``hades logs``)
gives the final attempt's steps only, while ``?attempt=N`` still reaches an earlier one.

The job is driven through the real lifecycle on the session nats-server and its logs written by the executor's own
writer: attempt 1 writes a line and dies mid-step (a SIGKILLed ``hades up``), attempt 2 runs both steps.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import bcrypt
import httpx
import pytest
from nats.aio.client import Client

from hades.adapters.http_delivery import DeliveryResult
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.cli import main
from hades.clock import SystemClock
from hades.core.lifecycle import FinishStep, QueueJob, RequeueJob, StartAttempt, StartStep, SubmitJob, decide
from hades.core.logs import LogBudget
from hades.core.spec import JobSpec, Step
from hades.runtime import Roles
from hades.workers.jobs import JobHandle
from hades.workers.notifier import LogForwarder, NotifierSettings
from tests.conftest import RunningHades, StartHades, eventually

PASSWORD = "pw-for-attempts"
DASHBOARD = {
    "DASHBOARD_USERNAME": "admin",
    "DASHBOARD_PASSWORD_HASH": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode(),
    "DASHBOARD_SESSION_SECRET": "s" * 40,
    "DASHBOARD_COOKIE_INSECURE": "true",
}
FINAL = [["compiling", "tests passed"], ["step2"]]


class Job:
    """One job driven as an executor drives it, writing its steps' logs with the executor's writer."""

    def __init__(self, handle: JobHandle, job_id: str, nc: Client) -> None:
        self.handle, self.job_id, self._logs = handle, job_id, NatsLogStore(nc)

    @classmethod
    async def submitted(cls, store: NatsEventStore, nc: Client) -> Job:
        job_id = str(uuid.uuid4())
        steps = [Step(id=n, name=f"step{n}", image="alpine:3", script="true") for n in (1, 2)]
        spec = JobSpec(name="retried", callback_url="http://127.0.0.1:9/logs", steps=steps)
        clock = SystemClock()
        await store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), clock.now()), 0)
        job = cls(await JobHandle.load(store, clock, job_id), job_id, nc)
        await job.handle.run(job_id, QueueJob())
        return job

    async def start(self, attempt: int) -> None:
        await self.handle.run(self.job_id, StartAttempt(attempt=attempt, executor_id=f"executor-{attempt}"))

    async def step(self, attempt: int, index: int, lines: Sequence[str], finish: bool = True) -> None:
        """Step ``index`` of ``attempt`` writes ``lines``; it ends unless ``finish`` is False (its executor died)."""
        await self.handle.run(self.job_id, StartStep(attempt=attempt, step_index=index))
        writer = self._logs.writer(self.job_id, index + 1, LogBudget(), attempt)
        await writer.open(f"attempt{attempt}-step{index + 1}")
        for line in lines:
            await writer.write("stdout", datetime.now(UTC), line)
        last = await writer.close()
        if finish:
            await self.handle.run(self.job_id, FinishStep(attempt, index, exit_code=0, last_log_seq=last))

    async def lost(self, attempt: int) -> None:
        """The attempt's executor was declared lost: the attempt is handed back as the next one."""
        await self.handle.run(self.job_id, RequeueJob(attempt, "executor lost; attempt handed back"))


async def retried(store: NatsEventStore, nc: Client) -> Job:
    """Attempt 1 wrote ``compiling`` and died; attempt 2 ran both steps and succeeded."""
    job = await Job.submitted(store, nc)
    await job.start(1)
    await job.step(1, 0, ["compiling"], finish=False)
    await job.lost(1)
    await job.start(2)
    await job.step(2, 0, FINAL[0])
    await job.step(2, 1, FINAL[1])
    return job


def messages(logs: list[dict[str, Any]]) -> list[list[str]]:
    return [[line["message"] for line in log["logs"] or []] for log in logs]


async def api(start_hades: StartHades) -> RunningHades:
    hades = await start_hades(Roles(api=True), **DASHBOARD)
    response = await hades.client.post("/api/login", json={"username": "admin", "password": PASSWORD})
    assert response.status_code == 200
    return hades


async def ended(hades: RunningHades, job_id: str) -> None:
    async def seen() -> bool:
        return (await hades.client.get(f"/jobs/{job_id}/status")).json().get("status") == "Succeeded"

    await eventually(seen, timeout=10)


async def sse_data(client: httpx.AsyncClient, path: str) -> list[dict[str, Any]]:
    """Every ``data:`` of a Server-Sent Events stream, decoded, until the server ends it."""
    found = []
    async with client.stream("GET", path, timeout=30) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                found.append(json.loads(line.split(":", 1)[1]))
    return found


async def test_every_answer_gives_the_final_attempts_steps_and_attempt_1_stays_reachable(
    start_hades: StartHades, event_store: NatsEventStore, nc: Client
) -> None:
    hades = await api(start_hades)
    job = await retried(event_store, nc)
    await ended(hades, job.job_id)

    final = await hades.client.get(f"/jobs/{job.job_id}/logs")
    assert messages(final.json()["logs"]) == FINAL
    assert final.headers["x-hades-attempt"] == "2"
    assert set(final.json()["logs"][0]) == {"job_id", "container_id", "logs"}  # the Go wire shape
    first = await hades.client.get(f"/jobs/{job.job_id}/logs?attempt=1")
    assert messages(first.json()["logs"]) == [["compiling"]]
    assert first.headers["x-hades-attempt"] == "1"
    none = await hades.client.get(f"/jobs/{job.job_id}/logs?attempt=3")
    assert (none.status_code, none.json()) == (404, {"error": f"job {job.job_id} has no attempt 3"})

    dashboard = await hades.client.get(f"/api/jobs/{job.job_id}/logs")
    assert messages(dashboard.json()["logs"]) == FINAL

    followed = await sse_data(hades.client, f"/jobs/{job.job_id}/logs?follow=true")
    assert [line["message"] for batch in followed[:-1] for line in batch["logs"] or []] == [*FINAL[0], *FINAL[1]]
    frames = await sse_data(hades.client, f"/api/jobs/{job.job_id}/logs/stream")
    logs = [frame["log"] for frame in frames if frame["type"] == "log"]
    assert [line["message"] for log in logs for line in log["logs"] or []] == [*FINAL[0], *FINAL[1]]


async def test_the_forward_to_callback_url_carries_the_final_attempts_steps(
    event_store: NatsEventStore, nc: Client
) -> None:
    job = await retried(event_store, nc)
    posted: list[bytes] = []

    async def send(url: str, body: bytes) -> DeliveryResult:
        posted.append(body)
        return DeliveryResult(duration_ms=1, status_code=204)

    forwarder = LogForwarder(event_store, SystemClock(), NatsLogStore(nc), send, NotifierSettings())
    assert await forwarder.forward(job.job_id, delivered=1) is None
    [body] = posted
    assert messages(json.loads(body)) == FINAL


async def test_following_a_job_live_moves_on_to_its_retry(
    start_hades: StartHades, event_store: NatsEventStore, nc: Client
) -> None:
    hades = await api(start_hades)
    job = await Job.submitted(event_store, nc)
    await job.start(1)
    await job.step(1, 0, ["compiling"], finish=False)
    lines: asyncio.Queue[str] = asyncio.Queue()

    async def follow() -> None:
        async with hades.client.stream("GET", f"/jobs/{job.job_id}/logs?follow=true", timeout=30) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:") and (batch := json.loads(line.split(":", 1)[1])).get("logs"):
                    for entry in batch["logs"]:
                        await lines.put(entry["message"])

    following = asyncio.create_task(follow())
    try:
        assert await asyncio.wait_for(lines.get(), 10) == "compiling"  # attempt 1, live
        await job.lost(1)
        await job.start(2)
        await job.step(2, 0, FINAL[0])
        await job.step(2, 1, FINAL[1])
        await asyncio.wait_for(following, 20)
    finally:
        following.cancel()
    assert [lines.get_nowait() for _ in range(lines.qsize())] == [*FINAL[0], *FINAL[1]]
    # Following it again, once retried, gives the retry's steps only.
    again = await sse_data(hades.client, f"/jobs/{job.job_id}/logs?follow=true")
    assert [line["message"] for batch in again[:-1] for line in batch["logs"] or []] == [*FINAL[0], *FINAL[1]]


async def test_hades_logs_prints_the_final_attempt_and_exits_2_for_an_unknown_job(
    start_hades: StartHades,
    event_store: NatsEventStore,
    nc: Client,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hades = await api(start_hades)
    job = await retried(event_store, nc)
    await ended(hades, job.job_id)
    monkeypatch.setenv("HADES_API_URL", hades.url)

    assert await asyncio.to_thread(main, ["logs", job.job_id]) == 0
    assert capsys.readouterr().out.split() == ["compiling", "tests", "passed", "step2"]
    assert await asyncio.to_thread(main, ["logs", job.job_id, "--attempt", "1", "--json"]) == 0
    assert messages(json.loads(capsys.readouterr().out)["logs"]) == [["compiling"]]

    unknown = str(uuid.uuid4())
    assert await asyncio.to_thread(main, ["logs", unknown]) == 2
    assert f"job not found: {unknown}" in capsys.readouterr().err
    answer = await hades.client.get(f"/jobs/{unknown}/logs")  # the Go contract's answer, saying what it is
    assert (answer.status_code, answer.json()) == (200, {"logs": []})
    assert answer.headers["x-hades-error"] == f"job not found: {unknown}"
