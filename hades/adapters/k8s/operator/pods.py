"""The operator's Pods: the Kubernetes executor's, owned by their BuildJob, with ``maxRetries`` for disrupted Pods.

Each admitted BuildJob's attempt runs through the same ``AttemptRunner`` and the same Pod logic as
``HADES_EXECUTOR=k8s`` (steps as containers, logs followed into HADES_LOGS, stuck states, the deadline); only
the Pod's creation differs (an owner reference to the BuildJob, the operator's labels), and a step whose Pod the
cluster ended (evicted, node lost, deleted by someone else) is handed to ``retry`` while the BuildJob has retries
left, instead of failing the job.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import aiohttp
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.client.exceptions import ApiException

from hades.adapters.k8s.executor import K8sExecutor, PodDisrupted
from hades.adapters.k8s.operator.status import owned_pod
from hades.adapters.k8s.pods import PodSettings, pod_name
from hades.adapters.k8s.status import disrupted
from hades.adapters.k8s.watch import read_json
from hades.core.lifecycle import JobState
from hades.core.ports import StepLogs, StepResult

NOT_FOUND = 404
#: ``retry(job, reason)``: hand the attempt back for another Pod; False when the BuildJob has no retry left.
Retry = Callable[[JobState, str], Awaitable[bool]]


class OperatorPods(K8sExecutor):
    """Pods for the operator's BuildJobs (``owners`` maps a job id to its BuildJob, set before its attempt runs)."""

    def __init__(self, settings: PodSettings, configuration: Configuration, pull_grace: float = 60.0) -> None:
        super().__init__(settings, configuration, pull_grace=pull_grace)
        self.owners: dict[str, dict[str, Any]] = {}
        self.retry: Retry | None = None  # the controller's
        self._pod_settings = settings

    def manifest(self, job: JobState) -> dict[str, Any]:
        """The executor's Pod, owned by the job's BuildJob (``prepare`` creates it as the executor does: a refusal
        fails the job with the API server's words)."""
        manifest = super().manifest(job)
        owner = self.owners.get(job.job_id)
        return owned_pod(manifest, owner) if owner is not None else manifest

    async def run_step(self, job: JobState, index: int, logs: StepLogs) -> StepResult:
        """The executor's step; a failure of a Pod the cluster ended goes to ``retry`` first."""
        try:
            result = await super().run_step(job, index, logs)
        except PodDisrupted as lost:  # the executor hands such an attempt back; here maxRetries decides
            result = lost.result
        failed = result.error is not None or result.exit_code != 0
        tolerated = job.spec.steps[index].continue_on_error
        if failed and not tolerated and self.retry is not None and disrupted(await self._pod(job)):
            reason = result.error or f"container exited with status {result.exit_code}"
            await self.retry(job, f"step {index + 1}: {reason}")
        return result

    async def _pod(self, job: JobState) -> dict[str, Any] | None:
        name = pod_name(job.job_id, job.attempt)
        try:
            call = self.core.read_namespaced_pod(name, self._pod_settings.namespace, _preload_content=False)
            return await read_json(cast(aiohttp.ClientResponse, await call))
        except ApiException as error:
            if error.status == NOT_FOUND:
                return None
            raise
