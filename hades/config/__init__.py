"""Every setting Hades reads: environment variables (and an optional ``.env``).

Names follow the Go Hades where it has one (``NATS_URL``, ``API_PORT``, ``AUTH_KEY``, ``CONCURRENCY``,
``DOCKER_*``); the rest are ours and start with ``HADES_`` where a bare name would be ambiguous.

:class:`Settings` is composed of one class per concept, each in a module of this package (``nats``, ``api``,
``executor``...); a comment on a line of its own heads each section of the documents. Every setting has a one-line
``description`` (units included): ``.env.example`` and ``docs/configuration.md`` are generated from them
(``python -m hades.docs``). A secret is marked ``json_schema_extra=SECRET``: ``hades config`` and the generated files
never show its value.
"""

from __future__ import annotations

from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

from hades.config.api import ApiSettings, CallbackSettings
from hades.config.dashboard import DashboardSettings
from hades.config.executor import ExecutorSettings, PullPolicy
from hades.config.fields import SECRET, is_secret
from hades.config.jobs import ArtifactSettings, JobTimeoutSettings, PipelineSettings
from hades.config.nats import NatsSettings
from hades.config.notifier import LogForwardSettings, WebhookSettings
from hades.config.observability import GeneralSettings, ObservabilitySettings
from hades.config.operator import OperatorSettings
from hades.config.scheduler import SchedulerSettings

__all__ = ["SECRET", "PullPolicy", "Settings", "is_secret", "load_settings"]


# pydantic orders the fields from the last base to the first, so the bases are listed last section first: the
# documents, `hades config` and validation errors read general, NATS, observability, API... scheduler.
class Settings(
    SchedulerSettings,
    WebhookSettings,
    LogForwardSettings,
    OperatorSettings,
    PipelineSettings,
    ArtifactSettings,
    JobTimeoutSettings,
    ExecutorSettings,
    DashboardSettings,
    CallbackSettings,
    ApiSettings,
    ObservabilitySettings,
    NatsSettings,
    GeneralSettings,
    BaseSettings,
):
    """The effective configuration of one Hades process."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        env_ignore_empty=True,  # "" is unset, as in Go
    )

    @property
    def process_root(self) -> Path:
        """Where the process executor makes its workspaces."""
        return self.process_workspaces or self.data_dir / "workspaces"


def load_settings() -> Settings:
    """Read the environment now (a fresh object each call, so tests can change the environment)."""
    return Settings()
