"""Putting a Hades process together: connect, check the topology, start the roles asked for, stop cleanly.

``hades up`` runs every role in one process over an embedded nats-server; ``hades api|scheduler|executor`` run
one role each against ``NATS_URL``. Each role is stateless over JetStream, so any number of each can run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from typing import NoReturn

from nats.aio.client import Client

from hades.adapters.http_delivery import HttpDelivery
from hades.adapters.nats.connection import UNAVAILABLE, connect, log_failure
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.heartbeats import Heartbeats
from hades.adapters.nats.log_store import NatsLogStore
from hades.adapters.nats.pipeline_tokens import token_key
from hades.adapters.nats.pools import Pools
from hades.adapters.nats.snapshots import SnapshotStore
from hades.adapters.nats.topology import load_topology, verify
from hades.api_role import ApiRole, dashboard_of, start_api
from hades.clock import SystemClock
from hades.config import Settings
from hades.executor_role import executor_worker, run_operator_role
from hades.http.dashboard.config import DashboardConfig
from hades.metrics import MetricsServer, ProcessMetrics
from hades.projections.jobs import JobsView
from hades.projections.runner import ProjectionRunner
from hades.projections.snapshot import restore, take
from hades.projections.views import ReadModels
from hades.timing_log import TimingLog
from hades.tracing import Tracing, setup_tracing
from hades.workers.consumer import PullConsumer
from hades.workers.executor import ExecutorWorker
from hades.workers.notifier import LogForwarder, NotifierSettings, notifier_consumer
from hades.workers.pipelines import PipelineCoordinator, pipelines_consumer
from hades.workers.scheduler import scheduler_consumer
from hades.workers.watchdog import Watchdog, WatchdogPolicy
from hades.workers.webhooks import WebhookSender, WebhookSettings, webhook_consumer

log = logging.getLogger(__name__)

#: How long a start-up keeps trying while NATS cannot answer yet.
_STARTUP_PATIENCE = 60.0
#: How long a stopping API waits for its views to hold the end of the log before it ends its streams.
_SETTLE_PATIENCE = 5.0


@dataclass(frozen=True)
class Roles:
    """Which roles this process runs."""

    api: bool = False
    scheduler: bool = False
    executor: bool = False
    logmanager: bool = False
    notifier: bool = False
    operator: bool = False

    @classmethod
    def all(cls) -> Roles:
        """What ``hades up`` runs (everything but the separate Log Manager)."""
        return cls(api=True, scheduler=True, executor=True, notifier=True)

    def names(self) -> str:
        """The roles on, for the log."""
        return ", ".join(name for name, on in vars(self).items() if on)

    def service(self) -> str:
        """The tracing service name: ``hades-<role>``, ``hades-up`` for every role in one process."""
        if self == Roles.all():
            return "hades-up"
        return "hades-" + "-".join(name for name, on in vars(self).items() if on)


async def serve(
    settings: Settings,
    roles: Roles,
    nats_url: str,
    stop: asyncio.Event | None = None,
    tracing: Tracing | None = None,
) -> None:
    """Run the roles until SIGINT/SIGTERM (or ``stop`` is set), then stop them in order.

    ``tracing`` replaces what the settings ask for (tests hand in an in-memory exporter); the caller then owns it.
    A start-up that meets a NATS unable to answer yet (a node restarting, a cluster electing leaders) is undone and
    tried again for up to a minute, rather than the process exiting in the middle of a fault it would outlive.
    """
    stop = stop or _stop_on_signals()
    deadline = asyncio.get_running_loop().time() + _STARTUP_PATIENCE
    while True:
        up = asyncio.Event()
        try:
            await _serve(settings, roles, nats_url, stop, tracing, up)
            log.info("hades stopped")
            return
        except UNAVAILABLE as error:
            if up.is_set() or stop.is_set() or asyncio.get_running_loop().time() > deadline:
                raise
            log.warning("NATS did not answer while starting (%r); starting again", error)
            await asyncio.sleep(1)


async def _serve(
    settings: Settings,
    roles: Roles,
    nats_url: str,
    stop: asyncio.Event,
    tracing: Tracing | None,
    up: asyncio.Event,
) -> None:
    """One start of the roles (``up`` set once all of them are), run until ``stop``."""
    dashboard_config = DashboardConfig.from_settings(settings) if roles.api else None  # a bad setting fails here
    nc = await connect(nats_url, settings.nats_username, settings.nats_password, settings.nats_tls_enabled)
    await verify(nc.jetstream(), load_topology(settings.streams_file))
    metrics = ProcessMetrics()  # this process's own families, on the API's /metrics or on METRICS_PORT
    store = NatsEventStore(nc, settings.publish_timeout, metrics.append_seconds)
    clock = SystemClock()
    tasks: list[asyncio.Task[None]] = []
    stack = contextlib.AsyncExitStack()
    tracing = tracing or _tracing(settings, roles, stack)
    worker: ExecutorWorker | None = None
    executing: asyncio.Task[None] | None = None
    try:
        if roles.api or roles.scheduler or roles.logmanager:
            live_from = await store.stream_last_seq()  # the scheduler logs the timing of jobs that end after this
            views, projections = await _read_models(settings, nc, store, tasks)
        # The scheduler's and the notifier's consumers run on the role's own connection (its servers, credentials
        # and endless reconnecting); they are tasks, so they stop before the stack closes their HTTP clients.
        consumers: list[tuple[str, PullConsumer]] = []
        if roles.scheduler:
            projections.observe(TimingLog(views.timing, live_from).on_event)  # one role logs it, live only
            coordinator = PipelineCoordinator(store, clock)
            pools = Pools(nc)  # one registry: a pool the watchdog removes leaves this process's cache at once
            watchdog = _watchdog(settings, nc, store, clock, views.jobs, coordinator, pools)
            tasks.append(asyncio.create_task(watchdog.run(), name="watchdog"))
            consumers.append(("scheduler", scheduler_consumer(nc, store, clock, tracing.tracer, pools, coordinator)))
            consumers.append(("pipelines", pipelines_consumer(nc, coordinator)))
        if roles.notifier:
            consumers.append(("notifier", _notifier(settings, nc, store, clock, stack)))
            consumers.append(("webhooks", webhook_consumer(nc, _webhooks(settings, store, clock, stack))))
        for name, consumer in consumers:
            await consumer.start()
            tasks.append(asyncio.create_task(consumer.run(), name=name))
        if roles.executor:
            worker = await executor_worker(settings, nc, store, clock, stack, tracing, metrics)
            executing = asyncio.create_task(worker.run(), name="executor")
            tasks.append(executing)
        operating = run_operator_role(settings, nc, store, clock, tracing, metrics) if roles.operator else None
        tasks += [asyncio.create_task(operating, name="operator")] if operating is not None else []
        apis: list[ApiRole] = []
        if roles.api:
            key = await token_key(nc, settings.pipeline_token_key)  # checks the tokens of POST /jobs/{id}/stages
            webhooks = _webhooks(settings, store, clock, stack)  # for POST /jobs/{id}/deliveries/redeliver
            dashboard = dashboard_of(dashboard_config, views, projections, clock)
            apis.append(
                start_api(
                    settings, nc, store, clock, views, projections, webhooks, dashboard, tracing, metrics.registry, key
                )
            )
        if roles.logmanager:
            apis.append(start_api(settings, nc, store, clock, views, projections, log_manager=True))
        tasks += [api.task for api in apis]
        _serve_metrics(settings, roles, metrics, nc, stack)
        up.set()
        log.info("hades is up: %s", roles.names())
        await _until_stopped(stop, tasks)
        applied = apis[0].services.projections.applied if apis else 0  # where the log stood when asked to stop
        if worker is not None and executing is not None:
            await _drain(worker, executing, settings.shutdown_grace_seconds, bool(apis))
        await _stop_apis(apis, store, applied)
    finally:
        for task in reversed(tasks):
            await _cancel(task)
        await stack.aclose()
        await nc.close()


def _tracing(settings: Settings, roles: Roles, stack: contextlib.AsyncExitStack) -> Tracing:
    """Tracing as the settings ask, flushed when the process stops (last, after the roles)."""
    tracing = setup_tracing(settings, roles.service())
    stack.push_async_callback(tracing.shutdown)
    return tracing


def _serve_metrics(
    settings: Settings, roles: Roles, metrics: ProcessMetrics, nc: Client, stack: contextlib.AsyncExitStack
) -> None:
    """``/metrics`` on METRICS_PORT for a process without the API (whose own ``/metrics`` includes these), with
    ``/health`` answering 503 while the process's NATS connection is down."""
    if roles.api or not settings.metrics_port:
        return
    server = MetricsServer.start(
        metrics.registry, settings.api_host, settings.metrics_port, connected=lambda: nc.is_connected
    )
    if server is not None:
        stack.callback(server.stop)


async def _read_models(
    settings: Settings, nc: Client, store: NatsEventStore, tasks: list[asyncio.Task[None]]
) -> tuple[ReadModels, ProjectionRunner]:
    """The views, resumed from a snapshot when there is one, kept following the log (and snapshotted)."""
    snapshots = SnapshotStore(nc)
    views = await _resume(snapshots) if settings.snapshot_seconds else ReadModels()
    projections = ProjectionRunner(store.replay_batches, views.apply, start=views.jobs.last_seq)
    catch_up = projections.run(views.jobs.last_seq + 1, catch_up_to=await store.stream_last_seq())
    tasks.append(asyncio.create_task(catch_up, name="projections"))
    if settings.snapshot_seconds:
        keeper = _keep_snapshots(snapshots, views, projections, settings.snapshot_seconds)
        tasks.append(asyncio.create_task(keeper, name="snapshots"))
    return views, projections


async def _resume(snapshots: SnapshotStore) -> ReadModels:
    """The views from the latest snapshot, or empty ones (the log is then replayed from the start)."""
    data = await snapshots.load()
    views = restore(data) if data else None
    if views is None:
        return ReadModels()
    log.info("read models resumed from a snapshot at sequence %d", views.jobs.last_seq)
    return views


async def _keep_snapshots(
    snapshots: SnapshotStore, views: ReadModels, projections: ProjectionRunner, every: float
) -> None:
    """Write a snapshot every ``every`` seconds when the views moved on since the last one."""
    written = projections.applied
    while True:
        await asyncio.sleep(every)
        if projections.applied > written:
            try:
                data, at = take(views), views.jobs.last_seq
                await snapshots.save(data)
                written = at
            except Exception:
                log_failure(log, "could not write the read-model snapshot; trying again later")


def _notifier(
    settings: Settings, nc: Client, store: NatsEventStore, clock: SystemClock, stack: contextlib.AsyncExitStack
) -> PullConsumer:
    options = NotifierSettings(
        max_attempts=settings.log_forward_max_attempts,
        timeout=settings.log_forward_timeout,
        backoff_base=settings.log_forward_backoff_base,
        backoff_max=settings.log_forward_backoff_max,
    )
    delivery = HttpDelivery(options.timeout, policy=settings.callback_policy)
    stack.push_async_callback(delivery.aclose)
    return notifier_consumer(nc, LogForwarder(store, clock, NatsLogStore(nc), delivery.post_json, options))


def _webhooks(
    settings: Settings, store: NatsEventStore, clock: SystemClock, stack: contextlib.AsyncExitStack
) -> WebhookSender:
    options = WebhookSettings(
        max_attempts=settings.webhook_max_attempts,
        timeout=settings.webhook_timeout,
        backoff_base=settings.webhook_backoff_base,
        backoff_max=settings.webhook_backoff_max,
        secret=settings.webhook_secret,
    )
    delivery = HttpDelivery(options.timeout, policy=settings.callback_policy)
    stack.push_async_callback(delivery.aclose)
    return WebhookSender(store, clock, delivery.post_json, options)


def _watchdog(
    settings: Settings,
    nc: Client,
    store: NatsEventStore,
    clock: SystemClock,
    view: JobsView,
    pipelines: PipelineCoordinator,
    pools: Pools,
) -> Watchdog:
    policy = WatchdogPolicy(
        max_attempts=settings.max_attempts,
        aging_seconds=settings.priority_aging_seconds,
        interval=settings.watchdog_seconds,
        unschedulable_timeout=settings.unschedulable_timeout,
        pool_idle=settings.pool_idle_seconds,
        # pools are looked over every 10 s, or as often as the watchdog for a short idle time
        pools_every=min(10.0, max(settings.watchdog_seconds, settings.pool_idle_seconds / 4 or 10.0)),
    )
    return Watchdog(store, clock, view, Heartbeats(nc), policy, pipelines, pools)


async def _until_stopped(stop: asyncio.Event, tasks: list[asyncio.Task[None]]) -> None:
    """Return when asked to stop, or raise when a role died on its own."""
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    for task in done:
        if task is not stopper and not task.cancelled() and task.exception() is not None:
            raise RuntimeError(f"role {task.get_name()} stopped") from task.exception()


async def _drain(worker: ExecutorWorker, executing: asyncio.Task[None], grace: float, api: bool) -> None:
    """Stop taking work and let the running attempts finish (for up to ``grace``, then they are handed back), with
    every other role of the process still on: the scheduler and the notifier keep going, the API keeps answering.

    ``POST /build`` keeps accepting meanwhile: the job is durable in the log, another executor on the same NATS may
    take it at once, and otherwise the next start runs it; a 503 would only make the client send again what nothing
    would lose (the log line says so, once).
    """
    log.info("stopping: the executor takes no new work and lets running jobs finish (up to %.0f s)", grace)
    if api:
        log.info("the API keeps answering until then; jobs submitted meanwhile wait in the log for an executor")
    await worker.drain()
    await _wait(executing, grace + 10)


async def _stop_apis(apis: list[ApiRole], store: NatsEventStore, applied_at_stop: int) -> None:
    """Once nothing runs here any more: the views take in the end of the log (the drained jobs' ends), then each
    API ends its live streams (a follower of a job that ended gets its end first) and stops answering; the other
    roles, the projections and the NATS connection stop after. The APIs take new connections a moment longer only
    when the log moved since the stop was asked (a job ended meanwhile: its pollers get its end); an idle stop is
    not held up."""
    if not apis:
        return
    projections = apis[0].services.projections  # one runner feeds every API of the process
    try:
        if not await projections.wait_for(await store.stream_last_seq(), timeout=_SETTLE_PATIENCE):
            log.warning("the views did not reach the end of the event log in %.0f s; stopping", _SETTLE_PATIENCE)
    except UNAVAILABLE as error:
        log.warning("could not read the end of the event log (%r); stopping", error)
    moved = projections.applied > applied_at_stop
    await asyncio.gather(*(api.stop(last_call=moved) for api in apis))


async def _wait(task: asyncio.Task[None], timeout: float) -> None:
    with contextlib.suppress(TimeoutError, Exception):
        await asyncio.wait_for(asyncio.shield(task), timeout)


async def _cancel(task: asyncio.Task[None]) -> None:
    """Cancel and wait; cancel again if a library swallowed the first one (nats-py can, mid-reply)."""
    patience = 15.0  # the first cancel may still be cleaning up containers
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=patience)
        patience = 1.0
    if not task.cancelled() and task.exception() is not None:
        log.error("role %s ended with an error", task.get_name(), exc_info=task.exception())


def _stop_on_signals() -> asyncio.Event:
    """The first SIGINT/SIGTERM stops gracefully (running jobs get their grace); a second one stops at once."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        if stop.is_set():
            stop_at_once(
                128 + sig, f"{sig.name} again while stopping: stopping at once, without waiting for running jobs"
            )
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    return stop


def stop_at_once(status: int, why: str) -> NoReturn:
    """End the process now with ``status``, ``why`` logged as an error, nothing drained or handed back.

    What that leaves (containers, attempts that were running) the executors' sweep and the watchdog take back, as
    after a crash; an embedded nats-server still alive gets SIGTERM from the kernel and flushes its store.
    """
    log.error("%s", why)
    logging.shutdown()
    os._exit(status)
