"""Read models over a real stream: replaying the log from scratch gives exactly what live following gave, two API
replicas answer alike, ``?at=`` shows the past, and ``hades replay --until`` rebuilds the world as it was."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hades.adapters.nats.event_store import NatsEventStore
from hades.clock import SystemClock
from hades.core.errors import InvalidTransition
from hades.core.lifecycle import (
    Command,
    FailJob,
    FinishStep,
    MarkPrepared,
    QueueJob,
    RequestCancel,
    RequeueJob,
    StartAttempt,
    StartStep,
    SubmitJob,
)
from hades.core.spec import JobSpec, Step
from hades.projections.runner import ProjectionRunner
from hades.projections.views import ReadModels
from hades.replay import replay
from hades.runtime import Roles
from hades.workers.jobs import JobHandle
from tests.conftest import StartHades

SPEC = JobSpec(name="synthetic", steps=(Step(id=1, image="a"), Step(id=2, image="b", continue_on_error=True)))


def executor_script(attempt: int, exit_codes: list[int]) -> list[Command]:
    commands: list[Command] = [StartAttempt(attempt, "exec-x"), MarkPrepared(attempt, {"volume": 0.01})]
    for index, code in enumerate(exit_codes):
        commands += [StartStep(attempt, index), FinishStep(attempt, index, code, phases={"run": 0.5})]
    return commands


async def play(store: NatsEventStore, script: list[Command]) -> str:
    """A job driven through the lifecycle by a script of commands; commands that no longer apply are skipped."""
    job_id = str(uuid.uuid4())
    clock = SystemClock()
    await store.append(job_id, [*_decide_submit(job_id, clock)], 0)
    job = await JobHandle.load(store, clock, job_id)
    for command in script:
        try:
            await job.run(job_id, command)
        except InvalidTransition:
            continue
    return job_id


def _decide_submit(job_id: str, clock: SystemClock) -> list[Any]:
    from hades.core.lifecycle import decide

    return decide(None, SubmitJob(job_id=job_id, spec=SPEC), clock.now())


scripts = st.lists(
    st.one_of(
        st.just([QueueJob()]),
        st.lists(st.sampled_from([0, 1, 3]), min_size=0, max_size=2).map(lambda codes: executor_script(1, codes)),
        st.just([RequeueJob(1, "executor lost")]),
        st.just([QueueJob()]).map(lambda c: c + executor_script(2, [0, 0])),
        st.just([RequestCancel(by="alice")]),
        st.just([FailJob(1, "boom")]),
    ),
    min_size=1,
    max_size=5,
).map(lambda parts: [command for part in parts for command in part])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(scripts, min_size=1, max_size=3))
async def test_replaying_the_stream_equals_following_it_live(event_store: NatsEventStore, jobs: list[Any]) -> None:
    live = ReadModels()
    runner = ProjectionRunner(event_store.replay_batches, live.apply)
    follow = asyncio.create_task(runner.run())
    try:
        ids = [await play(event_store, script) for script in jobs]
        last = await event_store.stream_last_seq()
        assert await runner.wait_for(last, timeout=20)
        rebuilt = (await replay(event_store, last)).views
    finally:
        follow.cancel()
        await asyncio.gather(follow, return_exceptions=True)
    for job_id in ids:
        assert rebuilt.jobs.get(job_id) == live.jobs.get(job_id)
        assert rebuilt.timing.get(job_id) == live.timing.get(job_id)
    now = datetime.now(UTC)
    assert rebuilt.metrics.snapshot(now) == live.metrics.snapshot(now)


async def test_two_api_replicas_answer_alike(event_store: NatsEventStore, start_hades: StartHades) -> None:
    ids = [await play(event_store, [QueueJob(), *executor_script(1, codes)]) for codes in ([0, 0], [3], [])]
    ids.append(await play(event_store, [QueueJob(), RequestCancel(by="bob")]))
    first, second = await start_hades(Roles(api=True)), await start_hades(Roles(api=True))
    routes = ["/jobs"] + [f"/jobs/{j}{suffix}" for j in ids for suffix in ("", "/status", "/events", "/logs")]
    for route in routes:
        a, b = await first.client.get(route), await second.client.get(route)
        assert (a.status_code, a.json()) == (b.status_code, b.json()), route


async def test_a_job_as_it_was_at_a_moment(event_store: NatsEventStore, start_hades: StartHades) -> None:
    api = await start_hades(Roles(api=True))
    job_id = await play(event_store, [QueueJob(), *executor_script(1, [0, 0])])
    events = (await api.client.get(f"/jobs/{job_id}/events")).json()["events"]
    started = next(e for e in events if e["type"] == "started")

    then = (await api.client.get(f"/jobs/{job_id}", params={"at": started["at"]})).json()
    before = await api.client.get(f"/jobs/{job_id}", params={"at": events[1]["at"]})
    earlier = await api.client.get(f"/jobs/{job_id}", params={"at": "2000-01-01T00:00:00Z"})
    invalid = await api.client.get(f"/jobs/{job_id}", params={"at": "yesterday"})

    assert (then["status"], then["attempt"], [s["status"] for s in then["steps"]]) == ("Running", 1, ["Pending"] * 2)
    assert before.json()["status"] == "Queued"
    assert (await api.client.get(f"/jobs/{job_id}")).json()["status"] == "Succeeded"
    assert earlier.status_code == 404
    assert invalid.status_code == 400 and "yesterday" in invalid.text


async def test_hades_replay_until_rebuilds_the_past(event_store: NatsEventStore, nats_url: str) -> None:
    job_id = await play(event_store, [QueueJob()])
    queued_seq = await event_store.stream_last_seq()
    await play(event_store, [QueueJob(), *executor_script(1, [0, 0])])
    environment = {**os.environ, "NATS_URL": nats_url}

    def run(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "hades.cli", "replay", "--json", *args],
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    now = run()
    past = run("--until", str(queued_seq))
    future = run("--until", (datetime.now(UTC) + timedelta(days=1)).isoformat())

    assert past["last_seq"] == queued_seq and past["events"] == queued_seq
    assert now["jobs"] == past["jobs"] + 1 == future["jobs"]
    assert now["events_per_second"] > 0
    assert job_id  # its job is in both worlds; the later one only in the present


async def test_an_api_resumes_from_a_snapshot_and_agrees_with_a_full_replay(
    event_store: NatsEventStore, start_hades: StartHades, nc: Any
) -> None:
    from hades.adapters.nats.snapshots import SnapshotStore
    from hades.projections.snapshot import restore
    from tests.conftest import eventually

    ids = [await play(event_store, [QueueJob(), *executor_script(1, [0, 3])]) for _ in range(3)]
    writer = await start_hades(Roles(api=True), HADES_SNAPSHOT_SECONDS="0.2")
    last = await event_store.stream_last_seq()

    async def snapshot_at_least(seq: int) -> bool:
        data = await SnapshotStore(nc).load()
        views = restore(data) if data else None
        return views is not None and views.jobs.last_seq >= seq

    await eventually(lambda: snapshot_at_least(last))
    await writer.stop()
    ids.append(await play(event_store, [QueueJob(), RequestCancel(by="later")]))  # after the snapshot

    resumed = await start_hades(Roles(api=True))
    replayed = await start_hades(Roles(api=True), HADES_SNAPSHOT_SECONDS="0")
    for job_id in ids:
        for route in (f"/jobs/{job_id}", f"/jobs/{job_id}/status"):
            a, b = await resumed.client.get(route), await replayed.client.get(route)
            assert (a.status_code, a.json()) == (b.status_code, b.json()), route
