"""The executor takes a job as its queue message left it: the job's older events are read along their chain from
the message, and the job's newest is never asked for (one request per job less). Whatever happened after the
message still wins, through the conflict it gives ``started`` (tests/core/test_cancel_and_promote.py has the
promoted job; tests/integration/test_cancel.py the cancelled one)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from nats.aio.client import Client
from nats.aio.msg import Msg

from hades.runtime import Roles
from tests.conftest import StartHades

NEWEST_OF_A_JOB = "$JS.API.DIRECT.GET.HADES_EVENTS.hades.events.{job_id}.>"


async def test_a_job_is_run_without_a_read_of_its_newest_event(
    start_hades: StartHades, nc: Client, tmp_path: Path
) -> None:
    asked: list[str] = []
    ended: dict[str, asyncio.Future[str]] = {}

    async def on_request(msg: Msg) -> None:
        asked.append(msg.subject)

    async def on_end(msg: Msg) -> None:
        _, _, job, kind = msg.subject.split(".", 3)
        future = ended.setdefault(job, asyncio.get_running_loop().create_future())
        if not future.done():
            future.set_result(kind)

    hades = await start_hades(
        Roles(api=True, scheduler=True, executor=True), HADES_EXECUTOR="process", HADES_PROCESS_WORKSPACES=str(tmp_path)
    )
    subs = [await nc.subscribe(f"hades.events.*.{kind}", cb=on_end) for kind in ("succeeded", "failed", "stopped")]
    subs.append(await nc.subscribe("$JS.API.DIRECT.GET.>", cb=on_request))
    await nc.flush()
    job = {"name": "plain", "steps": [{"id": 1, "image": "busybox", "script": "echo ran"}]}
    job_id = await hades.submit(job)  # nothing polls the job's detail (which reads its history) until it ended
    try:
        end = ended.setdefault(job_id, asyncio.get_running_loop().create_future())
        assert await asyncio.wait_for(end, 30) == "succeeded"
        await nc.flush()
    finally:
        for sub in subs:
            await sub.unsubscribe()

    of_the_job = [subject for subject in asked if "HADES_EVENTS" in subject]
    assert NEWEST_OF_A_JOB.format(job_id=job_id) not in of_the_job
    assert "$JS.API.DIRECT.GET.HADES_EVENTS" in of_the_job  # its submitted, by sequence along the chain
    detail = await hades.wait_terminal(job_id)
    events = (await hades.client.get(f"/jobs/{job_id}/events")).json()["events"]
    assert detail["status"] == "Succeeded" and [e["type"] for e in events].count("started") == 1
