"""A job's volume, written and read through the engine's archive API: the inputs placed before the first step,
the paths read after the last (artifacts, a pipeline's outputs).

The archive API works on a container's filesystem, so each call goes through a helper container that is created,
never started, and removed after; it carries the attempt's labels, so cleanup and the sweep remove it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiodocker
from aiodocker.containers import DockerContainer
from aiodocker.exceptions import DockerError

from hades.adapters.docker.containers import SHARED_PATH, DockerDefaults, image_reference, labels, volume_name
from hades.adapters.docker.engine import remove, settled
from hades.core.lifecycle import JobState


async def write_inputs(docker: aiodocker.Docker, job: JobState, defaults: DockerDefaults, archive: Path) -> None:
    """Unpack the inputs' archive into the volume (the engine's archive API, through a helper container)."""
    async with _files_container(docker, job, defaults) as container:
        with archive.open("rb") as data:  # streamed to the engine, never read whole
            async with docker._query(
                f"containers/{container.id}/archive",
                method="PUT",
                params={"path": SHARED_PATH},
                data=data,
                headers={"Content-Type": "application/x-tar"},
            ):
                pass


async def read_path(
    docker: aiodocker.Docker, job: JobState, defaults: DockerDefaults, path: str
) -> AsyncIterator[bytes]:
    """The engine's tar stream of one path of the volume, read as it arrives (aiodocker's ``get_archive``
    would hold all of it in memory)."""
    async with _files_container(docker, job, defaults) as container:
        try:
            async with docker._query(
                f"containers/{container.id}/archive", params={"path": f"{SHARED_PATH}/{path}"}
            ) as response:
                async for chunk in response.content.iter_chunked(1 << 16):
                    yield chunk
        except DockerError as error:
            if error.status == 404:
                raise FileNotFoundError(f"{path}: no such file or directory in the workspace") from error
            raise


@contextlib.asynccontextmanager
async def _files_container(
    docker: aiodocker.Docker, job: JobState, defaults: DockerDefaults
) -> AsyncIterator[DockerContainer]:
    """A container that is created and never started, the job's volume mounted at /shared, whose filesystem
    the archive API reads and writes; it carries the attempt's labels, so cleanup and the sweep remove it."""
    config: dict[str, Any] = {
        "Image": image_reference(job.spec.steps[0].image),
        "Cmd": ["true"],
        "Labels": labels(job, defaults),
        "NetworkDisabled": True,
        "HostConfig": {
            "Mounts": [{"Type": "volume", "Source": volume_name(job.job_id, job.attempt), "Target": SHARED_PATH}]
        },
    }
    name = f"hades-{job.job_id}-{job.attempt}-files-{uuid.uuid4().hex[:6]}"
    container = await settled(docker.containers.create(config, name=name))
    try:
        yield container
    finally:
        await asyncio.shield(remove(container))
