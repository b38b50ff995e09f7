"""Scheduling that keeps its promises, against real processes, a real nats-server and a real Docker engine:
lost executors, the global cap, priorities, limits, graceful stops, the ack deadline, failures that end jobs."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import httpx
import pytest
from nats.aio.client import Client

from hades.adapters.nats.topology import EVENTS_STREAM
from hades.runtime import Roles
from tests.conftest import RunningHades, SpawnRole, StartHades, eventually
from tests.integration.test_docker_jobs import no_leftovers

pytestmark = pytest.mark.docker

FAST_SCHEDULER = {"HADES_WATCHDOG_SECONDS": "0.2"}


def sleeper(seconds: float, name: str = "sleeper", priority: int = 3) -> dict[str, Any]:
    script = f"echo attempt $UUID; sleep {seconds}"
    return {"name": name, "priority": priority, "steps": [{"id": 1, "image": "alpine:latest", "script": script}]}


async def events(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    return list((await client.get(f"/jobs/{job_id}/events")).json()["events"])


def at(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["at"].replace("Z", "+00:00"))


async def running_on(api: RunningHades, job_id: str, executor_id: str | None = None) -> bool:
    detail = (await api.client.get(f"/jobs/{job_id}")).json()
    return bool(detail["status"] == "Running" and (executor_id is None or detail["executor_id"] == executor_id))


async def test_a_job_on_a_killed_executor_runs_again_elsewhere(
    docker_images: list[str], start_hades: StartHades, spawn_role: SpawnRole
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True), **FAST_SCHEDULER)
    doomed = spawn_role("executor")
    job_id = await api.submit(sleeper(2))
    await eventually(lambda: running_on(api, job_id, doomed.executor_id))

    killed = time.time()
    doomed.kill()
    await start_hades(Roles(executor=True), HADES_SWEEP_SECONDS="0.5")
    detail = await api.wait_terminal(job_id, timeout=60)

    assert detail["status"] == "Succeeded" and detail["attempt"] == 2
    history = await events(api.client, job_id)
    types = [e["type"] for e in history]
    assert types.count("started") == 2 and types.count("succeeded") == 1
    requeued = next(e for e in history if e["type"] == "queued" and e["attempt"] == 2)
    assert requeued["reason"] == (
        f"executor {doomed.executor_id} was lost (its heartbeat expired); attempt 1 handed back"
    )
    restarted = [e for e in history if e["type"] == "started"][1]
    print(f"\nkilled executor -> attempt 2 started: {at(restarted).timestamp() - killed:.1f} s")
    await eventually(lambda: no_leftovers(job_id), timeout=30)  # the survivor sweeps the dead one's container


async def test_a_job_whose_executors_keep_dying_fails_after_max_attempts(
    docker_images: list[str], start_hades: StartHades, spawn_role: SpawnRole
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True), MAX_ATTEMPTS="1", **FAST_SCHEDULER)
    doomed = spawn_role("executor")
    job_id = await api.submit(sleeper(30))
    await eventually(lambda: running_on(api, job_id, doomed.executor_id))

    doomed.kill()
    detail = await api.wait_terminal(job_id, timeout=60)

    assert detail["status"] == "Failed"
    assert detail["reason"] == (
        f"executor {doomed.executor_id} was lost (its heartbeat expired); gave up after 1 attempts"
    )


async def test_strict_priority_when_a_slot_frees(docker_images: list[str], start_hades: StartHades) -> None:
    api = await start_hades(Roles(api=True, scheduler=True))
    jobs = {p: await api.submit(sleeper(0, name=f"p{p}", priority=p)) for p in (1, 2, 3)}  # low first

    async def all_queued() -> bool:
        details = [(await api.client.get(f"/jobs/{j}")).json() for j in jobs.values()]
        return all(d["queued_at"] for d in details)

    await eventually(all_queued)
    await start_hades(Roles(executor=True), CONCURRENCY="1")
    details = {p: await api.wait_terminal(j) for p, j in jobs.items()}

    by_start = sorted(details, key=lambda p: details[p]["started_at"])
    assert by_start == [3, 2, 1]
    assert [details[p]["priority"] for p in by_start] == ["high", "medium", "low"]


async def test_priority_ageing_moves_a_waiting_job_up(start_hades: StartHades) -> None:
    api = await start_hades(Roles(api=True, scheduler=True), PRIORITY_AGING_SECONDS="0.5", **FAST_SCHEDULER)
    job_id = await api.submit(sleeper(0, priority=1))

    async def promoted_to_high() -> bool:
        return bool((await api.client.get(f"/jobs/{job_id}")).json()["priority"] == "high")

    await eventually(promoted_to_high, timeout=20)
    queued = [e for e in await events(api.client, job_id) if e["type"] == "queued"]
    assert [(e["priority"], e["attempt"]) for e in queued] == [("low", 1), ("medium", 1), ("high", 1)]
    assert queued[1]["reason"].startswith("waited ") and queued[1]["reason"].endswith("in the low queue; now medium")
    assert (await api.client.post(f"/jobs/{job_id}/cancel")).json()["status"] == "Stopped"


async def test_max_parallelism_holds_across_executor_processes(
    docker_images: list[str], start_hades: StartHades, spawn_role: SpawnRole
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True))
    # Three processes with one slot each could run three jobs at once; the cap allows two. Two jobs at once
    # are necessarily on two processes, so the lease is what holds the third back.
    for _ in range(3):
        spawn_role("executor", CONCURRENCY="1", MAX_PARALLELISM="2")
    jobs = [await api.submit(sleeper(1.5, name=f"cap{i}")) for i in range(6)]

    details = [await api.wait_terminal(j, timeout=90) for j in jobs]

    assert [d["status"] for d in details] == ["Succeeded"] * 6
    spans = [(at({"at": d["started_at"]}), at({"at": d["finished_at"]})) for d in details]
    overlap = max(sum(1 for s, f in spans if s <= moment < f) for moment, _ in spans)
    assert overlap == 2


async def test_limits_apply_inside_the_container(docker_images: list[str], start_hades: StartHades) -> None:
    hades = await start_hades()
    script = (
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max; "
        "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max; "
        "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 /sys/fs/cgroup/cpu.max; "
        "ls /sys/class/net; env | grep -c hades.tum.de || true"
    )
    step = {"id": 1, "image": "alpine:latest", "script": script, "memory_limit": "64M", "pids_limit": 50}
    job_id = await hades.submit(
        {
            "name": "limits",
            "metadata": {"hades.tum.de/priority": "3"},
            "steps": [{**step, "cpu_limit": 1, "network": "none", "memory_swap": "64M"}],
        }
    )

    assert (await hades.wait_terminal(job_id))["status"] == "Succeeded"
    lines = [line["message"] for line in (await hades.client.get(f"/jobs/{job_id}/logs")).json()["logs"][0]["logs"]]
    assert lines == [str(64 * 1024 * 1024), "50", "100000", "lo", "0"]


async def test_a_sigterm_lets_running_jobs_finish(
    docker_images: list[str], start_hades: StartHades, spawn_role: SpawnRole
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True))
    executor = spawn_role("executor", SHUTDOWN_GRACE_SECONDS="30")
    job_id = await api.submit(sleeper(2))
    await eventually(lambda: running_on(api, job_id, executor.executor_id))

    assert executor.terminate() == 0

    detail = (await api.client.get(f"/jobs/{job_id}")).json()
    assert detail["status"] == "Succeeded" and detail["attempt"] == 1


async def test_what_outlives_the_grace_period_is_handed_back(
    docker_images: list[str], start_hades: StartHades, spawn_role: SpawnRole
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True))
    executor = spawn_role("executor", SHUTDOWN_GRACE_SECONDS="1")
    job_id = await api.submit(sleeper(60))
    await eventually(lambda: running_on(api, job_id, executor.executor_id))

    assert executor.terminate() == 0

    detail = (await api.client.get(f"/jobs/{job_id}")).json()
    assert (detail["status"], detail["attempt"]) == ("Queued", 2)
    assert detail["reason"] == "executor shut down; attempt handed back to the queue"
    await eventually(lambda: no_leftovers(job_id))  # cleanup follows the terminal event
    assert (await api.client.post(f"/jobs/{job_id}/cancel")).json()["status"] == "Stopped"


async def test_a_long_job_is_not_redelivered_while_it_runs(
    docker_images: list[str], start_hades: StartHades, nc: Client
) -> None:
    js = nc.jetstream()
    consumer = "executor-high"
    config = (await js.consumer_info(EVENTS_STREAM, consumer)).config
    original = config.ack_wait
    config.ack_wait = 2
    await js.add_consumer(EVENTS_STREAM, config=config)
    try:
        hades = await start_hades()

        async def idle() -> bool:  # what earlier tests left queued is taken (and dropped or run) first
            info = await js.consumer_info(EVENTS_STREAM, consumer)
            return info.num_pending == 0 and info.num_ack_pending == 0

        await eventually(idle, timeout=60)
        before = (await js.consumer_info(EVENTS_STREAM, consumer)).delivered.consumer_seq
        job_id = await hades.submit(sleeper(7))

        detail = await hades.wait_terminal(job_id)

        assert detail["status"] == "Succeeded" and detail["attempt"] == 1
        assert [e["type"] for e in await events(hades.client, job_id)].count("started") == 1

        async def acked() -> bool:  # the message is acked once the attempt is cleaned up, just after the end
            return (await js.consumer_info(EVENTS_STREAM, consumer)).num_ack_pending == 0

        await eventually(acked, timeout=30)
        after = await js.consumer_info(EVENTS_STREAM, consumer)
        assert after.delivered.consumer_seq - before == 1  # delivered once: never redelivered in 7 s of 2 s deadlines
        assert after.num_redelivered == 0 and after.num_ack_pending == 0
    finally:
        config.ack_wait = original
        await js.add_consumer(EVENTS_STREAM, config=config)


@pytest.mark.parametrize(
    ("image", "policy", "reason"),
    [
        ("Not A Valid Image!", "never", "invalid reference format"),
        ("alpine:latest", "always", "encountered 1 errors while pulling images: failed to pull image alpine:latest: "),
    ],
)
async def test_failures_before_the_first_step_end_the_job(
    docker_images: list[str], start_hades: StartHades, image: str, policy: str, reason: str
) -> None:
    hades = await start_hades(DOCKER_PULL_POLICY=policy)
    job_id = await hades.submit({"name": "doomed", "steps": [{"id": 1, "image": image, "script": "true"}]})

    detail = await hades.wait_terminal(job_id)

    assert detail["status"] == "Failed"
    assert reason in detail["reason"]
    await eventually(lambda: no_leftovers(job_id))  # cleanup follows the terminal event


async def test_no_job_lost_or_run_twice_when_executors_are_killed(
    docker_images: list[str], start_hades: StartHades, spawn_role: SpawnRole
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True), **FAST_SCHEDULER)
    first = spawn_role("executor", CONCURRENCY="2", HADES_SWEEP_SECONDS="1")
    spawn_role("executor", CONCURRENCY="2", HADES_SWEEP_SECONDS="1")
    jobs = [await api.submit(sleeper(1, name=f"crash{i}")) for i in range(10)]
    await eventually(lambda: running_on(api, jobs[0]))
    await asyncio.sleep(0)  # the kill lands while jobs run on both executors

    first.kill()
    spawn_role("executor", CONCURRENCY="2", HADES_SWEEP_SECONDS="1")
    details = [await api.wait_terminal(j, timeout=120) for j in jobs]

    assert [(d["status"], d["reason"]) for d in details] == [("Succeeded", None)] * len(jobs)
    for job_id in jobs:
        types = [e["type"] for e in await events(api.client, job_id)]
        assert sum(t in ("succeeded", "failed", "stopped") for t in types) == 1, types
        assert types[-1] == "succeeded"
    for job_id in jobs:
        await eventually(lambda job_id=job_id: no_leftovers(job_id), timeout=30)
