"""``Executor`` on a Docker engine through aiodocker.

Per job: a labelled volume mounted at ``/shared``, its inputs and outputs moved through the engine's archive API
(``files.py``); the images made available by the pull policy (``images.py``); per step one labelled container
(``containers.py``) whose stdout and stderr are followed into the step's log writer (``logs.py``); containers and
the volume are always removed, also when the step is cancelled (timeout, cancel, shutdown). What an engine error
means, and the calls a cancellation must not cut short, are in ``engine.py``.

A step whose container ran and exited non-zero fails; a step whose container was removed from outside while it ran
(``docker rm -f``), or whose engine dropped the connection (dockerd killed or crashed), raises ``AttemptLost``: the
attempt is handed back, as for a lost executor. A removed container is told from an exited one by the engine
itself: its wait ends with a status (137 after a forced removal) but the container is then gone, or dying in its
removal. A graceful dockerd stop (no live-restore) is not told apart: it stops the containers while its API still
answers, and the step's 137 or 143 is that of any killed container.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiodocker
from aiodocker.containers import DockerContainer
from aiodocker.exceptions import DockerError
from aiodocker.volumes import DockerVolume

from hades.adapters.docker import files
from hades.adapters.docker.containers import (
    LABEL_DEPLOYMENT,
    LABEL_EXECUTOR,
    LABEL_JOB,
    DockerDefaults,
    container_config,
    container_name,
    labels,
    volume_name,
)
from hades.adapters.docker.engine import ENGINE_TROUBLE, NOT_FOUND, describe, kill, remove, settled, unreachable
from hades.adapters.docker.images import ensure_images
from hades.adapters.docker.logs import EngineLog, Progress, drain, follow
from hades.config import PullPolicy
from hades.core.lifecycle import JobState
from hades.core.ports import AttemptLost, ExecutionError, StepLogs, StepResult

log = logging.getLogger(__name__)
#: A container's ``State.Status`` while someone removes it (a forced removal kills it first: its wait has ended).
_REMOVED = ("removing", "dead")
#: How long an attempt's set-up waits for an engine that does not answer (a restart took ~25 s here).
ENGINE_WAIT_SECONDS = 60.0
_ENGINE_POLL_SECONDS = 0.5
_REMOVAL_SECONDS = 30.0  # at most, for a removal under way before the attempt's volume is removed


@contextlib.contextmanager
def lap(phases: dict[str, float], name: str) -> Iterator[None]:
    """Add the seconds the block took to ``phases[name]`` (also when it raises)."""
    began = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = round(phases.get(name, 0.0) + time.perf_counter() - began, 6)


class _Vanished(Exception):
    """A step's container was removed from outside while it ran (its wait ended, the container is gone)."""


class DockerExecutor:
    """Runs steps as containers on one Docker engine."""

    def __init__(
        self,
        defaults: DockerDefaults,
        pull_policy: PullPolicy,
        docker_host: str | None = None,
        engine_wait: float = ENGINE_WAIT_SECONDS,
    ) -> None:
        self._engine_wait = engine_wait
        self._defaults = defaults
        self._pull_policy = pull_policy
        self._docker_host = docker_host
        self._docker: aiodocker.Docker | None = None
        self._removals: set[asyncio.Task[None]] = set()  # step containers being removed off the job's path

    @property
    def docker(self) -> aiodocker.Docker:
        """The engine client (created by :meth:`start`)."""
        if self._docker is None:
            raise RuntimeError("DockerExecutor.start() was not called")
        return self._docker

    async def start(self) -> None:
        """Connect to the engine (inside the running loop, as aiodocker requires) and check it answers."""
        self._docker = aiodocker.Docker(url=self._docker_host)
        await self._docker.version()

    async def close(self) -> None:
        """Finish the removals under way, then close the engine client."""
        if self._removals:
            await asyncio.wait(self._removals, timeout=30)
        if self._docker is not None:
            await self._docker.close()
            self._docker = None

    # -- the Executor protocol ----------------------------------------------------------------------------------

    async def prepare(self, job: JobState) -> dict[str, float]:
        """Create the job's volume and make every image available; returns the seconds each took.

        An engine that does not answer (restarting: the attempt before this one may have been lost to it) is
        waited for, up to ``engine_wait`` seconds, before the attempt is given up as lost: handed straight back,
        this executor would take it again at once and spend every attempt the job has within a restart.
        """
        for tries_left in (True, False):
            try:
                return await self._prepare(job)
            except ENGINE_TROUBLE as error:
                if not unreachable(error):
                    raise
                if not (tries_left and await self._engine_back()):
                    raise AttemptLost(f"cannot reach the Docker engine: {describe(error)}") from error
        raise AssertionError("unreachable")

    async def _engine_back(self) -> bool:
        """Whether the engine answers again within ``engine_wait`` seconds."""
        deadline = time.monotonic() + self._engine_wait
        while time.monotonic() < deadline:
            with contextlib.suppress(*ENGINE_TROUBLE):
                await self.docker.version()
                return True
            await asyncio.sleep(_ENGINE_POLL_SECONDS)
        return False

    async def _prepare(self, job: JobState) -> dict[str, float]:
        """The volume's creation and the images' check (or pull) at once: neither needs the other, and one after
        the other they were two engine round trips on every job's path (~2 ms each here). Both are awaited
        whatever either does, so nothing outlives the set-up; the volume's failure is reported before the images'.
        """
        phases: dict[str, float] = {}
        outcomes = await asyncio.gather(
            self._create_volume(job, phases), self._images(job, phases), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return phases

    async def _create_volume(self, job: JobState, phases: dict[str, float]) -> None:
        try:
            with lap(phases, "volume"):
                await settled(
                    self.docker.volumes.create(
                        {
                            "Name": volume_name(job.job_id, job.attempt),
                            "Labels": labels(job, self._defaults),
                        }
                    )
                )
        except DockerError as error:
            if unreachable(error):
                raise
            raise ExecutionError(f"failed to create the shared volume: {error.message}") from error

    async def _images(self, job: JobState, phases: dict[str, float]) -> None:
        with lap(phases, "images"):
            await ensure_images(self.docker, job, self._pull_policy)

    async def run_step(self, job: JobState, index: int, logs: StepLogs) -> StepResult:
        """Create, start and follow one step's container to its end; then remove it (off the job's path), unless it
        is the job's last step, whose container the attempt's cleanup removes (``_remove_later``)."""
        config = container_config(job, index, self._defaults)
        phases: dict[str, float] = {}
        try:
            with lap(phases, "create"):
                container = await settled(self.docker.containers.create(config, name=container_name(job, index)))
        except DockerError as error:
            if unreachable(error):
                raise AttemptLost(f"cannot reach the Docker engine: {describe(error)}") from error
            return StepResult(exit_code=None, error=f"failed to create container: {error.message}", phases=phases)
        try:
            return await self._run_container(container, logs, phases)
        except _Vanished as gone:
            raise AttemptLost(f"step {index + 1}'s container was removed from outside while it ran ({gone})") from gone
        except ENGINE_TROUBLE as error:
            if not unreachable(error):
                # A refusal while the step ran (its wait: no such container; its logs: "dead or marked for
                # removal") is the container's removal when the engine says it is gone or going.
                if await self._gone(container):
                    removed = f"step {index + 1}'s container was removed from outside while it ran"
                    raise AttemptLost(f"{removed} ({describe(error)})") from error
                raise
            # A connection the engine dropped may leave the container running (the engine still up): stop it, so
            # the next attempt does not run beside it; against an engine that is gone this fails at once.
            await asyncio.shield(kill(container))
            raise AttemptLost(f"lost the Docker engine while step {index + 1} ran: {describe(error)}") from error
        except asyncio.CancelledError:
            await asyncio.shield(kill(container))
            raise
        finally:
            if index < len(job.spec.steps) - 1:
                self._remove_later(container)
            # else the job's last step: the attempt's cleanup, right after the job's end is appended, removes it

    def _remove_later(self, container: DockerContainer) -> None:
        """Remove a step's container without making the job wait for it.

        Removal took ~47 ms a step here, on the job's path until the result was reported (``docker run --rm``
        waits for it too). The next step or the job's end need not wait: containers are labelled, the attempt's
        cleanup removes any still there before the volume, and the sweep catches what a crash left.

        The last step's container is left to that cleanup, which follows the job's end: removed at once, it took
        the engine's CPU (vfs deletes a whole copy of the image) while the step's log was flushed and the job's
        last events appended, and the hello job's ``succeeded`` reached the read model ~2 ms later (median of 15
        jobs, twice: 6.1 and 5.3 ms from the step's end against 3.9 and 3.6 ms).
        """
        removal = asyncio.create_task(remove(container), name=f"remove-{container.id[:12]}")
        self._removals.add(removal)
        removal.add_done_callback(self._removals.discard)

    async def cleanup(self, job: JobState) -> None:
        """Remove the attempt's containers (only this executor's: another may run a later attempt), then its volume."""
        if self._removals:  # let the step removals under way finish first: a volume in use cannot be deleted
            await asyncio.wait(self._removals, timeout=30)
        mine = [f"{key}={value}" for key, value in labels(job, self._defaults).items()]
        for container in await self.docker.containers.list(all=True, filters={"label": mine}):
            if container._container.get("State") in _REMOVED:
                await self._removed(container)  # removed from outside meanwhile: it holds the volume until it is gone
            else:
                await remove(container)
        try:
            await DockerVolume(self.docker, volume_name(job.job_id, job.attempt)).delete()  # by name: no inspect
        except DockerError as error:
            if error.status != 404:
                log.warning("could not remove volume of job %s: %s", job.job_id, error.message)

    async def write_inputs(self, job: JobState, archive: Path) -> None:
        """Unpack the inputs' archive into the volume (``files.py``)."""
        await files.write_inputs(self.docker, job, self._defaults, archive)

    def read_path(self, job: JobState, path: str) -> AsyncIterator[bytes]:
        """The engine's tar stream of one path of the volume, read as it arrives (``files.py``)."""
        return files.read_path(self.docker, job, self._defaults, path)

    async def sweep(self, running: Callable[[str], bool], live_executors: set[str]) -> int:
        """Remove what a crash left behind: containers and volumes of executors that are gone, and this
        executor's own that belong to no job it runs now. Returns how many were removed."""
        me = self._defaults.executor_id
        removed = 0

        def stale(found: dict[str, str]) -> bool:
            owner, job_id = found.get(LABEL_EXECUTOR), found.get(LABEL_JOB)
            return owner not in live_executors if owner != me else not running(job_id or "")

        ours = [LABEL_JOB] + ([f"{LABEL_DEPLOYMENT}={self._defaults.deployment}"] if self._defaults.deployment else [])
        for container in await self.docker.containers.list(all=True, filters={"label": ours}):
            if stale(container._container.get("Labels") or {}):
                await remove(container)
                removed += 1
        volumes = (await self.docker.volumes.list(filters={"label": ours})).get("Volumes") or []
        for volume in volumes:
            if stale(volume.get("Labels") or {}):
                with contextlib.suppress(DockerError):
                    await DockerVolume(self.docker, volume["Name"]).delete()
                    removed += 1
        return removed

    # -- internals ----------------------------------------------------------------------------------------------

    async def _run_container(self, container: DockerContainer, logs: StepLogs, phases: dict[str, float]) -> StepResult:
        await logs.open(container.id)
        try:
            with lap(phases, "start"):
                await container.start()
        except DockerError as error:
            if error.status == NOT_FOUND or unreachable(error):
                raise  # removed between its creation and its start, or the engine went away: not the job's doing
            return StepResult(exit_code=None, error=f"failed to start container: {error.message}", phases=phases)
        progress = Progress()
        pumps = [asyncio.create_task(follow(EngineLog(container), logs, progress))]
        try:
            with lap(phases, "run"):
                result = await container.wait()
            with lap(phases, "logs"):
                await drain(pumps, progress, logs)
        finally:
            for task in pumps:
                task.cancel()
        code = int(result.get("StatusCode", -1))
        if code == 0:
            return StepResult(exit_code=code, phases=phases)  # ran to its end: whatever happens to it now
        state = await self._state(container)
        if state is None:
            raise _Vanished(f"its wait ended with status {code}, and it is gone or being removed")
        if state.get("OOMKilled"):
            return StepResult(
                exit_code=code, error=f"container exited with status {code} (out of memory)", phases=phases
            )
        return StepResult(exit_code=code, phases=phases)

    async def _state(self, container: DockerContainer) -> dict[str, Any] | None:
        """A step container's ``State`` as the engine has it after its wait; None when it was removed from outside
        (gone, or being removed: nothing but this attempt's end removes it here, and that comes later). Empty when
        the engine refuses to say; engine trouble is raised."""
        try:
            info = await container.show()
        except DockerError as error:
            if error.status == NOT_FOUND:
                return None
            if unreachable(error):
                raise
            return {}
        state: dict[str, Any] = info.get("State") or {}
        return None if state.get("Status") in _REMOVED else state

    async def _gone(self, container: DockerContainer) -> bool:
        """Whether the engine says the container is gone or going (False when it cannot be asked)."""
        try:
            return await self._state(container) is None
        except ENGINE_TROUBLE:
            return False

    async def _removed(self, container: DockerContainer) -> None:
        """Wait for a removal under way (begun from outside) to end; a container already gone answers at once."""
        with contextlib.suppress(*ENGINE_TROUBLE, TimeoutError):
            async with asyncio.timeout(_REMOVAL_SECONDS):
                await container.wait(condition="removed")
