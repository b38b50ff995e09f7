"""Step containers are never privileged and start with ``no-new-privileges``, whatever the job asks for; Docker's
default capability set stays (build steps run apt, chown, su), and nothing is added to it."""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime
from typing import Any

import aiodocker
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hades.adapters.docker.containers import DockerDefaults, container_config, volume_name
from hades.core.lifecycle import JobState, Status
from hades.core.spec import JobSpec, Priority, Step
from tests.support.docker_env import BUSYBOX_TAG

JOB_ID = str(uuid.uuid4())
NOW = datetime(2026, 1, 1, tzinfo=UTC)
ESCALATING = {"CapAdd", "Devices", "PidMode", "IpcMode", "UsernsMode", "Binds", "CgroupnsMode", "Sysctls"}
STEPS = st.builds(
    Step,
    image=st.sampled_from(["alpine:3", "busybox"]),
    script=st.text(max_size=20),
    network=st.sampled_from(["", "none", "bridge", "host"]),
    cpu_limit=st.integers(0, 8),
    memory_limit=st.sampled_from(["", "512M", "1G"]),
    pids_limit=st.integers(0, 100),
    metadata=st.dictionaries(st.sampled_from(["Privileged", "CapAdd", "SecurityOpt", "X"]), st.text(max_size=5)),
)


def job(step: Step) -> JobState:
    spec = JobSpec(id=uuid.UUID(JOB_ID), name="privileges", steps=(step,))
    return JobState(
        job_id=JOB_ID, spec=spec, priority=Priority.HIGH, status=Status.RUNNING, submitted_at=NOW, attempt=1
    )


@given(step=STEPS)
def test_no_step_gets_privileges(step: Step) -> None:
    host = container_config(job(step), 0, DockerDefaults(executor_id="e"))["HostConfig"]
    assert host["Privileged"] is False
    assert "no-new-privileges" in host["SecurityOpt"]
    assert not ESCALATING & host.keys()


@pytest.mark.docker
async def test_the_engine_runs_the_step_unprivileged_with_no_new_privs(docker_images: list[str]) -> None:
    state = job(Step(image=BUSYBOX_TAG, script="grep NoNewPrivs /proc/self/status"))
    config: dict[str, Any] = container_config(state, 0, DockerDefaults(executor_id="e"))
    docker = aiodocker.Docker()
    try:
        container = await docker.containers.create(config, name=f"hades-privileges-{uuid.uuid4().hex[:8]}")
        try:
            await container.start()
            assert (await container.wait(timeout=30))["StatusCode"] == 0
            assert "".join(await container.log(stdout=True)).split() == ["NoNewPrivs:", "1"]
            host = (await container.show())["HostConfig"]
            assert host["Privileged"] is False
            assert host["SecurityOpt"] == ["no-new-privileges"]
            assert not host.get("CapAdd")
        finally:
            await container.delete(force=True)
    finally:
        try:
            # the workspace volume exists only if the container was created: a failed create must show its own error
            with contextlib.suppress(aiodocker.DockerError):
                await (await docker.volumes.get(volume_name(JOB_ID, 1))).delete()
        finally:
            await docker.close()
