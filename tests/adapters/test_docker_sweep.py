"""Two Hades on one Docker engine: each sweeps only its own deployment's leftovers, never the other's running
containers (they are labelled with their event log's deployment id)."""

from __future__ import annotations

import uuid

import aiodocker
import pytest

from hades.adapters.docker.containers import LABEL_DEPLOYMENT, LABEL_EXECUTOR, LABEL_JOB, DockerDefaults
from hades.adapters.docker.executor import DockerExecutor
from hades.config import PullPolicy

pytestmark = pytest.mark.docker


async def leftover(docker: aiodocker.Docker, image: str, deployment: str, owner: str) -> str:
    """A created container as a crashed executor of ``deployment`` would leave it."""
    labels = {LABEL_JOB: str(uuid.uuid4()), LABEL_EXECUTOR: owner, LABEL_DEPLOYMENT: deployment}
    container = await docker.containers.create({"Image": image, "Cmd": ["true"], "Labels": labels})
    return str(container.id)


async def test_a_sweep_leaves_another_deployments_containers_alone(docker_images: list[str]) -> None:
    ours, theirs = f"ours-{uuid.uuid4().hex[:6]}", f"theirs-{uuid.uuid4().hex[:6]}"
    executor = DockerExecutor(DockerDefaults(executor_id=f"exec-{ours}", deployment=ours), PullPolicy.NEVER)
    await executor.start()
    docker = aiodocker.Docker()
    try:
        our_leftover = await leftover(docker, docker_images[0], ours, "gone-executor")
        their_running = await leftover(docker, docker_images[0], theirs, "their-live-executor")

        await executor.sweep(lambda _job_id: False, live_executors={f"exec-{ours}"})

        left = {c.id for c in await docker.containers.list(all=True, filters={"label": [LABEL_JOB]})}
        assert our_leftover not in left
        assert their_running in left
    finally:
        for container in await docker.containers.list(all=True, filters={"label": [f"{LABEL_DEPLOYMENT}={theirs}"]}):
            await container.delete(force=True)
        await docker.close()
        await executor.close()
