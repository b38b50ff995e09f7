"""Every setting Hades reads, in one place: environment variables (and an optional ``.env``).

Names follow the Go Hades where it has one (``NATS_URL``, ``API_PORT``, ``AUTH_KEY``, ``CONCURRENCY``,
``DOCKER_*``); the rest are ours and start with ``HADES_`` where a bare name would be ambiguous.

Every setting has a one-line ``description`` (units included): ``.env.example`` and ``docs/configuration.md`` are
generated from them (``python -m hades.docs``). A secret is marked ``json_schema_extra=SECRET``: ``hades config`` and
the generated files never show its value.
"""

from __future__ import annotations

import os
import socket
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Final, Literal

from pydantic import Field, field_validator
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from hades.core.constraints import parse_labels
from hades.core.urls import CallbackPolicy

SECRET: Final[JsonDict] = {"secret": True}
"""The ``json_schema_extra`` of a setting whose value must never be shown."""


def is_secret(field: FieldInfo) -> bool:
    """Whether the setting ``field`` holds a secret (marked with :data:`SECRET`)."""
    extra = field.json_schema_extra
    return isinstance(extra, dict) and extra.get("secret") is True


class PullPolicy(StrEnum):
    """When the Docker executor pulls a step's image."""

    IF_NOT_PRESENT = "if-not-present"
    ALWAYS = "always"
    NEVER = "never"


def _default_executor_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Settings(BaseSettings):
    """The effective configuration of one Hades process."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        env_ignore_empty=True,  # "" is unset, as in Go
    )

    debug: bool = Field(default=False, validation_alias="DEBUG", description="debug logging")

    # NATS
    nats_url: str | None = Field(
        default=None,
        validation_alias="NATS_URL",
        description="the NATS server(s), comma-separated; unset: `hades up` starts its own, other roles use "
        "nats://localhost:4222",
    )
    nats_username: str | None = Field(default=None, validation_alias="NATS_USERNAME", description="the NATS user")
    nats_password: str | None = Field(
        default=None,
        validation_alias="NATS_PASSWORD",
        repr=False,
        json_schema_extra=SECRET,
        description="the NATS user's password",
    )
    nats_tls_enabled: bool = Field(
        default=False, validation_alias="NATS_TLS_ENABLED", description="connect to NATS over TLS"
    )
    nats_port: int = Field(
        default=4222, validation_alias="NATS_PORT", description="the embedded server's port (`hades up` alone)"
    )
    nats_sync_interval: str | None = Field(
        default=None,
        validation_alias="NATS_SYNC_INTERVAL",
        description="the embedded server's fsync interval, e.g. 'always' (about 3x slower appends) or '10s'; "
        "unset: the server's 2 min",
    )
    data_dir: Path = Field(
        default=Path(".hades"),
        validation_alias="HADES_DATA_DIR",
        description="where `hades up` keeps the embedded server's JetStream store",
    )
    streams_file: Path | None = Field(
        default=None,
        validation_alias="HADES_STREAMS_FILE",
        description="the topology `streams apply` applies; unset: the streams.yaml shipped with Hades",
    )
    stream_replicas: int | None = Field(
        default=None,
        ge=1,
        le=5,
        validation_alias="HADES_STREAM_REPLICAS",
        description="`streams apply`: copies of every stream, bucket and object store (3 on a NATS cluster)",
    )
    snapshot_seconds: float = Field(
        default=300.0,
        ge=0,
        validation_alias="HADES_SNAPSHOT_SECONDS",
        description="seconds between snapshots of the read models to the object store (0 = never; start-up then "
        "replays the whole log)",
    )
    publish_timeout: float = Field(
        default=5.0,
        validation_alias="HADES_PUBLISH_TIMEOUT",
        description="seconds an append (an event, a log batch) waits for JetStream's acknowledgement",
    )

    # observability
    metrics_port: int = Field(
        default=9090,
        ge=0,
        validation_alias="METRICS_PORT",
        description="where a process without the API role serves /metrics, on API_HOST (0 = not at all)",
    )
    otel_endpoint: str | None = Field(
        default=None,
        validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT",
        description="turns tracing on: the collector's OTLP/HTTP base URL (/v1/traces is added)",
    )
    otel_traces_endpoint: str | None = Field(
        default=None,
        validation_alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        description="turns tracing on: the exact OTLP/HTTP traces URL",
    )

    # API
    api_host: str = Field(
        default="0.0.0.0", validation_alias="API_HOST", description="the address the API and /metrics listen on"
    )
    api_port: int = Field(default=8080, validation_alias="API_PORT", description="the API's port")
    auth_key: str = Field(
        default="",
        validation_alias="AUTH_KEY",
        repr=False,
        json_schema_extra=SECRET,
        description="the Basic-auth password (user `hades`) for /build and /jobs...; empty: open",
    )
    log_manager_port: int = Field(
        default=8081, validation_alias="LOG_MANAGER_PORT", description="where `hades logmanager` listens"
    )
    api_url: str | None = Field(
        default=None,
        validation_alias="HADES_API_URL",
        description="where the CLI finds a running Hades, and what executors give pipeline stages as their "
        "HADES_API_URL; unset: http://localhost:$API_PORT",
    )
    max_request_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        validation_alias="MAX_REQUEST_BYTES",
        description="bytes: the largest request body the API reads; a larger one is refused with 413",
    )

    # where callback_url and status_callback_url may point (against SSRF); see docs/security.md
    callback_allowed_hosts: str = Field(
        default="",
        validation_alias="CALLBACK_ALLOWED_HOSTS",
        description="where callback URLs may point: comma-separated host names, patterns like *.example.com, and "
        "CIDR ranges; empty = any host",
    )
    callback_deny_private: bool = Field(
        default=False,
        validation_alias="CALLBACK_DENY_PRIVATE",
        description="refuse callback URLs to loopback, private, link-local, unique-local and multicast addresses "
        "after resolution",
    )

    # dashboard: on only when the username, the bcrypt hash and the session secret are all set
    dashboard_username: str = Field(
        default="",
        validation_alias="DASHBOARD_USERNAME",
        description="the dashboard's login; with the password hash and the session secret it turns the dashboard on",
    )
    dashboard_password_hash: str = Field(
        default="",
        validation_alias="DASHBOARD_PASSWORD_HASH",
        repr=False,
        json_schema_extra=SECRET,
        description="a bcrypt hash of the dashboard's password",
    )
    dashboard_session_secret: str = Field(
        default="",
        validation_alias="DASHBOARD_SESSION_SECRET",
        repr=False,
        json_schema_extra=SECRET,
        description="signs dashboard sessions: at least 32 characters, or start-up fails",
    )
    dashboard_session_ttl: str = Field(
        default="12h",
        validation_alias="DASHBOARD_SESSION_TTL",
        description="how long a dashboard login lasts (Go duration syntax: 90m, 1h30m)",
    )
    dashboard_job_retention: str = Field(
        default="1h",
        validation_alias="DASHBOARD_JOB_RETENTION",
        description="how long ended jobs stay in the dashboard's list (they stay readable by id)",
    )
    dashboard_cookie_insecure: bool = Field(
        default=False,
        validation_alias="DASHBOARD_COOKIE_INSECURE",
        description="drop Secure from the session cookie, for plain-HTTP development only",
    )
    dashboard_trusted_proxies: str = Field(
        default="",
        validation_alias="DASHBOARD_TRUSTED_PROXIES",
        description="comma-separated addresses or CIDR ranges of proxies whose X-Forwarded-For the login lockout "
        "believes; empty = none",
    )
    hades_version: str = Field(
        default="dev", validation_alias="HADES_VERSION", description="the version the dashboard shows"
    )
    secret_redact_mode: str = Field(
        default="smart",
        validation_alias="SECRET_REDACT_MODE",
        description="the dashboard's metadata masking: smart (values that look secret) or all (every value)",
    )
    secret_key_patterns: str = Field(
        default="",
        validation_alias="SECRET_KEY_PATTERNS",
        description="a regex of metadata keys whose values are masked; empty = the built-in pattern",
    )

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

    # artifacts (docs/artifacts.md): kept in the object store HADES_ARTIFACTS, whose retention streams.yaml sets
    artifact_max_bytes: int = Field(
        default=256 * 2**20,
        gt=0,
        validation_alias="ARTIFACT_MAX_BYTES",
        description="bytes of artifacts kept per job (what does not fit is listed as skipped), and of inputs placed",
    )
    artifact_fetch_timeout: float = Field(
        default=60.0, gt=0, validation_alias="ARTIFACT_FETCH_TIMEOUT", description="seconds to fetch one URL input"
    )

    # pipelines (docs/pipelines.md)
    max_pipeline_stages: int = Field(
        default=50,
        ge=1,
        validation_alias="MAX_PIPELINE_STAGES",
        description="stages one pipeline may have, declared plus added by its stages",
    )
    pipeline_token_key: str = Field(
        default="",
        repr=False,
        json_schema_extra=SECRET,
        validation_alias="HADES_PIPELINE_TOKEN_KEY",
        description="the key that signs pipelines' tokens (API and executors alike); empty: one generated once and "
        "kept in KV HADES_SECRETS",
    )

    # operator (`hades operator`): BuildJobs reconciled into Pods in K8S_NAMESPACE; MAX_PARALLELISM 0 means 100
    watch_namespace: str | None = Field(
        default=None,
        validation_alias="WATCH_NAMESPACE",
        description="the operator: whose BuildJobs it reconciles; empty: every namespace",
    )
    delete_on_complete: bool = Field(
        default=True,
        validation_alias="DELETE_ON_COMPLETE",
        description="the operator: delete a BuildJob once its job ended (its Pods go either way)",
    )
    pod_name: str | None = Field(
        default=None, validation_alias="POD_NAME", description="the operator's leader-election identity"
    )
    health_probe_bind_address: str = Field(
        default=":8081",
        validation_alias="HEALTH_PROBE_BIND_ADDRESS",
        description="the operator's /healthz and /readyz ([HOST]:PORT)",
    )
    leader_elect: bool = Field(
        default=True,
        validation_alias="LEADER_ELECT",
        description="the operator campaigns for a Lease so that only one replica reconciles",
    )

    # notifier: logs forwarded to callback_url
    log_forward_max_attempts: int = Field(
        default=6,
        ge=1,
        validation_alias="LOG_FORWARD_MAX_ATTEMPTS",
        description="attempts in all to POST a job's logs to its callback_url",
    )
    log_forward_timeout: float = Field(
        default=10.0,
        gt=0,
        lt=30,
        validation_alias="LOG_FORWARD_TIMEOUT",
        description="seconds (below 30, the consumer's ack wait) for one log-forwarding attempt",
    )
    log_forward_backoff_base: float = Field(
        default=1.0,
        ge=0,
        validation_alias="LOG_FORWARD_BACKOFF_BASE",
        description="seconds: the log-forwarding backoff's first ceiling (doubled per attempt, full jitter)",
    )
    log_forward_backoff_max: float = Field(
        default=60.0, ge=0, validation_alias="LOG_FORWARD_BACKOFF_MAX", description="seconds: that backoff's cap"
    )

    # notifier: the job-status webhook sent to status_callback_url
    webhook_max_attempts: int = Field(
        default=8,
        ge=1,
        validation_alias="WEBHOOK_MAX_ATTEMPTS",
        description="attempts in all to POST the job-status webhook; the last failed one is recorded final",
    )
    webhook_timeout: float = Field(
        default=10.0,
        gt=0,
        lt=30,
        validation_alias="WEBHOOK_TIMEOUT",
        description="seconds (below 30, the consumer's ack wait) for one attempt: connect, send, response head",
    )
    webhook_backoff_base: float = Field(
        default=1.0,
        ge=0,
        validation_alias="WEBHOOK_BACKOFF_BASE",
        description="seconds: the webhook backoff's first ceiling (doubled per attempt, full jitter)",
    )
    webhook_backoff_max: float = Field(
        default=300.0, ge=0, validation_alias="WEBHOOK_BACKOFF_MAX", description="seconds: that backoff's cap"
    )
    webhook_secret: str = Field(
        default="",
        validation_alias="WEBHOOK_SECRET",
        repr=False,
        json_schema_extra=SECRET,
        description="signs every webhook attempt (X-Hades-Signature) when set",
    )

    # scheduler
    max_attempts: int = Field(
        default=3,
        ge=1,
        validation_alias="MAX_ATTEMPTS",
        description=(
            "attempts a job gets when its executors (or its containers, or their engine) are lost; then it fails"
            " with a reason that says so"
        ),
    )
    priority_aging_seconds: float | None = Field(
        default=None,
        gt=0,
        validation_alias="PRIORITY_AGING_SECONDS",
        description="seconds a job waits in its queue before it moves up one priority; unset: never",
    )
    watchdog_seconds: float = Field(
        default=2.0,
        gt=0,
        validation_alias="HADES_WATCHDOG_SECONDS",
        description="seconds between the scheduler's looks for jobs on lost executors and jobs to promote",
    )
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
