"""A whole Hades (``hades up`` over NATS_URL, process executor) lives through its nats-server being SIGKILLed and
started again some seconds later, and runs the next job: no role gives up on an error it met while NATS was away.

The executor's intake had no error handling: with MAX_PARALLELISM its idle loop asks the cap's KV for a lease about
four times a second, that request timed out during the restart, and the executor role ended, taking every attempt
it ran with it (a NATS blip aborted every job of every idle-polling executor).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import eventually, free_port
from tests.support.restartable_nats import Restartable, restartable_node

#: Seconds the nats-server stays away: longer than a NATS request's timeout (5 s), as a restart that replays a large
#: store, or a node being rescheduled, is.
OUTAGE = 8.0
JOB = {"name": "after-restart", "steps": [{"id": 1, "image": "busybox", "script": "echo ran"}]}


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Restartable]:
    async with restartable_node(tmp_path / "nats") as node:
        yield node


async def submit_and_wait(api: str) -> dict[str, Any]:
    """Submit the job (again while the API cannot reach NATS yet) and wait for its end."""
    async with httpx.AsyncClient(timeout=30) as client:

        async def submitted() -> str | None:
            try:
                response = await client.post(f"{api}/build", json=JOB)
            except httpx.HTTPError:
                return None
            return str(response.json()["job_id"]) if response.status_code == 200 else None

        job_id = await eventually(submitted, timeout=60, interval=0.5)

        async def ended() -> dict[str, Any] | None:
            detail: dict[str, Any] = (await client.get(f"{api}/jobs/{job_id}")).json()
            return detail if detail["status"] in ("Succeeded", "Failed", "Stopped") else None

        result: dict[str, Any] = await eventually(ended, timeout=60, interval=0.2)
        return result


@pytest.mark.parametrize("cap", ["", "2"], ids=["uncapped", "max-parallelism"])
async def test_hades_runs_the_next_job_after_its_nats_restarted(node: Restartable, tmp_path: Path, cap: str) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NATS_", "HADES_", "API_", "AUTH_", "MAX_"))}
    env.update(
        NATS_URL=node.server.url,
        API_PORT=str(port),
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(tmp_path / "workspaces"),
        METRICS_PORT="0",
        **({"MAX_PARALLELISM": cap} if cap else {}),
    )
    hades = await asyncio.create_subprocess_exec(sys.executable, "-m", "hades.cli", "up", env=env)
    api = f"http://127.0.0.1:{port}"
    try:
        assert (await submit_and_wait(api))["status"] == "Succeeded"
        node.stop(kill=True)
        await asyncio.sleep(OUTAGE)  # the fault: NATS away longer than one request's timeout
        await asyncio.to_thread(node.start)
        assert (await submit_and_wait(api))["status"] == "Succeeded"
        assert hades.returncode is None
    finally:
        if hades.returncode is None:
            hades.kill()
        await hades.wait()
