"""The Docker engine vanishing mid-step (behind a proxy the test cuts, as a restart would): the attempt is lost to
the engine, not to its script, so it is handed back, and the job fails with the cause once no attempt is left."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiodocker
import pytest

from hades.adapters.nats.event_store import NatsEventStore
from hades.runtime import Roles
from tests.conftest import StartHades, eventually
from tests.integration.test_docker_jobs import no_leftovers
from tests.integration.test_lost_containers import job, requeued, running_container
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


async def test_losing_the_engine_mid_step_hands_the_attempt_back_to_run_once_it_answers(
    docker_images: list[str], start_hades: StartHades, engine_proxy: EngineProxy, event_store: NatsEventStore
) -> None:
    """An engine restart, as the executor sees it: its connections drop mid-step, then the engine answers again.
    The attempt is handed back; the next one waits in its set-up for the engine and runs."""
    api = await start_hades(Roles(api=True, scheduler=True))
    await start_hades(Roles(executor=True), DOCKER_HOST=f"unix://{engine_proxy.path}", HADES_SWEEP_SECONDS="0.5")
    job_id = await api.submit(job())

    async with aiodocker.Docker() as docker:
        await running_container(docker, job_id, 1)
        await engine_proxy.cut()
        [second] = await eventually(lambda: requeued(event_store, job_id))
        await engine_proxy.start()
        await (await running_container(docker, job_id, 2)).kill(signal="TERM")

    detail = await api.wait_terminal(job_id)
    assert detail["status"] == "Succeeded" and detail["attempt"] == 2
    assert second.reason is not None and second.reason.startswith("lost the Docker engine while step 1 ran: ")
    assert second.reason.endswith("; attempt 1 handed back")
    # Attempt 1's container outlived its executor's connection; the sweep removes it once the job has ended.
    await eventually(lambda: no_leftovers(job_id), timeout=60)


async def test_losing_the_engine_with_no_attempt_left_fails_the_job_with_the_cause(
    docker_images: list[str], start_hades: StartHades, engine_proxy: EngineProxy
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True), MAX_ATTEMPTS=1)
    engine = f"unix://{engine_proxy.path}"
    await start_hades(Roles(executor=True), DOCKER_HOST=engine, HADES_SWEEP_SECONDS="0.5", MAX_ATTEMPTS=1)
    job_id = await api.submit(job())

    async with aiodocker.Docker() as docker:
        await running_container(docker, job_id, 1)
    await engine_proxy.cut()

    detail = await api.wait_terminal(job_id, timeout=30)

    assert detail["status"] == "Failed" and detail["attempt"] == 1
    assert detail["reason"].startswith("lost the Docker engine while step 1 ran: ")
    assert detail["reason"].endswith("; gave up after 1 attempts")
    # The container outlived its executor's connection; the next sweep, once the engine answers, removes it.
    await engine_proxy.start()
    await eventually(lambda: no_leftovers(job_id), timeout=60)
