"""``Executor`` on a Kubernetes cluster through kubernetes-asyncio: one Pod per job attempt.

``prepare`` creates the attempt's Pod (see ``pods``); the kubelet then runs the steps in order by itself, and
``run_step`` follows one step: it watches the Pod until the step's container started (or is stuck, or will never
run), follows the container's log into the step's writer, and reports the exit code once the container
terminated. Cancelling a step, and the attempt's cleanup, delete the Pod; the sweep deletes Pods of attempts that
no longer run.

A step whose Pod the cluster ended (deleted from outside, evicted, its node lost, preempted) raises
``PodDisrupted``, an ``AttemptLost``: the attempt is handed back, as on Docker for a container removed from outside,
where a step that ran and exited non-zero fails the job. So does an API server lost for longer than the watch's
patience (``hades.adapters.k8s.watch``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import aiohttp
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException

from hades.adapters.docker.executor import lap
from hades.adapters.k8s.placement import PlacementError
from hades.adapters.k8s.pods import (
    ANNOTATION_EXECUTOR,
    LABEL_ATTEMPT,
    LABEL_DEPLOYMENT,
    LABEL_JOB,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    PodSettings,
    container_names,
    pod_manifest,
    pod_name,
)
from hades.adapters.k8s.status import STUCK_IF_LASTING, StepView, disrupted, disruption, stuck_reason, view_step
from hades.adapters.k8s.watch import API_PATIENCE, ObjectWatch, read_json
from hades.core.lifecycle import JobState
from hades.core.logs import parse_line
from hades.core.memory import MemoryFormatError
from hades.core.ports import AttemptLost, ExecutionError, StepLogs, StepResult

log = logging.getLogger(__name__)
NOT_FOUND = 404
CONFLICT = 409
#: After a container terminated, how long its log stream may go without a line before it is given up.
LOG_DRAIN_SECONDS = 10.0
#: What an API call raises when the API refuses, or cannot be reached at all.
_API_TROUBLE = (ApiException, aiohttp.ClientError, OSError, TimeoutError)


class PodDisrupted(AttemptLost):
    """The step's Pod was ended by the cluster, not by its steps; ``result`` is what the step's container showed."""

    def __init__(self, reason: str, result: StepResult) -> None:
        super().__init__(reason)
        self.result = result


@dataclass
class WatchStats:
    """How often the executor's watches had to resume (reconnects) or start over (re-lists after 410 Gone)."""

    reconnects: int = 0
    relists: int = 0


async def load_configuration(kubeconfig: str | None = None) -> Configuration:
    """The cluster's address and credentials: the given kubeconfig; else in-cluster (the Pod's service account),
    falling back to ``~/.kube/config``."""
    configuration = Configuration()
    if kubeconfig:
        await kube_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        return configuration
    try:
        kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except ConfigException:
        await kube_config.load_kube_config(client_configuration=configuration)
    return configuration


def _describe(error: BaseException) -> str:
    if isinstance(error, ApiException):
        return f"{error.status} {error.reason}"
    return f"{type(error).__name__}: {error}"


class K8sExecutor:
    """Runs each job attempt as one Pod in one namespace."""

    def __init__(
        self,
        settings: PodSettings,
        configuration: Configuration | None = None,
        kubeconfig: str | None = None,
        pull_grace: float = 60.0,
        api_patience: float = API_PATIENCE,
    ) -> None:
        self._settings = settings
        self._configuration = configuration
        self._kubeconfig = kubeconfig
        self._pull_grace = pull_grace
        self._api_patience = api_patience
        self._api: ApiClient | None = None
        self.stats = WatchStats()

    @property
    def pull_grace(self) -> float:
        """How long ``ErrImagePull`` may last before a step counts as stuck (K8S_PULL_GRACE_SECONDS)."""
        return self._pull_grace

    @property
    def core(self) -> CoreV1Api:
        """The core API (created by :meth:`start`)."""
        if self._api is None:
            raise RuntimeError("K8sExecutor.start() was not called")
        return CoreV1Api(self._api)

    async def start(self) -> None:
        """Load the configuration, connect (inside the running loop, as the client requires) and check that the
        namespace's Pods can be listed."""
        configuration = self._configuration or await load_configuration(self._kubeconfig)
        self._api = ApiClient(configuration)
        await read_json(
            await _raw(self.core.list_namespaced_pod(self._settings.namespace, limit=1, _preload_content=False))
        )

    async def close(self) -> None:
        """Close the API client."""
        if self._api is not None:
            await self._api.close()
            self._api = None

    # -- the Executor protocol ----------------------------------------------------------------------------------

    async def prepare(self, job: JobState) -> dict[str, float]:
        """Create the attempt's Pod (the kubelet pulls the images as it goes); an existing Pod of the same attempt
        counts as created. A job that declares artifacts or inputs is refused before anything is created; a Pod
        the API refuses fails the job with the API server's words; an API that cannot be reached, or answers 5xx,
        is tried again for the patience, and then the attempt is lost (handed back)."""
        if job.spec.artifacts or job.spec.inputs:
            raise ExecutionError("artifacts are not supported on the Kubernetes executor yet")
        try:
            manifest = self.manifest(job)
        except MemoryFormatError as error:
            raise ExecutionError(f"Failed to parse RAM limit: {error}") from error
        except PlacementError as error:
            raise ExecutionError(str(error)) from error
        phases: dict[str, float] = {}
        with lap(phases, "pod"):
            await self._create(job, manifest)
        return phases

    def manifest(self, job: JobState) -> dict[str, Any]:
        """The attempt's Pod (the operator's adds its BuildJob as the owner)."""
        return pod_manifest(job.job_id, job.attempt, job.spec, self._settings, job.priority)

    async def run_step(self, job: JobState, index: int, logs: StepLogs) -> StepResult:
        """Follow one step's container from start to exit; cancelling deletes the Pod."""
        step = job.spec.steps[index]
        name = container_names(job.spec.steps)[index]
        phases: dict[str, float] = {}
        view = functools.partial(view_step, name=name, position=index + 1, image=step.image)
        await logs.open(name)
        try:
            async with self._watch(job) as watch:
                with lap(phases, "start"):
                    started = await self._until_started(watch, view, index + 1, step.image)
                if not started.started:
                    result = StepResult(exit_code=None, error=started.reason, phases=phases)
                    return _unless_disrupted(result, watch.latest, index)
                with lap(phases, "run"):
                    pump = asyncio.create_task(self._follow_log(job, name, logs))
                    try:
                        ended = await watch.until(lambda pod: _if(view(pod), "terminated", "ended", "stuck"))
                        last = watch.latest
                        with lap(phases, "logs"):
                            await _drain(pump, logs)
                    finally:
                        pump.cancel()
        except asyncio.CancelledError:
            await asyncio.shield(self._delete(job.job_id, job.attempt))
            raise
        assert ended is not None
        if ended.phase != "terminated":
            return _unless_disrupted(StepResult(exit_code=None, error=ended.reason, phases=phases), last, index)
        result = StepResult(exit_code=ended.exit_code, error=ended.reason, phases=phases)
        return _unless_disrupted(result, last, index)

    async def cleanup(self, job: JobState) -> None:
        """Delete the attempt's Pod (its emptyDir goes with it); a Pod already gone is fine."""
        await self._delete(job.job_id, job.attempt)

    async def sweep(self, running: Callable[[str], bool], live_executors: set[str]) -> int:
        """Delete Pods that a crash left: those of executors that are gone, and this executor's own that belong to
        no attempt it runs now. Returns how many were deleted."""
        me = self._settings.executor_id
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
        if self._settings.deployment:
            selector += f",{LABEL_DEPLOYMENT}={self._settings.deployment}"
        listing = self.core.list_namespaced_pod(
            self._settings.namespace, label_selector=selector, _preload_content=False
        )
        found = await read_json(await _raw(listing))
        removed = 0
        for pod in found.get("items") or []:
            metadata = pod.get("metadata") or {}
            owner = (metadata.get("annotations") or {}).get(ANNOTATION_EXECUTOR)
            labels = metadata.get("labels") or {}
            stale = owner not in live_executors if owner != me else not running(labels.get(LABEL_JOB, ""))
            if stale and await self._delete_named(metadata["name"]):
                removed += 1
        return removed

    # -- internals ----------------------------------------------------------------------------------------------

    def _watch(self, job: JobState) -> ObjectWatch:
        lister = functools.partial(
            self.core.list_namespaced_pod,
            self._settings.namespace,
            field_selector=f"metadata.name={pod_name(job.job_id, job.attempt)}",
        )
        return _CountedWatch(lister, self.stats, self._api_patience)

    async def _until_started(
        self, watch: ObjectWatch, view: Callable[[dict[str, Any] | None], StepView], position: int, image: str
    ) -> StepView:
        """The step's view once it started or will never start. A pull error that outlasts the grace counts as
        stuck: the kubelet retries pulls, so one ``ErrImagePull`` is not yet a verdict."""
        lasting: str | None = None
        while True:
            timeout = self._pull_grace if lasting else None
            found = await watch.until(functools.partial(_settled, view=view, lasting=lasting), timeout)
            if found is None:  # the pull error outlasted the grace
                assert lasting is not None
                return StepView("stuck", stuck_reason(lasting, position, image))
            if found.phase != "waiting":
                return found
            lasting = found.reason if found.reason in STUCK_IF_LASTING else None  # a pull error: wait at most the grace

    async def _follow_log(self, job: JobState, container: str, logs: StepLogs) -> None:
        """Stream the container's log (follow, with the runtime's timestamps) into the step's writer."""
        response = await _raw(
            self.core.read_namespaced_pod_log(
                pod_name(job.job_id, job.attempt),
                self._settings.namespace,
                container=container,
                follow=True,
                timestamps=True,
                _preload_content=False,
            )
        )
        if response.status != 200:
            await read_json(response)
        try:
            async for raw in response.content:
                entry = parse_line(raw.decode("utf-8", "replace"), "stdout", datetime.now(UTC))
                if entry is not None:
                    await logs.write("stdout", entry.timestamp, entry.message)
        finally:
            response.close()

    async def _create(self, job: JobState, manifest: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        began, tries = loop.time(), 0
        while True:
            tries += 1
            try:
                create = self.core.create_namespaced_pod(
                    self._settings.namespace, cast(Any, manifest), _preload_content=False
                )
                await read_json(await _raw(create))
                return
            except ApiException as error:
                if error.status == CONFLICT:
                    await self._adopt(job)
                    return
                if error.status is not None and 400 <= error.status < 500:
                    raise ExecutionError(f"Kubernetes refused the Pod: {_describe(error)}") from error
                trouble: BaseException = error
            except _API_TROUBLE as error:
                trouble = error
            waited = loop.time() - began
            if waited >= self._api_patience:
                reason = f"cannot reach the Kubernetes API: {_describe(trouble)} (for {waited:.0f} s, {tries} tries)"
                raise AttemptLost(reason) from trouble
            await asyncio.sleep(min(0.05 * 2**tries, 2.0))  # backoff between tries, not a wait on state

    async def _adopt(self, job: JobState) -> None:
        """After 409 AlreadyExists: fine if the Pod is this attempt's (a retried create), else a refusal."""
        name = pod_name(job.job_id, job.attempt)
        pod = await read_json(
            await _raw(self.core.read_namespaced_pod(name, self._settings.namespace, _preload_content=False))
        )
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(LABEL_JOB) != job.job_id or labels.get(LABEL_ATTEMPT) != str(job.attempt):
            raise ExecutionError(f"Kubernetes refused the Pod: {name} exists and is not this attempt's")

    async def _delete(self, job_id: str, attempt: int) -> None:
        await self._delete_named(pod_name(job_id, attempt))

    async def _delete_named(self, name: str) -> bool:
        """Delete a Pod now (no grace: its job is over); False if it was already gone or the API is away."""
        try:
            deletion = self.core.delete_namespaced_pod(
                name, self._settings.namespace, grace_period_seconds=0, _preload_content=False
            )
            await read_json(await _raw(deletion))
        except ApiException as error:
            if error.status != NOT_FOUND:
                log.warning("could not delete Pod %s: %s", name, _describe(error))
            return False
        except _API_TROUBLE as error:
            log.warning("could not delete Pod %s: %s", name, _describe(error))
            return False
        return True


class _CountedWatch(ObjectWatch):
    """A Pod watch that adds its reconnects and re-lists to the executor's counters when it ends."""

    def __init__(self, lister: Any, stats: WatchStats, patience: float) -> None:
        super().__init__(lister, patience=patience)
        self._stats = stats

    async def __aexit__(self, *exc: Any) -> None:
        await super().__aexit__(*exc)
        self._stats.reconnects += self.reconnects
        self._stats.relists += self.relists


async def _raw(call: Awaitable[object]) -> aiohttp.ClientResponse:
    """The response of a call made with ``_preload_content=False`` (the client's types do not say so)."""
    response = await call
    assert isinstance(response, aiohttp.ClientResponse)
    return response


def _unless_disrupted(result: StepResult, pod: dict[str, Any] | None, index: int) -> StepResult:
    """The step's result, unless it failed because the cluster ended its Pod: then PodDisrupted."""
    if (result.error is None and result.exit_code == 0) or not disrupted(pod):
        return result
    reason = f"step {index + 1}: {disruption(pod)}"
    if pod is not None:  # what the container showed as the cluster ended it (e.g. killed: status 137)
        reason += f"; {result.error or f'container exited with status {result.exit_code}'}"
    raise PodDisrupted(reason, result)


def _if(view: StepView, *phases: str) -> StepView | None:
    return view if view.phase in phases else None


def _settled(
    pod: dict[str, Any] | None, view: Callable[[dict[str, Any] | None], StepView], lasting: str | None
) -> StepView | None:
    """The step's view once it started or settled, or when a pull error appears or clears; None while the wait is
    the same as before."""
    found = view(pod)
    if found.phase != "waiting":
        return found
    changed = found.reason != lasting and (found.reason in STUCK_IF_LASTING or lasting is not None)
    return found if changed else None


async def _drain(pump: asyncio.Task[None], logs: StepLogs) -> None:
    """Wait for the log stream of a terminated container to end (the API ends it once it sent everything)."""
    done, _ = await asyncio.wait([pump], timeout=LOG_DRAIN_SECONDS)
    if not done:
        notice = f"[hades: the log stream did not end within {LOG_DRAIN_SECONDS:.0f} s after the container exited]"
        await logs.write("stderr", datetime.now(UTC), notice)
        return
    error = pump.exception()
    if error is not None:
        await logs.write("stderr", datetime.now(UTC), f"[hades: the log stream broke: {_describe(error)}]")
