"""Executor pools end to end: real nats-server, the API and scheduler in this process, executors as processes
(HADES_EXECUTOR=process) with different labels."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from hades.runtime import Roles
from tests.conftest import RunningHades, SpawnRole, StartHades, eventually

FAST_SCHEDULER = {"HADES_WATCHDOG_SECONDS": "0.2"}


def marking(name: str, markers: Path, constraints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A job whose one step writes its workspace's path (which names the executor's root) to a marker file."""
    step = {"id": 1, "name": "mark", "image": "ignored", "script": f'echo "$PWD" > {markers / name}'}
    return {"name": name, "steps": [step], **({"constraints": constraints} if constraints else {})}


def executor(spawn_role: SpawnRole, root: Path, labels: str) -> tuple[str, Path]:
    workspaces = root / uuid.uuid4().hex[:8]
    role = spawn_role(
        "executor", HADES_EXECUTOR="process", HADES_PROCESS_WORKSPACES=str(workspaces), HADES_EXECUTOR_LABELS=labels
    )
    return role.executor_id, workspaces


async def detail(api: RunningHades, job_id: str) -> dict[str, Any]:
    answer: dict[str, Any] = (await api.client.get(f"/jobs/{job_id}")).json()
    return answer


async def test_constrained_jobs_run_only_on_matching_executors_and_wait_for_one(
    start_hades: StartHades, spawn_role: SpawnRole, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:6]  # labels of this run only: executors of earlier tests may still be heartbeating
    a, b = f"a{run}", f"b{run}"
    api = await start_hades(Roles(api=True, scheduler=True), **FAST_SCHEDULER)
    bad = await api.client.post("/build", json=marking("bad", tmp_path, [{"attribute": "os", "operator": "~"}]))
    assert bad.status_code == 400 and bad.text.startswith("Invalid constraints[0]: unknown operator '~'")

    markers = tmp_path / "markers"
    markers.mkdir()
    on_a, root_a = executor(spawn_role, tmp_path, f"os=linux,pool={a}")
    on_b, root_b = executor(spawn_role, tmp_path, f"os=linux,pool={b}")
    jobs = {
        "to-a": await api.submit(marking("to-a", markers, [{"attribute": "pool", "value": a}])),
        "to-b": await api.submit(marking("to-b", markers, [{"attribute": "${attr.pool}", "value": b}])),
        "anywhere-1": await api.submit(marking("anywhere-1", markers)),
        "anywhere-2": await api.submit(marking("anywhere-2", markers)),
    }
    windows_only = [{"attribute": "os", "value": "windows"}, {"attribute": "pool", "value": f"w{run}"}]
    waiting = await api.submit(marking("windows", markers, windows_only))

    ended = {name: await api.wait_terminal(job_id, timeout=30) for name, job_id in jobs.items()}
    assert {name: d["status"] for name, d in ended.items()} == dict.fromkeys(jobs, "Succeeded")
    for name, executor_id, root, pool in (("to-a", on_a, root_a, a), ("to-b", on_b, root_b, b)):
        (attempt,) = ended[name]["attempts"]
        assert attempt["executor_id"] == executor_id == ended[name]["executor_id"]
        assert attempt["executor_labels"]["pool"] == pool and attempt["executor_labels"]["os"] == "linux"
        assert "arch" in attempt["executor_labels"] and "cpu" in attempt["executor_labels"]  # detected
        assert (markers / name).read_text().startswith(str(root))
    for name in ("anywhere-1", "anywhere-2"):
        assert ended[name]["executor_id"] in (on_a, on_b)
        assert (markers / name).read_text().startswith((str(root_a), str(root_b)))

    reason = f"no executor with os=windows, pool=w{run} is alive"
    queued = await eventually(lambda: _with_reason(api, waiting, reason), timeout=15)
    assert queued["status"] == "Queued" and not (markers / "windows").exists()

    on_windows, root_windows = executor(spawn_role, tmp_path, f"os=windows,pool=w{run}")
    done = await api.wait_terminal(waiting, timeout=30)
    assert done["status"] == "Succeeded" and done["executor_id"] == on_windows and done["reason"] is None
    assert done["attempts"][0]["executor_labels"]["os"] == "windows"
    assert (markers / "windows").read_text().startswith(str(root_windows))
    kinds = [e["type"] for e in (await api.client.get(f"/jobs/{waiting}/events")).json()["events"]]
    assert kinds.index("unschedulable") < kinds.index("started")


async def test_a_job_no_executor_can_take_fails_after_the_unschedulable_timeout(
    start_hades: StartHades, tmp_path: Path
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True), UNSCHEDULABLE_TIMEOUT="1", **FAST_SCHEDULER)
    pool = f"nowhere{uuid.uuid4().hex[:6]}"
    job_id = await api.submit(marking("lost", tmp_path, [{"attribute": "pool", "value": pool}]))

    failed = await api.wait_terminal(job_id, timeout=20)

    assert failed["status"] == "Failed"
    assert failed["reason"] == f"no executor with pool={pool} is alive; gave up after 1 s (UNSCHEDULABLE_TIMEOUT)"
    assert failed["attempts"] == [] and failed["executor_id"] is None


async def _with_reason(api: RunningHades, job_id: str, reason: str) -> dict[str, Any] | None:
    answer = await detail(api, job_id)
    return answer if answer.get("reason") == reason else None


async def test_resources_are_reserved_while_their_attempts_run(
    start_hades: StartHades, spawn_role: SpawnRole, tmp_path: Path
) -> None:
    """An executor advertising 2 cores, with 4 slots, runs two 1-core jobs at once and the third only after one of
    them ended: what running attempts reserved is taken off its capacity."""
    run = uuid.uuid4().hex[:6]
    api = await start_hades(Roles(api=True, scheduler=True), **FAST_SCHEDULER)
    markers, release = tmp_path / "markers", tmp_path / "release"
    markers.mkdir()
    workspaces = tmp_path / "workspaces"
    spawn_role(
        "executor",
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(workspaces),
        HADES_EXECUTOR_LABELS=f"cpu=2,pool=r{run}",
        CONCURRENCY="4",
    )
    script = f'touch {markers}/"$UUID"; while [ ! -f {release} ]; do sleep 0.05; done'
    job = {
        "name": "one-core",
        "constraints": [{"attribute": "pool", "value": f"r{run}"}],
        "resources": {"cpu": 1},
        "steps": [{"id": 1, "image": "ignored", "script": script}],
    }
    ids = [await api.submit(job) for _ in range(3)]

    async def two_running() -> bool:
        return len(list(markers.iterdir())) >= 2

    await eventually(two_running, timeout=30)
    release.touch()
    ended = [await api.wait_terminal(job_id, timeout=30) for job_id in ids]
    assert [d["status"] for d in ended] == ["Succeeded"] * 3

    async def moments(job_id: str, kind: str) -> list[str]:
        events = (await api.client.get(f"/jobs/{job_id}/events")).json()["events"]
        return [e["at"] for e in events if e["type"] == kind]

    starts = {job_id: (await moments(job_id, "started"))[0] for job_id in ids}
    last = max(ids, key=lambda job_id: starts[job_id])
    first_end = min([(await moments(job_id, "succeeded"))[0] for job_id in ids if job_id != last])
    assert starts[last] >= first_end, "the third 1-core job started while two held both cores"
