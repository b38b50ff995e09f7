"""An attempt's set-up on Docker asks for its volume and its images at once (two engine round trips on every job's
path, one after the other before), yet keeps what one after the other guaranteed: the volume's failure is the one
reported, a cancelled set-up lets the volume's creation land (so the cleanup that follows removes it), and the
cleanup removes the volume by its name."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime
from typing import Any

import aiodocker
import pytest
from aiodocker.exceptions import DockerError

from hades.adapters.docker.containers import DockerDefaults, volume_name
from hades.adapters.docker.executor import DockerExecutor
from hades.config import PullPolicy
from hades.core.lifecycle import JobState, Status
from hades.core.ports import ExecutionError
from hades.core.spec import JobSpec, Priority, Step
from tests.support.docker_env import BUSYBOX_TAG

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def job(image: str = BUSYBOX_TAG) -> JobState:
    job_id = str(uuid.uuid4())
    spec = JobSpec(id=uuid.UUID(job_id), name="prepare", steps=(Step(image=image, script="true"),))
    return JobState(
        job_id=job_id, spec=spec, priority=Priority.HIGH, status=Status.RUNNING, submitted_at=NOW, attempt=1
    )


class Engine:
    """The engine's side of a set-up: the volume's creation and the image's inspect each wait until both were
    asked for (one after the other, the first gives up after 2 s), then answer or refuse."""

    def __init__(self, volume_refused: bool = False, image_missing: bool = False) -> None:
        self.both_asked = asyncio.Event()
        self.asked: list[str] = []
        self.volume_created = False
        self.volume_refused, self.image_missing = volume_refused, image_missing
        self.volumes, self.images = self, self

    async def _ask(self, what: str) -> None:
        self.asked.append(what)
        if len(self.asked) == 2:
            self.both_asked.set()
        try:
            async with asyncio.timeout(2):
                await self.both_asked.wait()
        except TimeoutError:
            raise AssertionError(f"{what} asked for alone: the set-up asks one thing after the other") from None

    async def create(self, config: dict[str, Any]) -> None:  # volumes.create
        await self._ask("volume")
        await asyncio.sleep(0.05)  # lands after the image's answer
        if self.volume_refused:
            raise DockerError(500, "no space left")
        self.volume_created = True

    async def inspect(self, image: str) -> dict[str, Any]:  # images.inspect
        await self._ask("image")
        if self.image_missing:
            raise DockerError(404, f"No such image: {image}")
        return {"Id": image}


def executor_on(engine: Engine) -> DockerExecutor:
    executor = DockerExecutor(DockerDefaults(executor_id="e"), PullPolicy.NEVER)
    executor._docker = engine  # type: ignore[assignment]
    return executor


async def test_the_volume_and_the_images_are_asked_for_at_once() -> None:
    engine = Engine()
    async with asyncio.timeout(5):
        phases = await executor_on(engine).prepare(job())
    assert sorted(engine.asked) == ["image", "volume"]
    assert engine.volume_created
    assert phases.keys() == {"volume", "images"}


async def test_a_missing_image_fails_the_set_up_once_the_volume_landed() -> None:
    engine = Engine(image_missing=True)
    with pytest.raises(ExecutionError, match="not present locally"):
        async with asyncio.timeout(5):
            await executor_on(engine).prepare(job())
    assert engine.volume_created  # created before the failure was reported: the attempt's cleanup removes it


async def test_the_volume_refusal_is_the_failure_reported_when_both_fail() -> None:
    engine = Engine(volume_refused=True, image_missing=True)
    with pytest.raises(ExecutionError, match="failed to create the shared volume: no space left"):
        async with asyncio.timeout(5):
            await executor_on(engine).prepare(job())


async def test_a_cancelled_set_up_lets_the_volume_creation_land_first() -> None:
    engine = Engine()
    preparing = asyncio.create_task(executor_on(engine).prepare(job()))
    async with asyncio.timeout(5):
        await engine.both_asked.wait()
    preparing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await preparing
    assert engine.volume_created


@pytest.mark.docker
async def test_the_cleanup_removes_the_volume_by_its_name_and_a_missing_one_quietly(docker_images: list[str]) -> None:
    state = job(docker_images[0])
    executor = DockerExecutor(DockerDefaults(executor_id=f"e-{uuid.uuid4().hex[:6]}"), PullPolicy.NEVER)
    await executor.start()
    docker = aiodocker.Docker()
    try:
        await executor.prepare(state)
        await docker.volumes.get(volume_name(state.job_id, 1))  # there
        await executor.cleanup(state)
        with pytest.raises(DockerError) as gone:
            await docker.volumes.get(volume_name(state.job_id, 1))
        assert gone.value.status == 404
        await executor.cleanup(state)  # nothing left: no error
    finally:
        with contextlib.suppress(DockerError):
            await (await docker.volumes.get(volume_name(state.job_id, 1))).delete()
        await docker.close()
        await executor.close()
