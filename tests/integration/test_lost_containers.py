"""A step's container removed from outside while it runs is an infrastructure fault, as a lost executor is: the
attempt is handed back (a new attempt, counted against MAX_ATTEMPTS), while a step that ran and exited non-zero,
also one killed from outside but not removed, still fails the job. Against the real engine: the engine's own answers
are what tells the two apart."""

from __future__ import annotations

from typing import Any

import aiodocker
import pytest
from aiodocker.containers import DockerContainer

from hades.adapters.docker.containers import LABEL_ATTEMPT, LABEL_JOB, LABEL_STEP
from hades.adapters.nats.event_store import NatsEventStore
from hades.core.events import JobQueued
from hades.runtime import Roles
from tests.conftest import StartHades, eventually
from tests.integration.test_docker_jobs import no_leftovers

pytestmark = pytest.mark.docker

#: Runs until the test ends it: SIGTERM makes it exit 0, SIGKILL (a forced removal, ``docker kill``) 137.
UNTIL_TOLD = "trap 'exit 0' TERM; echo up; sleep 60 & wait"


def job(script: str = UNTIL_TOLD) -> dict[str, Any]:
    return {"name": "lost", "steps": [{"id": 1, "image": "alpine:latest", "script": script}]}


async def running_container(docker: aiodocker.Docker, job_id: str, attempt: int) -> DockerContainer:
    """The attempt's step container once it runs and its script has set its trap (its first line is out)."""
    marks = [f"{LABEL_JOB}={job_id}", f"{LABEL_ATTEMPT}={attempt}", f"{LABEL_STEP}=0"]

    async def found() -> DockerContainer | None:
        for container in await docker.containers.list(filters={"label": marks}):
            if "up\n" in await container.log(stdout=True):
                return container
        return None

    container: DockerContainer = await eventually(found)
    return container


async def requeued(store: NatsEventStore, job_id: str) -> list[JobQueued]:
    return [r.event for r in await store.history(job_id) if isinstance(r.event, JobQueued) and r.event.attempt > 1]


async def test_a_container_removed_from_outside_hands_the_attempt_back(
    docker_images: list[str], start_hades: StartHades, event_store: NatsEventStore
) -> None:
    api = await start_hades(Roles(api=True, scheduler=True, executor=True))
    job_id = await api.submit(job())

    async with aiodocker.Docker() as docker:
        await (await running_container(docker, job_id, 1)).delete(force=True)
        await (await running_container(docker, job_id, 2)).kill(signal="TERM")

    detail = await api.wait_terminal(job_id)
    assert detail["status"] == "Succeeded" and detail["attempt"] == 2
    [second] = await requeued(event_store, job_id)
    assert second.reason is not None
    assert second.reason.startswith("step 1's container was removed from outside while it ran")
    assert second.reason.endswith("; attempt 1 handed back")
    await eventually(lambda: no_leftovers(job_id))


async def test_lost_containers_count_against_max_attempts(docker_images: list[str], start_hades: StartHades) -> None:
    api = await start_hades(Roles(api=True, scheduler=True, executor=True), MAX_ATTEMPTS=2)
    job_id = await api.submit(job())

    async with aiodocker.Docker() as docker:
        await (await running_container(docker, job_id, 1)).delete(force=True)
        await (await running_container(docker, job_id, 2)).delete(force=True)

    detail = await api.wait_terminal(job_id)
    assert detail["status"] == "Failed" and detail["attempt"] == 2
    assert detail["reason"].startswith("step 1's container was removed from outside while it ran")
    assert detail["reason"].endswith("; gave up after 2 attempts")
    await eventually(lambda: no_leftovers(job_id))


async def test_a_container_killed_but_not_removed_fails_the_job(
    docker_images: list[str], start_hades: StartHades
) -> None:
    """The container ran and exited (SIGKILL from outside looks like the script's own kill -9, or the kernel's OOM
    kill): its step failed, the job with it, on its first attempt."""
    api = await start_hades(Roles(api=True, scheduler=True, executor=True))
    job_id = await api.submit(job())

    async with aiodocker.Docker() as docker:
        await (await running_container(docker, job_id, 1)).kill()

    detail = await api.wait_terminal(job_id)
    assert detail["status"] == "Failed" and detail["attempt"] == 1
    assert "137" in detail["reason"]
