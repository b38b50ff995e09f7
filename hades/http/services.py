"""What the HTTP handlers need, handed in by whoever builds the app (no globals chosen at import time)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry import trace
from prometheus_client import CollectorRegistry

from hades.adapters.nats.artifacts import ArtifactStore
from hades.core.ports import Clock, EventStore, LogStore
from hades.core.stages import DEFAULT_MAX_STAGES
from hades.core.timeouts import TimeoutPolicy
from hades.core.urls import CallbackPolicy
from hades.projections.jobs import JobsView
from hades.projections.runner import ProjectionRunner
from hades.projections.views import ReadModels
from hades.workers.webhooks import WebhookSender


@dataclass(frozen=True)
class ApiServices:
    """The API's collaborators."""

    store: EventStore
    logs: LogStore
    views: ReadModels
    projections: ProjectionRunner
    clock: Clock
    auth_key: str = ""
    webhooks: WebhookSender | None = None  # for manual redeliveries; None where the API is not to send any
    tracer: trace.Tracer = field(default_factory=trace.NoOpTracer)
    registry: CollectorRegistry | None = None  # the process's own metrics, rendered on /metrics with the views'
    callbacks: CallbackPolicy = field(default_factory=CallbackPolicy)  # where a job's callback URLs may point
    artifacts: ArtifactStore | None = None  # the jobs' kept files; None where the API serves none
    pipeline_token_key: bytes = b""  # signs pipelines' tokens; empty: POST /jobs/{id}/stages refuses every token
    max_pipeline_stages: int = DEFAULT_MAX_STAGES  # declared plus added stages of one pipeline
    max_attempts: int | None = None  # MAX_ATTEMPTS: each accepted job carries it as its attempt budget
    timeouts: TimeoutPolicy = field(default_factory=TimeoutPolicy)  # HADES_*_TIMEOUT_SECONDS for each job
    connected: Callable[[], bool] = field(default=lambda: True)  # the process's NATS connection is up (/health)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)  # set once the API stops: live streams end

    @property
    def jobs(self) -> JobsView:
        """The jobs read model."""
        return self.views.jobs
