"""Jobs end to end on a real Docker engine: HTTP in, events in JetStream, containers, logs and status out."""

from __future__ import annotations

import asyncio
from typing import Any

import aiodocker
import pytest

from hades.adapters.docker.containers import LABEL_JOB
from tests.conftest import StartHades, eventually

pytestmark = pytest.mark.docker

SEED_MULTI_STEP: dict[str, Any] = {
    "name": "Multi-Step Example",
    "steps": [
        {
            "id": 1,
            "name": "Step 1",
            "image": "alpine:latest",
            "script": "echo 'Setting up environment...' > /shared/output.txt",
        },
        {
            "id": 2,
            "name": "Step 2",
            "image": "ubuntu:latest",
            "script": "cat /shared/output.txt && echo 'Processing data...' >> /shared/output.txt",
        },
        {
            "id": 3,
            "name": "Step 3",
            "image": "python:3.9-alpine",
            "script": "cat /shared/output.txt && echo 'Finalizing...' >> /shared/output.txt && cat /shared/output.txt",
        },
    ],
}


def messages(log: dict[str, Any]) -> list[str]:
    return [line["message"] for line in (log["logs"] or [])]


async def leftovers(job_id: str) -> tuple[list[Any], list[Any]]:
    async with aiodocker.Docker() as docker:
        containers = await docker.containers.list(all=True, filters={"label": [f"{LABEL_JOB}={job_id}"]})
        volumes = (await docker.volumes.list(filters={"label": f"{LABEL_JOB}={job_id}"}))["Volumes"] or []
    return containers, volumes


async def no_leftovers(job_id: str) -> bool:
    return await leftovers(job_id) == ([], [])


async def test_seed_multi_step_example_succeeds_and_shares_the_workspace(
    docker_images: list[str], start_hades: StartHades
) -> None:
    hades = await start_hades()
    job_id = await hades.submit(SEED_MULTI_STEP)

    detail = await hades.wait_terminal(job_id)

    assert detail["status"] == "Succeeded", detail
    assert [s["status"] for s in detail["steps"]] == ["Succeeded"] * 3
    assert [s["exit_code"] for s in detail["steps"]] == [0, 0, 0]
    assert detail["attempt"] == 1 and detail["priority"] == "high"
    assert detail["queued_at"] <= detail["started_at"] <= detail["finished_at"]
    logs = (await hades.client.get(f"/jobs/{job_id}/logs")).json()["logs"]
    assert len(logs) == 3  # one Log per step, in step order, silent step 1 included
    assert logs[0]["logs"] is None
    assert messages(logs[1]) == ["Setting up environment..."]  # step 2 saw what step 1 wrote
    assert messages(logs[2]) == [
        "Setting up environment...",
        "Processing data...",
        "Setting up environment...",
        "Processing data...",
        "Finalizing...",
    ]
    assert {line["output_stream"] for log in logs for line in (log["logs"] or [])} == {"stdout"}
    assert all(log["job_id"] == job_id and log["container_id"] for log in logs)
    assert (await hades.client.get(f"/jobs/{job_id}/status")).json() == {"status": "Succeeded"}
    assert job_id in (await hades.client.get("/jobs")).json()["jobs"]
    events = (await hades.client.get(f"/jobs/{job_id}/events")).json()["events"]
    assert [e["type"] for e in events] == [
        "submitted",
        "queued",
        "started",
        "step_started",
        "step_finished",
        "step_started",
        "step_finished",
        "step_started",
        "step_finished",
        "succeeded",
    ]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    await eventually(lambda: no_leftovers(job_id))  # cleanup follows the terminal event


async def test_a_failing_step_fails_the_job_and_later_steps_do_not_run(
    docker_images: list[str], start_hades: StartHades
) -> None:
    hades = await start_hades()
    job_id = await hades.submit(
        {
            "name": "fails",
            "steps": [
                {"id": 1, "image": "alpine:latest", "script": "echo to-out; echo to-err >&2; exit 3"},
                {"id": 2, "image": "alpine:latest", "script": "echo never"},
            ],
        }
    )

    detail = await hades.wait_terminal(job_id)

    assert detail["status"] == "Failed"
    assert detail["reason"] == "container exited with status 3"
    assert [s["status"] for s in detail["steps"]] == ["Failed", "Pending"]
    assert detail["steps"][0]["exit_code"] == 3
    logs = (await hades.client.get(f"/jobs/{job_id}/logs")).json()["logs"]
    assert len(logs) == 1
    lines = {(line["output_stream"], line["message"]) for line in logs[0]["logs"]}
    assert lines == {("stdout", "to-out"), ("stderr", "to-err")}
    await eventually(lambda: no_leftovers(job_id))  # cleanup follows the terminal event


async def test_continue_on_error_runs_on_and_the_job_succeeds(
    docker_images: list[str], start_hades: StartHades
) -> None:
    hades = await start_hades()
    job_id = await hades.submit(
        {
            "name": "tolerant",
            "metadata": {"GLOBAL": "job", "SHADOWED": "job"},
            "steps": [
                {"id": 1, "image": "alpine:latest", "script": "exit 4", "continue_on_error": True},
                {
                    "id": 2,
                    "image": "alpine:latest",
                    "script": 'echo "$GLOBAL $SHADOWED $UUID $JOB_NAME"; pwd',
                    "metadata": {"SHADOWED": "step"},
                },
            ],
        }
    )

    detail = await hades.wait_terminal(job_id)

    assert detail["status"] == "Succeeded", detail
    assert [(s["status"], s["exit_code"]) for s in detail["steps"]] == [("Failed", 4), ("Succeeded", 0)]
    logs = (await hades.client.get(f"/jobs/{job_id}/logs")).json()["logs"]
    assert messages(logs[1]) == [f"job step {job_id} tolerant", "/shared"]


async def test_a_missing_image_fails_the_job_with_the_reason(docker_images: list[str], start_hades: StartHades) -> None:
    hades = await start_hades()
    job_id = await hades.submit({"name": "no image", "steps": [{"id": 1, "image": "nosuch/image:1"}]})

    detail = await hades.wait_terminal(job_id)

    assert detail["status"] == "Failed"
    assert detail["reason"] == (
        "encountered 1 errors while pulling images: "
        "image nosuch/image:1 is not present locally and DOCKER_PULL_POLICY is never"
    )
    await eventually(lambda: no_leftovers(job_id))  # cleanup follows the terminal event


async def test_a_step_without_script_runs_the_image_command(docker_images: list[str], start_hades: StartHades) -> None:
    hades = await start_hades()
    # The test image's own command is `sh`, which exits at once on an empty stdin.
    job_id = await hades.submit({"name": "image cmd", "steps": [{"id": 1, "image": "alpine:latest"}]})
    assert (await hades.wait_terminal(job_id))["status"] == "Succeeded"


async def test_restart_rebuilds_the_same_views_and_runs_what_was_queued_meanwhile(
    docker_images: list[str], start_hades: StartHades
) -> None:
    from hades.runtime import Roles

    hades = await start_hades()
    done = await hades.submit({"name": "before", "steps": [{"id": 1, "image": "alpine:latest", "script": "echo a"}]})
    await hades.wait_terminal(done)
    before = {
        path: (await hades.client.get(path)).json()
        for path in (f"/jobs/{done}", f"/jobs/{done}/logs", f"/jobs/{done}/events", f"/jobs/{done}/status")
    }
    await hades.stop()

    # While no executor runs, a job is accepted and waits.
    api_only = await start_hades(Roles(api=True, scheduler=True))
    waiting = await api_only.submit(
        {"name": "meanwhile", "steps": [{"id": 1, "image": "alpine:latest", "script": "echo b"}]}
    )
    assert (await api_only.client.get(f"/jobs/{waiting}/status")).json() == {"status": "Queued"}
    await api_only.stop()

    again = await start_hades()
    after = {path: (await again.client.get(path)).json() for path in before}
    assert after == before
    assert (await again.wait_terminal(waiting))["status"] == "Succeeded"
    assert job_ids_in_order(await again.client.get("/jobs"))[-2:] == [done, waiting]


def job_ids_in_order(response: Any) -> list[str]:
    return list(response.json()["jobs"])


async def test_jobs_run_concurrently_up_to_the_limit(docker_images: list[str], start_hades: StartHades) -> None:
    hades = await start_hades(CONCURRENCY=3)
    jobs = [
        await hades.submit({"name": f"c{i}", "steps": [{"id": 1, "image": "alpine:latest", "script": "sleep 1"}]})
        for i in range(3)
    ]
    details = await asyncio.gather(*(hades.wait_terminal(j) for j in jobs))
    assert [d["status"] for d in details] == ["Succeeded"] * 3
    starts = sorted(d["started_at"] for d in details)
    finishes = sorted(d["finished_at"] for d in details)
    assert starts[-1] < finishes[0]  # all three ran at once


async def test_the_job_timeout_kills_the_step_and_fails_the_job(
    docker_images: list[str], start_hades: StartHades
) -> None:
    hades = await start_hades()
    job_id = await hades.submit(
        {
            "name": "slow",
            "timeout_seconds": 4,  # the budget includes creating and starting the container: 1 s ran out under load
            "steps": [
                {"id": 1, "image": "alpine:latest", "script": "echo started; sleep 60"},
                {"id": 2, "image": "alpine:latest", "script": "echo never"},
            ],
        }
    )

    detail = await hades.wait_terminal(job_id, timeout=30)

    assert detail["status"] == "Failed"
    assert detail["reason"] == "job timed out after 4 seconds"
    assert [(s["status"], s["reason"]) for s in detail["steps"]] == [
        ("Failed", "job timed out after 4 seconds"),
        ("Pending", None),
    ]
    logs = (await hades.client.get(f"/jobs/{job_id}/logs")).json()["logs"]
    assert messages(logs[0]) == ["started"]
    await eventually(lambda: no_leftovers(job_id))  # cleanup follows the terminal event


async def test_logs_over_their_caps_are_cut_with_a_notice_never_silently(
    docker_images: list[str], start_hades: StartHades
) -> None:
    hades = await start_hades(LOG_MAX_BYTES_PER_JOB="200", LOG_MAX_LINE_BYTES="40")
    script = "printf '%080d\\n' 7; seq 1 100"
    job_id = await hades.submit({"name": "chatty", "steps": [{"id": 1, "image": "alpine:latest", "script": script}]})

    assert (await hades.wait_terminal(job_id))["status"] == "Succeeded"

    lines = messages((await hades.client.get(f"/jobs/{job_id}/logs")).json()["logs"][0])
    assert lines[0] == "0" * 40 + " [hades: line cut at 40 of 80 bytes]"
    assert "[hades: this job's log reached its limit of 200 bytes; further output is dropped]" in lines
    dropped = [line for line in lines if line.startswith("[hades: ") and "lines dropped" in line]
    kept_numbers = [line for line in lines if line.isdigit()]
    assert dropped == [f"[hades: {100 - len(kept_numbers) - 1} lines dropped after the log limit of 200 bytes]"]
