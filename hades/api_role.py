"""Putting the API role together (and the separate Log Manager's): its services, the app, and a server that stops
in two steps.

While the process drains (its executor lets running attempts finish) the API keeps answering from views that keep
following the log, and live follow streams stay open, so a client sees the jobs that finish meanwhile end. Only then
is it stopped: the streams first end on their own (one that has its job's end sends it first), then the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn
from nats.aio.client import Client
from prometheus_client import CollectorRegistry

from hades.adapters.nats.artifacts import ArtifactStore
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.clock import SystemClock
from hades.config import Settings
from hades.http.app import LOG_MANAGER_ROUTES, SECURITY_HEADERS, create_app
from hades.http.dashboard.config import DashboardConfig
from hades.http.dashboard.dashboard import Dashboard
from hades.http.dashboard.feed import JobFeed
from hades.http.fast_build import BuildFastPath
from hades.http.services import ApiServices
from hades.projections.runner import ProjectionRunner
from hades.projections.views import ReadModels
from hades.tracing import TRACING_OFF, Tracing
from hades.workers.webhooks import WebhookSender

log = logging.getLogger(__name__)

#: How long a stopping API keeps taking new connections after its streams were told to end: a follow stream ends
#: within its next quiet second (``LogStore.follow``), and a client polling a job that just ended gets its end.
LAST_CALL = 1.0
#: How long the open streams then get to finish, before uvicorn cancels them.
STREAMS_PATIENCE = 5


class _ApiServer(uvicorn.Server):
    """uvicorn without its own signal handling: the process's supervisor decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass(frozen=True)
class ApiRole:
    """A running API (or Log Manager): its services and the task that serves them."""

    services: ApiServices
    dashboard: Dashboard | None
    server: uvicorn.Server
    task: asyncio.Task[None]

    async def stop(self, last_call: bool = True) -> None:
        """End the live streams (each sends what it has first), then stop answering (after ``LAST_CALL`` more
        seconds of new connections, with ``last_call``); a stream still open after ``STREAMS_PATIENCE`` is
        cancelled by uvicorn."""
        self.services.stopping.set()
        if self.dashboard is not None:
            self.dashboard.feed.close()
        if last_call:
            await asyncio.sleep(LAST_CALL)
        self.server.should_exit = True
        await asyncio.wait({self.task}, timeout=STREAMS_PATIENCE + 5)


def dashboard_of(
    config: DashboardConfig | None, views: ReadModels, projections: ProjectionRunner, clock: SystemClock
) -> Dashboard | None:
    """The dashboard over this process's views, its live feed fed by their projection; None when it is off."""
    if config is None:
        return None
    dashboard = Dashboard(config, JobFeed(views.jobs, config.redactor, clock.now))
    projections.observe(dashboard.feed.on_event)
    return dashboard


def start_api(
    settings: Settings,
    nc: Client,
    store: NatsEventStore,
    clock: SystemClock,
    views: ReadModels,
    projections: ProjectionRunner,
    webhooks: WebhookSender | None = None,
    dashboard: Dashboard | None = None,
    tracing: Tracing = TRACING_OFF,
    registry: CollectorRegistry | None = None,
    pipeline_key: bytes = b"",
    log_manager: bool = False,
) -> ApiRole:
    """The API (or with ``log_manager`` the Log Manager's routes alone) served once the views caught up."""
    services = ApiServices(
        store=store,
        logs=NatsLogStore(nc),
        views=views,
        projections=projections,
        clock=clock,
        auth_key=settings.auth_key,
        callbacks=settings.callback_policy,
        artifacts=ArtifactStore(nc),
        webhooks=webhooks,
        tracer=tracing.tracer,
        registry=registry,
        pipeline_token_key=pipeline_key,
        max_pipeline_stages=settings.max_pipeline_stages,
        max_attempts=settings.max_attempts,
        timeouts=settings.timeout_policy,
        connected=lambda: nc.is_connected,
    )
    app = create_app(
        services, LOG_MANAGER_ROUTES if log_manager else None, dashboard, settings.max_request_bytes, settings.debug
    )
    config = uvicorn.Config(
        app if log_manager else BuildFastPath(app, services, settings.max_request_bytes, SECURITY_HEADERS),
        host=settings.api_host,
        port=settings.log_manager_port if log_manager else settings.api_port,
        log_level="debug" if settings.debug else "warning",
        access_log=False,  # the Go Hades writes none either; uvicorn would format a record per request
        lifespan="off",
        timeout_graceful_shutdown=STREAMS_PATIENCE,
    )
    server = _ApiServer(config)

    async def serve_when_caught_up() -> None:
        # Answer only once the views hold everything that was in the log at start, so a restarted API never
        # reports a known job as missing.
        target = await store.stream_last_seq()
        while not await projections.wait_for(target, timeout=10):
            log.info("replaying the event log: %d of %d events", projections.applied, target)
        await server.serve()

    task = asyncio.create_task(serve_when_caught_up(), name="logmanager" if log_manager else "api")
    return ApiRole(services, dashboard, server, task)
