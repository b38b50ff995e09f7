"""The executor role: how steps run (Docker, Kubernetes, the host shell), how many at once, and their limits."""

from __future__ import annotations

import os
import socket
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from hades.core.constraints import parse_labels


class PullPolicy(StrEnum):
    """When the Docker executor pulls a step's image."""

    IF_NOT_PRESENT = "if-not-present"
    ALWAYS = "always"
    NEVER = "never"


def _default_executor_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class ExecutorSettings(BaseModel):
    """An executor process: its engine (Docker or Kubernetes settings), its identity, its capacity and limits."""

    # executor
    executor: Literal["docker", "k8s", "k8s-operator", "process"] = Field(
        default="docker",
        validation_alias="HADES_EXECUTOR",
        description="how steps run: docker, k8s (a Pod per attempt), k8s-operator (BuildJobs that `hades operator` "
        "runs) or process (the host shell, for trusted fleets only)",
    )
    process_workspaces: Path | None = Field(
        default=None,
        validation_alias="HADES_PROCESS_WORKSPACES",
        description="where the process executor makes its workspaces; unset: $HADES_DATA_DIR/workspaces",
    )
    executor_id: str = Field(
        default_factory=_default_executor_id,
        validation_alias="HADES_EXECUTOR_ID",
        description="this executor's id in started events and container labels; unset: host-pid-random",
    )
    concurrency: int = Field(
        default=1, ge=1, validation_alias="CONCURRENCY", description="jobs one executor process runs at once"
    )
    docker_host: str | None = Field(
        default=None, validation_alias="DOCKER_HOST", description="the Docker engine; unset: the local socket"
    )
    docker_script_executor: str = Field(
        default="/bin/sh -c",
        validation_alias="DOCKER_SCRIPT_EXECUTOR",
        description="what runs a step's script (the Go default /bin/bash -c does not exist in alpine)",
    )
    docker_pull_policy: PullPolicy = Field(
        default=PullPolicy.IF_NOT_PRESENT,
        validation_alias="DOCKER_PULL_POLICY",
        description="when a step's image is pulled: if-not-present, always or never",
    )
    docker_cpu_limit: int | None = Field(
        default=None,
        ge=0,
        validation_alias="DOCKER_CPU_LIMIT",
        description="CPUs (whole cores) for a step that sets no limit of its own; unset: no limit",
    )
    docker_memory_limit: str | None = Field(
        default=None,
        validation_alias="DOCKER_MEMORY_LIMIT",
        description="memory (e.g. 2G) for a step that sets no limit of its own; unset: no limit",
    )
    k8s_namespace: str = Field(
        default="hades-executor", validation_alias="K8S_NAMESPACE", description="where the k8s executor runs its Pods"
    )
    k8s_kubeconfig: str | None = Field(
        default=None,
        validation_alias="K8S_KUBECONFIG",
        description="a kubeconfig file; default the in-cluster service account, else ~/.kube/config",
    )
    k8s_image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = Field(
        default=None,
        validation_alias="K8S_IMAGE_PULL_POLICY",
        description="the steps' imagePullPolicy; default Kubernetes's",
    )
    k8s_service_account: str | None = Field(
        default=None,
        validation_alias="K8S_SERVICE_ACCOUNT",
        description="the step Pods' service account (image pull secrets)",
    )
    k8s_pull_grace_seconds: float = Field(
        default=60.0,
        gt=0,
        validation_alias="K8S_PULL_GRACE_SECONDS",
        description="how long ErrImagePull may last before the step counts as stuck",
    )
    shutdown_grace_seconds: float = Field(
        default=30.0,
        ge=0,
        validation_alias="SHUTDOWN_GRACE_SECONDS",
        description="seconds an executor lets running jobs finish after SIGTERM; the rest go back to the queue",
    )
    sweep_seconds: float = Field(
        default=30.0,
        gt=0,
        validation_alias="HADES_SWEEP_SECONDS",
        description="seconds between an executor's sweeps for containers and volumes that crashed attempts left",
    )
    log_max_bytes_per_job: int = Field(
        default=16 * 1024 * 1024,
        gt=0,
        validation_alias="LOG_MAX_BYTES_PER_JOB",
        description="bytes of output one job keeps; the rest is cut with a notice",
    )
    log_max_line_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        validation_alias="LOG_MAX_LINE_BYTES",
        description="bytes one log line keeps; the rest is cut with a notice",
    )
    max_parallelism: int = Field(
        default=0,
        ge=0,
        validation_alias="MAX_PARALLELISM",
        description="jobs running at once across every executor (leases in KV HADES_SLOTS); 0 = no cap (the "
        "operator: 100)",
    )
    executor_labels: str = Field(
        default="",
        validation_alias="HADES_EXECUTOR_LABELS",
        description="key=value,... advertised for job constraints, over the detected os, arch, cpu, memory",
    )

    @field_validator("executor_labels")
    @classmethod
    def _labels_parse(cls, value: str) -> str:
        parse_labels(value)  # a bad label stops the process at start-up, naming it
        return value
