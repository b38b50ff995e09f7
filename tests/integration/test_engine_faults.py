"""Engine trouble ends jobs with a reason: the Docker engine vanishing mid-step (behind a proxy the test cuts),
and a set-up failure reported by the executor, both through the real event store."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hades.runtime import Roles
from tests.conftest import StartHades, eventually
from tests.integration.test_docker_jobs import no_leftovers
from tests.support.docker_env import docker_socket_path

pytestmark = pytest.mark.docker


class EngineProxy:
    """A unix socket that forwards to the real engine until it is cut."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._handle, path=str(self.path))

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()
        self.path.unlink(missing_ok=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(docker_socket_path())
        self._writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@pytest.fixture
async def engine_proxy() -> AsyncIterator[EngineProxy]:
    with tempfile.TemporaryDirectory(prefix="hades-engine-") as folder:
        proxy = EngineProxy(Path(folder) / "docker.sock")
        await proxy.start()
        yield proxy
        with contextlib.suppress(Exception):
            await proxy.cut()


async def test_losing_the_engine_mid_step_fails_the_job_with_the_cause(
    docker_images: list[str], start_hades: StartHades, engine_proxy: EngineProxy
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True))
    await start_hades(Roles(executor=True), DOCKER_HOST=f"unix://{engine_proxy.path}", HADES_SWEEP_SECONDS="0.5")
    job_id = await api.submit(
        {"name": "orphan", "steps": [{"id": 1, "image": "alpine:latest", "script": "echo up; sleep 30"}]}
    )

    async def running() -> bool:
        logs = (await api.client.get(f"/jobs/{job_id}/logs")).json()["logs"]
        return bool(logs and logs[0]["logs"])

    await eventually(running)
    await engine_proxy.cut()

    detail = await api.wait_terminal(job_id, timeout=30)

    assert detail["status"] == "Failed"
    assert detail["reason"].startswith("lost the Docker engine while step 1 ran: ")
    # The container outlived its executor's connection; the next sweep, once the engine answers, removes it.
    await engine_proxy.start()
    await eventually(lambda: no_leftovers(job_id), timeout=60)
