"""Pipelines end to end on the process executor: real nats-server, every role in this process, over HTTP."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.pipeline_tokens import pipeline_token, token_key
from hades.core.events import StageLaunched
from hades.core.stages import stage_job_id
from hades.runtime import Roles
from tests.conftest import RunningHades, StartHades, eventually
from tests.support.receiver import receiving


def stage(name: str, script: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "steps": [{"id": 1, "name": "s", "image": "ignored", "script": script}], **fields}


async def process_hades(
    start_hades: StartHades, tmp_path: Path, roles: Roles | None = None, **env: Any
) -> RunningHades:
    return await start_hades(roles, HADES_EXECUTOR="process", HADES_PROCESS_WORKSPACES=str(tmp_path / "ws"), **env)


async def detail(api: RunningHades, job_id: str) -> dict[str, Any]:
    answer: dict[str, Any] = (await api.client.get(f"/jobs/{job_id}")).json()
    return answer


async def stages_of(api: RunningHades, job_id: str) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in (await detail(api, job_id))["stages"]}


async def test_sequential_stages_pass_an_artifact_on_and_a_later_job_reads_it(
    start_hades: StartHades, tmp_path: Path
) -> None:
    async with receiving(200) as receiver:
        api = await process_hades(start_hades, tmp_path)
        pipeline = {
            "name": "ship",
            "status_callback_url": f"{receiver.url}/status",
            "callback_url": f"{receiver.url}/logs",
            "stages": [
                stage("build", "mkdir -p dist && printf app-1 > dist/app && echo built", artifacts=["dist"]),
                stage("test", 'test "$(cat dist/app)" = app-1 && echo tested', inputs=["build:dist"]),
            ],
        }
        pid = await api.submit(pipeline)
        ended = await api.wait_terminal(pid)
        assert ended["status"] == "Succeeded", ended
        rows = {row["name"]: row for row in ended["stages"]}
        assert [row["status"] for row in ended["stages"]] == ["Succeeded", "Succeeded"]
        assert rows["test"]["needs"] == ["build"] and rows["build"]["needs"] == []
        assert rows["build"]["job_id"] == stage_job_id(pid, "build")
        assert rows["build"]["launched_at"] <= rows["test"]["launched_at"]
        assert ended["steps"] == [] and ended["started_at"] is not None

        build = await detail(api, rows["build"]["job_id"])
        assert build["pipeline"] == {"id": pid, "stage": "build"} and build["name"] == "ship/build"
        assert "stages" not in build and "pipeline" not in ended

        logs = (await api.client.get(f"/jobs/{pid}/logs")).json()["logs"]
        assert [entry["stage"] for entry in logs] == ["build", "test"]
        assert [line["message"] for line in logs[0]["logs"]] == ["built"]
        assert [line["message"] for line in logs[1]["logs"]] == ["tested"]
        follow = await api.client.get(f"/jobs/{pid}/logs", params={"follow": "true"})
        frames = [  # each event's own lines, its id (``<stage>:<position>``) aside
            "\r\n".join(line for line in f.splitlines() if not line.startswith("id: "))
            for f in follow.text.split("\r\n\r\n")
            if f.strip()
        ]
        kinds = [f.splitlines()[0] for f in frames]
        assert set(kinds[:-1]) == {"event: log"} and kinds[-1] == "event: end"
        data = [json.loads(f.splitlines()[1].removeprefix("data: ")) for f in frames]
        stages_seen = [d["stage"] for d in data[:-1]]
        assert stages_seen == sorted(stages_seen) and set(stages_seen) == {"build", "test"}  # build's first
        lines = [line["message"] for d in data[:-1] for line in d["logs"] or ()]
        assert lines == ["built", "tested"] and data[-1] == {"status": "Succeeded", "reason": None}

        async def listed() -> list[dict[str, Any]]:
            rows: list[dict[str, Any]] = (await api.client.get(f"/jobs/{pid}/artifacts")).json()["artifacts"]
            return rows

        kept = await eventually(listed, timeout=20)
        assert [row["path"] for row in kept] == ["build/dist/app"]
        download = await api.client.get(f"/jobs/{pid}/artifacts/build/dist/app")
        assert download.status_code == 200 and download.content == b"app-1"
        assert (await api.client.get(f"/jobs/{pid}/artifacts/test/nothing")).status_code == 404

        later = {
            "name": "later",
            "steps": [
                {"id": 1, "image": "-", "script": 'test "$(cat build/dist/app)" = app-1 && test "$(cat x/app)" = app-1'}
            ],
            "inputs": [f"{pid}:build/dist", {"source": f"{stage_job_id(pid, 'build')}:dist", "destination": "x"}],
        }
        reader = await api.submit(later)
        read = await api.wait_terminal(reader)
        assert read["status"] == "Succeeded", read["reason"]

        async def delivered() -> list[Any]:
            return receiver.for_path("/status")

        await eventually(delivered, timeout=20)
        events = (await api.client.get(f"/jobs/{pid}/events")).json()["events"]
        assert [e["type"] for e in events if e["type"].startswith("stage")] == [
            "stage_launched",
            "stage_ended",
            "stage_launched",
            "stage_ended",
        ]
        assert any(e["type"] == "webhook_delivered" for e in events)
        assert len(receiver.for_path("/status")) == 1  # the pipeline's, once; its stages send none of their own
        assert receiver.for_path("/status")[0].json()["job_id"] == pid  # type: ignore[index]

        async def forwarded() -> list[Any]:
            return receiver.for_path("/logs")

        (logs_post,) = await eventually(forwarded, timeout=20)
        assert [(entry["stage"], entry["logs"][0]["message"]) for entry in logs_post.json()] == [
            ("build", "built"),
            ("test", "tested"),
        ]


async def test_a_dag_joins_and_a_failure_skips_only_its_dependents(start_hades: StartHades, tmp_path: Path) -> None:
    api = await process_hades(start_hades, tmp_path)
    dag = {
        "name": "dag",
        "stages": [
            stage("a", "printf a > a.txt", artifacts=["a.txt"], needs=[]),
            stage("b", "printf b > b.txt", artifacts=["b.txt"], needs=[]),
            stage("join", 'test "$(cat a.txt)$(cat b.txt)" = ab', needs=["a", "b"], inputs=["a:a.txt", "b:b.txt"]),
        ],
    }
    pid = await api.submit(dag)
    live = await api.client.get(f"/jobs/{pid}/logs", params={"follow": "true"}, timeout=60)  # from its start
    assert live.text.rstrip().splitlines()[-2:] == ["event: end", 'data: {"status": "Succeeded", "reason": null}']
    ended = await api.wait_terminal(pid)
    assert ended["status"] == "Succeeded", ended
    rows = {row["name"]: row for row in ended["stages"]}
    assert max(rows["a"]["launched_at"], rows["b"]["launched_at"]) <= rows["join"]["launched_at"]
    assert max(rows["a"]["ended_at"], rows["b"]["ended_at"]) <= rows["join"]["launched_at"]

    failing = {
        "name": "fails",
        "stages": [
            stage("lint", "exit 3", needs=[]),
            stage("unit", "true", needs=[]),
            stage("package", "true", needs=["lint"]),
            stage("report", "true", needs=["unit"]),
        ],
    }
    pid = await api.submit(failing)
    ended = await api.wait_terminal(pid)
    assert ended["status"] == "Failed"
    assert ended["reason"] == "stage lint failed: container exited with status 3; skipped: package"
    statuses = {row["name"]: row["status"] for row in ended["stages"]}
    assert statuses == {"lint": "Failed", "unit": "Succeeded", "package": "Skipped", "report": "Succeeded"}
    assert {row["name"]: row["reason"] for row in ended["stages"]}["package"] == "stage lint failed"


async def test_a_stage_adds_a_stage_with_its_token_and_a_wrong_token_is_refused(
    start_hades: StartHades, tmp_path: Path, nc: Client, event_store: NatsEventStore
) -> None:
    api = await process_hades(start_hades, tmp_path, HADES_API_URL="")
    addition = {"stages": [stage("extra", 'echo "extra ran in $HADES_STAGE"', needs=[])]}
    spec = tmp_path / "extra.json"
    spec.write_text(json.dumps(addition))
    cli = Path(sys.executable).parent / "hades"
    add = f"{shlex.quote(str(cli))} stages add {spec}"
    plan = stage("plan", f'test -n "$HADES_PIPELINE_TOKEN" && test "$HADES_STAGE" = plan && {add}')
    pid = await api.submit({"name": "overwatch", "stages": [plan, stage("after", "true")]})
    ended = await api.wait_terminal(pid)
    assert ended["status"] == "Succeeded", ended
    rows = {row["name"]: row for row in ended["stages"]}
    assert list(rows) == ["plan", "after", "extra"] and rows["extra"]["status"] == "Succeeded"
    logs = (await api.client.get(f"/jobs/{pid}/logs")).json()["logs"]
    assert any(line["message"] == "extra ran in extra" for entry in logs for line in entry["logs"] or ())
    events = (await api.client.get(f"/jobs/{pid}/events")).json()["events"]
    added = [e for e in events if e["type"] == "stages_added"]
    assert len(added) == 1 and added[0]["by"] == "stage:plan"
    token = pipeline_token(await token_key(nc), pid)
    for job_id in (pid, *(row["job_id"] for row in rows.values())):  # the token is in no event, nor any stage's spec
        assert all(token not in r.event.model_dump_json() for r in await event_store.history(job_id))

    body = {"stages": [stage("late", "true")]}
    url = f"/jobs/{pid}/stages"
    assert (await api.client.post(url, json=body)).status_code == 401
    wrong = await api.client.post(url, json=body, headers={"Authorization": "Bearer " + "0" * 64})
    assert wrong.status_code == 401 and "pipeline token" in wrong.json()["error"]
    key = await token_key(nc)
    ended_refused = await api.client.post(url, json=body, headers=bearer(key, pid))
    assert ended_refused.status_code == 409 and "has ended already" in ended_refused.json()["error"]


def bearer(key: bytes, pipeline_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {pipeline_token(key, pipeline_id)}"}


async def test_adding_stages_is_checked(start_hades: StartHades, tmp_path: Path, nc: Client) -> None:
    api = await process_hades(start_hades, tmp_path, MAX_PIPELINE_STAGES="3")
    pid = await api.submit({"name": "waits", "stages": [stage("first", "sleep 30"), stage("second", "true")]})
    key = await token_key(nc)
    url, auth = f"/jobs/{pid}/stages", bearer(key, pid)

    async def refused(body: Any, status: int = 400) -> str:
        answer = await api.client.post(url, json=body, headers=auth)
        assert answer.status_code == status, answer.text
        return str(answer.json()["error"])

    assert (
        await refused({"stages": [stage("first", "true")]}) == "Invalid stages[0].name: stage 'first' is declared twice"
    )
    assert await refused({"stages": [stage("x", "true", needs=["nope"])]}) == (
        "Invalid stages[0].needs: 'nope' is not a stage declared before 'x'"
    )
    assert await refused({"stages": [{"name": "x"}]}) == "Invalid stages[0].steps: stage 'x' has no steps"
    assert await refused({"stages": []}) == "Invalid stages: name at least one stage to add"
    assert await refused({"stages": [stage("x", "true"), stage("y", "true")]}) == (
        "Invalid stages: a pipeline has at most 3 stages (MAX_PIPELINE_STAGES), not 4"
    )
    assert await refused({"stages": [stage("x", "true", inputs=["second:a"], needs=["first"])]}) == (
        "Invalid stages[0].inputs[0]: 'second:a' reads stage 'second', which stage 'x' does not need"
    )
    other = await api.submit({"name": "plain", "steps": [{"id": 1, "image": "-", "script": "true"}]})
    assert (
        await api.client.post(f"/jobs/{other}/stages", json={"stages": []}, headers=bearer(key, other))
    ).status_code == 400
    not_pipeline = await api.client.post(
        f"/jobs/{other}/stages", json={"stages": [stage("x", "true")]}, headers=bearer(key, other)
    )
    assert not_pipeline.status_code == 409 and not_pipeline.json()["error"] == f"job {other} is not a pipeline"
    unknown = "00000000-0000-4000-8000-00000000abcd"
    missing = await api.client.post(
        f"/jobs/{unknown}/stages", json={"stages": [stage("x", "true")]}, headers=bearer(key, unknown)
    )
    assert missing.status_code == 404

    accepted = await api.client.post(
        url, json={"stages": [stage("third", "true", needs=["first"])], "stage": "first"}, headers=auth
    )
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["stages"] == ["third"]
    assert (await api.client.post(f"/jobs/{pid}/cancel")).status_code == 202
    assert await refused({"stages": [stage("fourth", "true")]}, 409) in (
        f"pipeline {pid} is being cancelled",
        f"pipeline {pid} has ended already (Stopped)",
    )
    ended = await api.wait_terminal(pid)
    assert ended["status"] == "Stopped"


async def test_cancel_of_a_pipeline_stops_its_running_stage_and_skips_the_rest(
    start_hades: StartHades, tmp_path: Path
) -> None:
    api = await process_hades(start_hades, tmp_path)
    pid = await api.submit(
        {"name": "long", "stages": [stage("sleep", "echo sleeping; sleep 60"), stage("never", "true")]}
    )

    async def sleeping() -> bool:
        rows = await stages_of(api, pid)
        return rows["sleep"]["status"] == "Running"

    await eventually(sleeping, timeout=20)
    cancelled = await api.client.post(f"/jobs/{pid}/cancel", json={"reason": "enough"})
    assert cancelled.status_code == 202
    ended = await api.wait_terminal(pid, timeout=30)
    assert ended["status"] == "Stopped" and ended["reason"] == "cancelled by api: enough"
    statuses = {row["name"]: row["status"] for row in ended["stages"]}
    assert statuses == {"sleep": "Stopped", "never": "Skipped"}
    sleeper = await detail(api, stage_job_id(pid, "sleep"))
    assert sleeper["status"] == "Stopped" and sleeper["cancel_requested_by"] == "api"
    assert (await api.client.get(f"/jobs/{stage_job_id(pid, 'never')}")).status_code == 404
    assert (await api.client.post(f"/jobs/{pid}/cancel")).status_code == 409


async def test_a_pipeline_cancelled_before_its_first_stage_stops_at_once(
    start_hades: StartHades, tmp_path: Path
) -> None:
    api = await process_hades(start_hades, tmp_path, Roles(api=True))  # no scheduler: nothing launches its stages
    pid = await api.submit({"name": "queued", "stages": [stage("a", "true")]})
    assert (await detail(api, pid))["status"] == "Queued"
    cancelled = await api.client.post(f"/jobs/{pid}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "Stopped"
    ended = await detail(api, pid)
    assert ended["reason"] == "cancelled by api" and ended["stages"][0]["status"] == "Skipped"
    assert (await api.client.get(f"/jobs/{stage_job_id(pid, 'a')}")).status_code == 404


async def test_cancelling_a_stage_job_directly_skips_its_dependents(start_hades: StartHades, tmp_path: Path) -> None:
    api = await process_hades(start_hades, tmp_path)
    pid = await api.submit({"name": "direct", "stages": [stage("slow", "sleep 60"), stage("next", "true")]})
    slow = stage_job_id(pid, "slow")

    async def running() -> bool:
        return (await detail(api, slow)).get("status") == "Running"

    await eventually(running, timeout=20)
    assert (await api.client.post(f"/jobs/{slow}/cancel")).status_code == 202
    ended = await api.wait_terminal(pid, timeout=30)
    assert ended["status"] == "Stopped"
    assert ended["reason"] == "stage slow was stopped: cancelled by api; skipped: next"
    assert {row["name"]: row["status"] for row in ended["stages"]} == {"slow": "Stopped", "next": "Skipped"}


async def test_a_launch_its_scheduler_left_half_done_is_completed(
    start_hades: StartHades, tmp_path: Path, event_store: NatsEventStore
) -> None:
    api = await process_hades(start_hades, tmp_path, Roles(api=True))
    pid = await api.submit({"name": "half", "stages": [stage("only", "echo repaired")]})
    store = event_store
    history = await store.history(pid)
    launched = StageLaunched(job_id=pid, at=history[-1].event.at, stage="only", stage_job_id=stage_job_id(pid, "only"))
    await store.append(pid, [launched], history[-1].seq)  # as a scheduler that stopped before submitting the stage
    assert (await api.client.get(f"/jobs/{stage_job_id(pid, 'only')}")).status_code == 404

    await process_hades(start_hades, tmp_path, Roles(scheduler=True, executor=True), HADES_WATCHDOG_SECONDS="0.2")
    ended = await api.wait_terminal(pid)
    assert ended["status"] == "Succeeded", ended
    logs = (await api.client.get(f"/jobs/{pid}/logs")).json()["logs"]
    assert [line["message"] for line in logs[0]["logs"]] == ["repaired"]
