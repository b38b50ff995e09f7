"""How a job's step becomes a Docker container configuration: pure functions, unit-tested without an engine."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from hades.core.lifecycle import JobState
from hades.core.memory import min_nonzero, parse_memory
from hades.core.spec import Step

SHARED_PATH = "/shared"
LABEL_JOB = "hades.job_id"
LABEL_EXECUTOR = "hades.executor_id"
LABEL_ATTEMPT = "hades.attempt"
LABEL_STEP = "hades.step_index"
#: Which Hades (which event log) the container belongs to: the sweep removes only its own deployment's leftovers,
#: so two Hades sharing one Docker engine (staging beside production, a laptop's ``hades up`` beside CI) never remove
#: each other's running containers.
LABEL_DEPLOYMENT = "hades.deployment"
#: The keys the Go scheduler injected into job metadata; never passed on to a container's environment.
PRIORITY_KEYS = ("hades.tum.de/priority", "hades.tum.de/priorityName")


@dataclass(frozen=True, slots=True)
class DockerDefaults:
    """Executor-wide settings that shape every container."""

    executor_id: str
    script_executor: str = "/bin/sh -c"
    cpu_limit: int | None = None
    memory_limit: str | None = None
    deployment: str = ""  # the event log's deployment id (``hades.adapters.nats.shared_keys``); "" labels none

    @property
    def memory_bytes(self) -> int | None:
        """The default memory limit in bytes (validated at start-up)."""
        return parse_memory(self.memory_limit) if self.memory_limit else None


def volume_name(job_id: str, attempt: int) -> str:
    """The attempt's shared volume: a retried attempt starts from an empty workspace."""
    return f"hades-{job_id}-{attempt}"


def labels(job: JobState, defaults: DockerDefaults) -> dict[str, str]:
    """What marks a container or volume as this attempt's, for cleanup and for the sweep after a crash."""
    marks = {LABEL_JOB: job.job_id, LABEL_EXECUTOR: defaults.executor_id, LABEL_ATTEMPT: str(job.attempt)}
    return marks | ({LABEL_DEPLOYMENT: defaults.deployment} if defaults.deployment else {})


def container_name(job: JobState, index: int) -> str:
    """Unique per job, attempt and step, so a retried attempt never collides with a leftover."""
    return f"hades-{job.job_id}-{job.attempt}-{index}"


def step_env(job: JobState, step: Step) -> list[str]:
    """Job metadata, then step metadata (overriding), then ``UUID`` and ``JOB_NAME``."""
    env = {**job.spec.metadata, **step.metadata}
    for key in PRIORITY_KEYS:
        env.pop(key, None)
    env["UUID"] = job.job_id
    env["JOB_NAME"] = job.spec.name
    return [f"{key}={value}" for key, value in env.items()]


def image_reference(image: str) -> str:
    """The image with an explicit tag: an untagged pull would fetch every tag of the repository."""
    last = image.rsplit("/", 1)[-1]
    return image if ("@" in image or ":" in last) else f"{image}:latest"


def host_config(step: Step, volume: str, defaults: DockerDefaults) -> dict[str, Any]:
    """Mount and limits. The executor's defaults apply to steps that set no limit of their own."""
    config: dict[str, Any] = {
        "Mounts": [{"Type": "volume", "Source": volume, "Target": SHARED_PATH}],
        # Never privileged, and no process may gain privileges it was not started with (setuid binaries, file
        # capabilities). Docker's default capability set stays: build steps run apt, chown and the like.
        "Privileged": False,
        "SecurityOpt": ["no-new-privileges"],
    }
    cpus = step.cpu_limit or defaults.cpu_limit
    if cpus:
        config["NanoCpus"] = cpus * 1_000_000_000
    memory = min_nonzero(step.memory_bytes) or defaults.memory_bytes
    if memory:
        config["Memory"] = memory
    if step.memory_swap_bytes:
        config["MemorySwap"] = step.memory_swap_bytes
    if step.pids_limit > 0:
        config["PidsLimit"] = step.pids_limit
    if step.network:
        config["NetworkMode"] = step.network
    return config


def container_config(job: JobState, index: int, defaults: DockerDefaults) -> dict[str, Any]:
    """The create-container body for one step."""
    step = job.spec.steps[index]
    config: dict[str, Any] = {
        "Image": image_reference(step.image),
        "Env": step_env(job, step),
        "WorkingDir": SHARED_PATH,
        "Labels": {**labels(job, defaults), LABEL_STEP: str(index)},
        "HostConfig": host_config(step, volume_name(job.job_id, job.attempt), defaults),
    }
    if step.script.strip():
        config["Entrypoint"] = [*shlex.split(defaults.script_executor), step.script]
    return config
