"""Every setting Hades reads, in one place: environment variables (and an optional ``.env``).

Names follow the Go Hades where it has one (``NATS_URL``, ``API_PORT``, ``AUTH_KEY``, ``CONCURRENCY``,
``DOCKER_*``); the rest are ours and start with ``HADES_`` where a bare name would be ambiguous.
"""

from __future__ import annotations

import os
import socket
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hades.core.constraints import parse_labels
from hades.core.urls import CallbackPolicy


class PullPolicy(StrEnum):
    """When the Docker executor pulls a step's image."""

    IF_NOT_PRESENT = "if-not-present"
    ALWAYS = "always"
    NEVER = "never"


def _default_executor_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Settings(BaseSettings):
    """The effective configuration of one Hades process."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    debug: bool = Field(default=False, validation_alias="DEBUG")

    # NATS
    nats_url: str | None = Field(default=None, validation_alias="NATS_URL")
    nats_username: str | None = Field(default=None, validation_alias="NATS_USERNAME")
    nats_password: str | None = Field(default=None, validation_alias="NATS_PASSWORD")
    nats_tls_enabled: bool = Field(default=False, validation_alias="NATS_TLS_ENABLED")
    nats_port: int = Field(default=4222, validation_alias="NATS_PORT", description="embedded server's port")
    nats_sync_interval: str | None = Field(
        default=None,
        validation_alias="NATS_SYNC_INTERVAL",
        description="embedded server's fsync interval (e.g. 'always', '10s'); default the server's 2m",
    )
    data_dir: Path = Field(default=Path(".hades"), validation_alias="HADES_DATA_DIR")
    streams_file: Path | None = Field(default=None, validation_alias="HADES_STREAMS_FILE")
    stream_replicas: int | None = Field(
        default=None,
        ge=1,
        le=5,
        validation_alias="HADES_STREAM_REPLICAS",
        description="`streams apply`: copies of every stream, bucket and object store (3 on a NATS cluster)",
    )
    snapshot_seconds: float = Field(default=300.0, ge=0, validation_alias="HADES_SNAPSHOT_SECONDS")
    publish_timeout: float = Field(default=5.0, validation_alias="HADES_PUBLISH_TIMEOUT")

    # observability
    metrics_port: int = Field(default=9090, ge=0, validation_alias="METRICS_PORT", description="0 = no /metrics")
    otel_endpoint: str | None = Field(default=None, validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    otel_traces_endpoint: str | None = Field(default=None, validation_alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

    # API
    api_host: str = Field(default="0.0.0.0", validation_alias="API_HOST")
    api_port: int = Field(default=8080, validation_alias="API_PORT")
    auth_key: str = Field(default="", validation_alias="AUTH_KEY")
    log_manager_port: int = Field(default=8081, validation_alias="LOG_MANAGER_PORT")
    api_url: str | None = Field(default=None, validation_alias="HADES_API_URL")
    max_request_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        validation_alias="MAX_REQUEST_BYTES",
        description="the largest request body the API reads; a larger one is refused with 413",
    )

    # where callback_url and status_callback_url may point (against SSRF); see docs/security.md
    callback_allowed_hosts: str = Field(
        default="",
        validation_alias="CALLBACK_ALLOWED_HOSTS",
        description="comma-separated host names, patterns like *.example.com, and CIDR ranges; empty = any host",
    )
    callback_deny_private: bool = Field(
        default=False,
        validation_alias="CALLBACK_DENY_PRIVATE",
        description="refuse loopback, private, link-local, unique-local and multicast addresses after resolution",
    )

    # dashboard: on only when the username, the bcrypt hash and the session secret are all set
    dashboard_username: str = Field(default="", validation_alias="DASHBOARD_USERNAME")
    dashboard_password_hash: str = Field(default="", validation_alias="DASHBOARD_PASSWORD_HASH", repr=False)
    dashboard_session_secret: str = Field(default="", validation_alias="DASHBOARD_SESSION_SECRET", repr=False)
    dashboard_session_ttl: str = Field(default="12h", validation_alias="DASHBOARD_SESSION_TTL")
    dashboard_job_retention: str = Field(default="1h", validation_alias="DASHBOARD_JOB_RETENTION")
    dashboard_cookie_insecure: bool = Field(default=False, validation_alias="DASHBOARD_COOKIE_INSECURE")
    dashboard_trusted_proxies: str = Field(default="", validation_alias="DASHBOARD_TRUSTED_PROXIES")
    hades_version: str = Field(default="dev", validation_alias="HADES_VERSION")
    secret_redact_mode: str = Field(default="smart", validation_alias="SECRET_REDACT_MODE")
    secret_key_patterns: str = Field(default="", validation_alias="SECRET_KEY_PATTERNS")

    # executor
    executor: Literal["docker", "k8s", "k8s-operator", "process"] = Field(
        default="docker",
        validation_alias="HADES_EXECUTOR",
        description="k8s-operator: queued attempts become BuildJobs that `hades operator` runs",
    )
    process_workspaces: Path | None = Field(default=None, validation_alias="HADES_PROCESS_WORKSPACES")
    executor_id: str = Field(default_factory=_default_executor_id, validation_alias="HADES_EXECUTOR_ID")
    concurrency: int = Field(default=1, ge=1, validation_alias="CONCURRENCY")
    docker_host: str | None = Field(default=None, validation_alias="DOCKER_HOST")
    docker_script_executor: str = Field(default="/bin/sh -c", validation_alias="DOCKER_SCRIPT_EXECUTOR")
    docker_pull_policy: PullPolicy = Field(default=PullPolicy.IF_NOT_PRESENT, validation_alias="DOCKER_PULL_POLICY")
    docker_cpu_limit: int | None = Field(default=None, ge=0, validation_alias="DOCKER_CPU_LIMIT")
    docker_memory_limit: str | None = Field(default=None, validation_alias="DOCKER_MEMORY_LIMIT")
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
    shutdown_grace_seconds: float = Field(default=30.0, ge=0, validation_alias="SHUTDOWN_GRACE_SECONDS")
    sweep_seconds: float = Field(default=30.0, gt=0, validation_alias="HADES_SWEEP_SECONDS")
    log_max_bytes_per_job: int = Field(default=16 * 1024 * 1024, gt=0, validation_alias="LOG_MAX_BYTES_PER_JOB")
    log_max_line_bytes: int = Field(default=1024 * 1024, gt=0, validation_alias="LOG_MAX_LINE_BYTES")
    max_parallelism: int = Field(default=0, ge=0, validation_alias="MAX_PARALLELISM")
    executor_labels: str = Field(
        default="",
        validation_alias="HADES_EXECUTOR_LABELS",
        description="key=value,... advertised for job constraints, over the detected os, arch, cpu, memory",
    )

    # operator (`hades operator`): BuildJobs reconciled into Pods in K8S_NAMESPACE; MAX_PARALLELISM 0 means 100
    watch_namespace: str | None = Field(
        default=None, validation_alias="WATCH_NAMESPACE", description="whose BuildJobs; empty: every namespace"
    )
    delete_on_complete: bool = Field(default=True, validation_alias="DELETE_ON_COMPLETE")
    pod_name: str | None = Field(
        default=None, validation_alias="POD_NAME", description="the operator's leader-election identity"
    )
    health_probe_bind_address: str = Field(default=":8081", validation_alias="HEALTH_PROBE_BIND_ADDRESS")
    leader_elect: bool = Field(default=True, validation_alias="LEADER_ELECT")

    # notifier: logs forwarded to callback_url
    log_forward_max_attempts: int = Field(default=6, ge=1, validation_alias="LOG_FORWARD_MAX_ATTEMPTS")
    log_forward_timeout: float = Field(default=10.0, gt=0, lt=30, validation_alias="LOG_FORWARD_TIMEOUT")
    log_forward_backoff_base: float = Field(default=1.0, ge=0, validation_alias="LOG_FORWARD_BACKOFF_BASE")
    log_forward_backoff_max: float = Field(default=60.0, ge=0, validation_alias="LOG_FORWARD_BACKOFF_MAX")

    # notifier: the job-status webhook sent to status_callback_url
    webhook_max_attempts: int = Field(default=8, ge=1, validation_alias="WEBHOOK_MAX_ATTEMPTS")
    webhook_timeout: float = Field(default=10.0, gt=0, lt=30, validation_alias="WEBHOOK_TIMEOUT")
    webhook_backoff_base: float = Field(default=1.0, ge=0, validation_alias="WEBHOOK_BACKOFF_BASE")
    webhook_backoff_max: float = Field(default=300.0, ge=0, validation_alias="WEBHOOK_BACKOFF_MAX")
    webhook_secret: str = Field(default="", validation_alias="WEBHOOK_SECRET", repr=False)

    # scheduler
    max_attempts: int = Field(default=3, ge=1, validation_alias="MAX_ATTEMPTS")
    priority_aging_seconds: float | None = Field(default=None, gt=0, validation_alias="PRIORITY_AGING_SECONDS")
    watchdog_seconds: float = Field(default=2.0, gt=0, validation_alias="HADES_WATCHDOG_SECONDS")
    unschedulable_timeout: float | None = Field(
        default=None,
        gt=0,
        validation_alias="UNSCHEDULABLE_TIMEOUT",
        description="seconds a job no live executor can take waits before it fails; default: forever",
    )

    @field_validator("executor_labels")
    @classmethod
    def _labels_parse(cls, value: str) -> str:
        parse_labels(value)  # a bad label stops the process at start-up, naming it
        return value

    @field_validator("callback_allowed_hosts")
    @classmethod
    def _callback_hosts_parse(cls, value: str) -> str:
        CallbackPolicy.parse(value)  # a bad entry stops the process at start-up, naming the entry
        return value

    @property
    def callback_policy(self) -> CallbackPolicy:
        """Where callback URLs may point."""
        return CallbackPolicy.parse(self.callback_allowed_hosts, self.callback_deny_private)

    @property
    def process_root(self) -> Path:
        """Where the process executor makes its workspaces."""
        return self.process_workspaces or self.data_dir / "workspaces"

    @property
    def client_api_url(self) -> str:
        """Where the CLI finds a running Hades."""
        return self.api_url or f"http://localhost:{self.api_port}"


def load_settings() -> Settings:
    """Read the environment now (a fresh object each call, so tests can change the environment)."""
    return Settings()
