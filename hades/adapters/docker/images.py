"""Making a job's images available on the engine, as the pull policy says."""

from __future__ import annotations

import asyncio
from typing import Any

import aiodocker
from aiodocker.exceptions import DockerError

from hades.adapters.docker.containers import image_reference
from hades.adapters.docker.engine import unreachable
from hades.config import PullPolicy
from hades.core.lifecycle import JobState
from hades.core.ports import ExecutionError


async def ensure_images(docker: aiodocker.Docker, job: JobState, policy: PullPolicy) -> None:
    """Make every image of ``job``'s steps available at once; raises ExecutionError naming each that is not."""
    images = list(dict.fromkeys(image_reference(step.image) for step in job.spec.steps))
    results = await asyncio.gather(*(_ensure_image(docker, image, policy) for image in images))
    errors = [error for error in results if error]
    if errors:
        raise ExecutionError(f"encountered {len(errors)} errors while pulling images: {'; '.join(errors)}")


async def _ensure_image(docker: aiodocker.Docker, image: str, policy: PullPolicy) -> str | None:
    """None when the image is available, else the failure text for this image."""
    if policy is not PullPolicy.ALWAYS:
        try:
            await docker.images.inspect(image)
            return None
        except DockerError as error:
            if unreachable(error):
                raise
            if error.status != 404:
                return f"failed to pull image {image}: {error.message}"  # e.g. an invalid reference
    if policy is PullPolicy.NEVER:
        return f"image {image} is not present locally and DOCKER_PULL_POLICY is never"
    try:
        progress: list[dict[str, Any]] = await docker.images.pull(image)
    except DockerError as error:
        return f"failed to pull image {image}: {error.message}"
    failures = [str(item["error"]) for item in progress if item.get("error")]
    return f"failed to pull image {image}: {failures[-1]}" if failures else None
