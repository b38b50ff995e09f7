"""Step containers are removed off the job's path: an earlier step's at once, beside the next step; the last step's
by the attempt's cleanup, which follows the job's end (removed at once, it took the engine's CPU while the job's
last events were appended). Either way the cleanup leaves neither a container nor the volume."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime

import aiodocker
import pytest
from aiodocker.exceptions import DockerError

from hades.adapters.docker.containers import LABEL_JOB, DockerDefaults, volume_name
from hades.adapters.docker.executor import DockerExecutor
from hades.config import PullPolicy
from hades.core.lifecycle import JobState, Status
from hades.core.logs import OutputStream
from hades.core.spec import JobSpec, Priority, Step
from tests.conftest import eventually

pytestmark = pytest.mark.docker
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    async def open(self, container_id: str) -> None:
        pass

    async def write(self, stream: OutputStream, timestamp: datetime, message: str) -> None:
        self.lines.append(message)


async def containers_of(docker: aiodocker.Docker, job_id: str) -> list[str]:
    found = await docker.containers.list(all=True, filters={"label": [f"{LABEL_JOB}={job_id}"]})
    return sorted(str(container.id) for container in found)


async def no_containers(docker: aiodocker.Docker, job_id: str) -> bool:
    return not await containers_of(docker, job_id)


async def test_the_last_steps_container_waits_for_the_cleanup_which_removes_it_and_the_volume(
    docker_images: list[str],
) -> None:
    job_id = str(uuid.uuid4())
    steps = (Step(image=docker_images[0], script="echo one"), Step(image=docker_images[0], script="echo two"))
    spec = JobSpec(id=uuid.UUID(job_id), name="teardown", steps=steps)
    state = JobState(
        job_id=job_id, spec=spec, priority=Priority.HIGH, status=Status.RUNNING, submitted_at=NOW, attempt=1
    )
    executor = DockerExecutor(DockerDefaults(executor_id=f"e-{uuid.uuid4().hex[:6]}"), PullPolicy.NEVER)
    await executor.start()
    docker = aiodocker.Docker()
    try:
        await executor.prepare(state)
        first, second = Lines(), Lines()
        assert (await executor.run_step(state, 0, first)).exit_code == 0
        await eventually(lambda: no_containers(docker, job_id))  # the first step's goes without a cleanup
        assert (await executor.run_step(state, 1, second)).exit_code == 0
        assert (first.lines, second.lines) == (["one"], ["two"])
        await asyncio.sleep(0.3)
        assert len(await containers_of(docker, job_id)) == 1  # the last step's: left to the cleanup

        await executor.cleanup(state)

        assert await containers_of(docker, job_id) == []
        with pytest.raises(DockerError) as gone:
            await docker.volumes.get(volume_name(job_id, 1))
        assert gone.value.status == 404
    finally:
        for container in await docker.containers.list(all=True, filters={"label": [f"{LABEL_JOB}={job_id}"]}):
            with contextlib.suppress(DockerError):
                await container.delete(force=True)
        with contextlib.suppress(DockerError):
            await (await docker.volumes.get(volume_name(job_id, 1))).delete()
        await docker.close()
        await executor.close()
