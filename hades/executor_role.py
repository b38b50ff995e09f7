"""Putting the executor role together (``HADES_EXECUTOR``: docker, process, k8s, or the k8s-operator hand-off) and
the ``hades operator`` role: the engine, the attempt runner with its logs, artifacts and stage environment, and the
worker that takes queued attempts."""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

from nats.aio.client import Client

from hades.adapters.docker.containers import DockerDefaults
from hades.adapters.docker.executor import DockerExecutor
from hades.adapters.k8s.executor import K8sExecutor
from hades.adapters.k8s.operator.controller import OperatorSettings
from hades.adapters.k8s.operator.pods import OperatorPods
from hades.adapters.k8s.operator.service import OperatorProcess, handoff_worker, run_operator
from hades.adapters.k8s.placement import accepts as k8s_places
from hades.adapters.k8s.pods import PodSettings
from hades.adapters.nats.artifacts import ArtifactStore
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.heartbeats import Heartbeats
from hades.adapters.nats.interruptions import JobInterruptions
from hades.adapters.nats.log_store import NatsLogStore
from hades.adapters.nats.pipeline_tokens import StageEnvironment
from hades.adapters.nats.pools import Pools
from hades.adapters.nats.shared_keys import deployment_id
from hades.adapters.nats.slots import SlotLeases
from hades.adapters.process.executor import ProcessExecutor
from hades.clock import SystemClock
from hades.config import Settings
from hades.core.logs import LogBudget
from hades.core.ports import Executor
from hades.metrics import ProcessMetrics
from hades.tracing import Tracing
from hades.workers.artifacts import Artifacts
from hades.workers.attempt import AttemptRunner, JobWatcher, StageEnv, WriterFactory
from hades.workers.executor import ExecutorOptions, ExecutorWorker
from hades.workers.labels import executor_labels


async def executor_worker(
    settings: Settings,
    nc: Client,
    store: NatsEventStore,
    clock: SystemClock,
    stack: contextlib.AsyncExitStack,
    tracing: Tracing,
    metrics: ProcessMetrics,
) -> ExecutorWorker:
    engine: Executor
    labels = executor_labels(settings.executor_labels)
    options = ExecutorOptions(
        executor_id=settings.executor_id,
        concurrency=settings.concurrency,
        shutdown_grace=settings.shutdown_grace_seconds,
        sweep_interval=settings.sweep_seconds,
        labels=labels,
        # on Kubernetes (its own Pods, or the operator's) the cluster places a job: node affinity and requests
        places=k8s_places if settings.executor in ("k8s", "k8s-operator") else None,
    )
    if settings.executor == "k8s-operator":
        return await _handoff(settings, nc, store, clock, stack, options, metrics)
    if settings.executor == "process":
        engine = ProcessExecutor(settings.process_root, settings.executor_id, settings.docker_script_executor)
    elif settings.executor == "k8s":
        engine = await _kubernetes(settings, stack, await deployment_id(nc))
    else:
        engine = await _docker(settings, stack, await deployment_id(nc))
    artifacts = Artifacts(
        ArtifactStore(nc), store, settings.callback_policy, settings.artifact_max_bytes, settings.artifact_fetch_timeout
    )
    interruptions = JobInterruptions(nc)  # two subscriptions for every job this executor runs
    stack.push_async_callback(interruptions.stop)
    parts = RunnerParts.of(settings, nc, tracing, metrics, labels)
    runner = parts.runner(engine, interruptions.watch, artifacts)
    cap = SlotLeases(nc, settings.max_parallelism) if settings.max_parallelism else None
    return ExecutorWorker(
        nc, store, runner, engine, clock, options, Heartbeats(nc), cap, metrics, Pools(nc), interruptions.ring
    )


@dataclass(frozen=True)
class RunnerParts:
    """What every attempt runner of this process shares, whichever role runs it (the executor over its engine,
    the operator over its leader's Pods): its logs and their budget, the executor id and labels it records in
    ``started``, MAX_ATTEMPTS, the tracer, the metrics, and a pipeline stage's environment."""

    settings: Settings
    writers: WriterFactory
    tracing: Tracing
    metrics: ProcessMetrics
    labels: dict[str, str]
    stage_env: StageEnv

    @classmethod
    def of(
        cls, settings: Settings, nc: Client, tracing: Tracing, metrics: ProcessMetrics, labels: dict[str, str]
    ) -> RunnerParts:
        """The parts from the settings (HADES_API_URL and the shared token key for stages, as on every executor)."""
        stage_env = StageEnvironment(nc, settings.client_api_url, settings.pipeline_token_key)
        return cls(settings, NatsLogStore(nc).writer, tracing, metrics, labels, stage_env)

    def runner(self, engine: Executor, watch: JobWatcher, artifacts: Artifacts | None = None) -> AttemptRunner:
        """An attempt runner over ``engine``, following each job's events with ``watch``."""
        settings = self.settings
        return AttemptRunner(
            engine,
            self.writers,
            settings.executor_id,
            watch,
            LogBudget(settings.log_max_bytes_per_job, settings.log_max_line_bytes),
            self.tracing.tracer,
            self.metrics,
            self.labels,
            artifacts,
            self.stage_env,
            settings.max_attempts,
        )


async def _handoff(
    settings: Settings,
    nc: Client,
    store: NatsEventStore,
    clock: SystemClock,
    stack: contextlib.AsyncExitStack,
    options: ExecutorOptions,
    metrics: ProcessMetrics,
) -> ExecutorWorker:
    """HADES_EXECUTOR=k8s-operator: queued attempts become BuildJobs in K8S_NAMESPACE for ``hades operator``."""
    namespace, retries, kubeconfig = settings.k8s_namespace, settings.max_attempts - 1, settings.k8s_kubeconfig
    worker, api = await handoff_worker(nc, store, clock, options, namespace, kubeconfig, retries, metrics)
    stack.push_async_callback(api.close)
    return worker


async def run_operator_role(
    settings: Settings, nc: Client, store: NatsEventStore, clock: SystemClock, tracing: Tracing, metrics: ProcessMetrics
) -> None:
    """``hades operator``: BuildJobs reconciled into Pods in K8S_NAMESPACE by the Lease's holder, each attempt in
    the executor role's runner (its labels, metrics, log budget and stage environment), its slots on /metrics."""
    labels = executor_labels(settings.executor_labels)
    process = OperatorProcess(
        identity=settings.pod_name or settings.executor_id,
        leader_elect=settings.leader_elect,
        health_address=settings.health_probe_bind_address,
        labels=labels,
        connected=lambda: nc.is_connected,
    )
    parts = RunnerParts.of(settings, nc, tracing, metrics, labels)

    def runner(pods: OperatorPods) -> AttemptRunner:
        return parts.runner(pods, store.watch)

    operator, pods, kubeconfig = operator_settings(settings), pod_settings(settings), settings.k8s_kubeconfig
    await run_operator(nc, store, clock, operator, pods, process, runner, kubeconfig, metrics)


async def _docker(settings: Settings, stack: contextlib.AsyncExitStack, deployment: str) -> DockerExecutor:
    defaults = DockerDefaults(
        executor_id=settings.executor_id,
        deployment=deployment,
        script_executor=settings.docker_script_executor,
        cpu_limit=settings.docker_cpu_limit,
        memory_limit=settings.docker_memory_limit,
    )
    defaults.memory_bytes  # noqa: B018 - a bad DOCKER_MEMORY_LIMIT fails at start-up, not per job
    docker = DockerExecutor(defaults, settings.docker_pull_policy, settings.docker_host)
    try:
        await docker.start()
    except Exception as error:
        where = settings.docker_host or "the default socket"
        raise RuntimeError(f"cannot reach the Docker engine at {where}: {error}; is dockerd running?") from error
    stack.push_async_callback(docker.close)
    return docker


async def _kubernetes(settings: Settings, stack: contextlib.AsyncExitStack, deployment: str) -> K8sExecutor:
    pods = dataclasses.replace(pod_settings(settings), deployment=deployment)
    engine = K8sExecutor(pods, kubeconfig=settings.k8s_kubeconfig, pull_grace=settings.k8s_pull_grace_seconds)
    try:
        await engine.start()
    except Exception as error:
        await engine.close()
        raise RuntimeError(f"cannot use the Kubernetes API for namespace {settings.k8s_namespace}: {error}") from error
    stack.push_async_callback(engine.close)
    return engine


def operator_settings(settings: Settings) -> OperatorSettings:
    """How ``hades operator`` reconciles, from the settings."""
    return OperatorSettings(
        namespace=settings.k8s_namespace,
        watch_namespace=settings.watch_namespace or None,
        delete_on_complete=settings.delete_on_complete,
        max_parallelism=settings.max_parallelism,
        pull_grace=settings.k8s_pull_grace_seconds,
    )


def pod_settings(settings: Settings) -> PodSettings:
    """What shapes every Pod, from the settings (the executor's, the operator's and ``hades k8s manifest``'s)."""
    return PodSettings(
        namespace=settings.k8s_namespace,
        executor_id=settings.executor_id,
        script_executor=settings.docker_script_executor,
        image_pull_policy=settings.k8s_image_pull_policy,
        service_account=settings.k8s_service_account,
    )
