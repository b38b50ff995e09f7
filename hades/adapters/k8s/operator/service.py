"""``hades operator`` put together: the API client, the health server, the heartbeat, and the controller run by
the Lease's holder (or straight away with ``--leader-elect=false``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration
from nats.aio.client import Client

from hades.adapters.k8s.executor import load_configuration
from hades.adapters.k8s.operator.admission import effective_limit
from hades.adapters.k8s.operator.controller import Controller, OperatorSettings
from hades.adapters.k8s.operator.handoff import BuildJobHandoff, NoPods
from hades.adapters.k8s.operator.lease import LeaderElector, LeaseTerms
from hades.adapters.k8s.operator.pods import OperatorPods
from hades.adapters.k8s.operator.resources import BuildJobs
from hades.adapters.k8s.pods import PodSettings
from hades.adapters.nats.connection import log_failure
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.heartbeats import Heartbeats
from hades.adapters.nats.log_store import NatsLogStore
from hades.adapters.nats.pools import Pools
from hades.core.ports import Clock
from hades.metrics import ProcessMetrics
from hades.tasks import stop
from hades.workers.attempt import AttemptRunner
from hades.workers.executor import ExecutorOptions, ExecutorWorker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OperatorProcess:
    """Who this replica is and how it campaigns."""

    identity: str
    leader_elect: bool = True
    health_address: str = ":8081"
    terms: LeaseTerms = field(default_factory=LeaseTerms)
    labels: dict[str, str] = field(default_factory=dict)  # the executor's, advertised in its heartbeat
    connected: Callable[[], bool] = field(default=lambda: True)  # its NATS connection is up (/readyz)


def parse_bind_address(address: str) -> tuple[str, int]:
    """``:8081`` or ``host:8081`` (controller-runtime's flag format) as host and port."""
    host, _, port = address.rpartition(":")
    return host or "0.0.0.0", int(port)


@contextlib.asynccontextmanager
async def health_server(address: str, connected: Callable[[], bool]) -> AsyncIterator[web.TCPSite]:
    """``/healthz`` (the process answers) and ``/readyz`` (``connected()``: its NATS connection is up; the operator
    serves both only once its API client is set up, and campaigns or leads from then on). A reconnecting NATS makes
    the replica not ready, never dead: liveness stays ``/healthz``."""

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        if connected():
            return web.Response(text="ok")
        return web.Response(status=503, text="not ready: not connected to NATS (reconnecting)")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    host, port = parse_bind_address(address)
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        yield site
    finally:
        await runner.cleanup()


class Operator:
    """One replica: campaigns for the Lease and, while it leads, runs a fresh controller (whose attempts are its
    ``hades_executor_slots``: MAX_PARALLELISM of them while it leads, none while it waits)."""

    def __init__(
        self,
        configuration: Configuration,
        settings: OperatorSettings,
        pods: PodSettings,
        process: OperatorProcess,
        make_runner: Callable[[OperatorPods], AttemptRunner],
        make_controller: Callable[[BuildJobs, OperatorPods, AttemptRunner], Controller],
        heartbeats: Heartbeats | None = None,
        metrics: ProcessMetrics | None = None,
    ) -> None:
        self._configuration = configuration
        self._settings = settings
        self._pod_settings = pods
        self._process = process
        self._make_runner = make_runner
        self._make_controller = make_controller
        self._heartbeats = heartbeats
        self.controller: Controller | None = None
        self.elector: LeaderElector | None = None
        if metrics is not None:
            limit = effective_limit(settings.max_parallelism)
            metrics.executor_slots(lambda: limit if self.controller is not None else 0, self._running)

    def _running(self) -> int:
        """Attempts this replica runs now (none unless it leads)."""
        return self.controller.running if self.controller is not None else 0

    async def run(self) -> None:
        """Until cancelled."""
        async with ApiClient(self._configuration) as api:
            buildjobs = BuildJobs(api, self._settings.namespace, self._settings.watch_namespace)
            beating = asyncio.create_task(self._beat()) if self._heartbeats is not None else None
            try:
                async with health_server(self._process.health_address, self._process.connected):
                    if not self._process.leader_elect:
                        await self._lead(buildjobs)
                        return
                    self.elector = LeaderElector(
                        api, self._settings.namespace, self._process.identity, self._process.terms
                    )
                    await self.elector.run(lambda: self._lead(buildjobs))
            finally:
                if beating is not None:  # awaited, and cancelled again if nats-py swallowed the first cancel
                    with contextlib.suppress(Exception):
                        await stop(beating)

    async def _lead(self, buildjobs: BuildJobs) -> None:
        pods = OperatorPods(self._pod_settings, self._configuration, self._settings.pull_grace)
        await pods.start()
        try:
            self.controller = self._make_controller(buildjobs, pods, self._make_runner(pods))
            await self.controller.run()
        finally:
            self.controller = None
            await pods.close()

    async def _beat(self) -> None:
        """Announce the executor id the operator's attempts run under, so the watchdog sees it alive."""
        heartbeats = self._heartbeats
        assert heartbeats is not None
        me = self._pod_settings.executor_id
        interval = await heartbeats.ttl() / 3
        while True:
            try:
                beat = {"executor_id": me, "operator": self._process.identity, "labels": self._process.labels}
                await heartbeats.beat(me, beat)
            except Exception:
                log_failure(log, "operator heartbeat failed")
            await asyncio.sleep(interval)


async def run_operator(
    nc: Client,
    store: NatsEventStore,
    clock: Clock,
    settings: OperatorSettings,
    pods: PodSettings,
    process: OperatorProcess,
    make_runner: Callable[[OperatorPods], AttemptRunner],
    kubeconfig: str | None = None,
    metrics: ProcessMetrics | None = None,
) -> None:
    """The operator role until cancelled: its attempts run as ``pods.executor_id`` in ``make_runner``'s runner
    (the executor role's, over the leader's Pods), its slots in ``metrics``."""
    configuration = await load_configuration(kubeconfig)

    def controller(buildjobs: BuildJobs, engine: OperatorPods, attempts: AttemptRunner) -> Controller:
        return Controller(nc, store, clock, buildjobs, engine, attempts, settings)

    operator = Operator(configuration, settings, pods, process, make_runner, controller, Heartbeats(nc), metrics)
    await operator.run()


async def handoff_worker(
    nc: Client,
    store: NatsEventStore,
    clock: Clock,
    options: ExecutorOptions,
    namespace: str,
    kubeconfig: str | None = None,
    max_retries: int = 0,
    metrics: ProcessMetrics | None = None,
) -> tuple[ExecutorWorker, ApiClient]:
    """The executor role for ``HADES_EXECUTOR=k8s-operator``: queued attempts become BuildJobs in ``namespace``
    (the caller closes the returned API client). It follows the pools as every executor does, taking those
    ``options.places`` accepts: with ``accepts`` of ``hades.adapters.k8s.placement``, every job whose placement
    Kubernetes can express, whose Pod then carries it, as with ``HADES_EXECUTOR=k8s``."""
    api = ApiClient(await load_configuration(kubeconfig))
    buildjobs = BuildJobs(api, namespace, namespace)
    handoff = BuildJobHandoff(buildjobs, NatsLogStore(nc).writer, options.executor_id, store.watch, max_retries)
    worker = ExecutorWorker(
        nc, store, handoff, NoPods(), clock, options, Heartbeats(nc), metrics=metrics, pools=Pools(nc)
    )
    return worker, api
