"""One Hades for each module of client tests: every role in this test's loop on the session nats-server, the
process executor (no Docker), ``AUTH_KEY`` set."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from hades.config import Settings
from hades.runtime import Roles, serve
from tests.conftest import eventually, free_port

KEY = "client-test-key"


@dataclass(frozen=True)
class Api:
    """Where the module's Hades answers, and a folder for the gates its jobs wait on."""

    url: str
    key: str
    gates: Path


@pytest.fixture(scope="module")
async def api(nats_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    """API, scheduler, process executor and notifier in one task, stopped after the module."""
    root = tmp_path_factory.mktemp("client")
    port = free_port()
    settings = Settings(
        API_PORT=port,
        API_HOST="127.0.0.1",
        METRICS_PORT=0,
        AUTH_KEY=KEY,
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(root / "work"),
        CONCURRENCY=4,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, Roles.all(), nats_url, stop))
    url = f"http://127.0.0.1:{port}"

    async def up() -> bool:
        if task.done():
            task.result()
        with contextlib.suppress(httpx.HTTPError):
            async with httpx.AsyncClient() as client:
                return (await client.get(f"{url}/ping")).status_code == 200
        return False

    try:
        await eventually(up, timeout=20)
        gates = root / "gates"
        gates.mkdir()
        yield Api(url, KEY, gates)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def job(*scripts: str, name: str = "client", **fields: Any) -> dict[str, Any]:
    """A job of one step per script (the process executor ignores the image)."""
    steps = [{"id": i + 1, "name": f"step-{i + 1}", "image": "busybox", "script": s} for i, s in enumerate(scripts)]
    return {"name": name, "steps": steps, **fields}


def gated(gate: Path) -> str:
    """A script that says so and then waits until the test opens ``gate``: the test decides when the job ends."""
    return f"echo waiting; while [ ! -e {gate} ]; do sleep 0.02; done; echo through"
