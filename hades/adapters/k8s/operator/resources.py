"""The BuildJob and Pod calls the operator makes, as raw Kubernetes JSON, and the watch that keeps every BuildJob.

Status writes are optimistic: each carries the resourceVersion it was computed from, and a 409 ``Conflict``
(someone wrote the object in between) re-reads it and computes the status again, as Go's ``RetryOnConflict`` does.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import aiohttp
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from hades.adapters.k8s.buildjob import GROUP, PLURAL, VERSION
from hades.adapters.k8s.pods import LABEL_JOB
from hades.adapters.k8s.watch import ObjectWatch, read_json
from hades.core.ports import ExecutionError

log = logging.getLogger(__name__)
NOT_FOUND = 404
CONFLICT = 409
#: Status writes that lose a race before the operator gives up until the next reconcile.
MAX_CONFLICTS = 5
Key = tuple[str, str]  # namespace, name
StatusFor = Callable[[dict[str, Any]], dict[str, Any] | None]


def key_of(obj: dict[str, Any]) -> Key:
    """An object's namespace and name."""
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))


async def _json(call: Awaitable[object]) -> dict[str, Any]:
    return await read_json(cast(aiohttp.ClientResponse, await call))


class BuildJobs:
    """BuildJobs in one namespace (or, for watching, all namespaces) and the Pods of their jobs."""

    def __init__(self, api: ApiClient, namespace: str, watch_namespace: str | None) -> None:
        self._custom = CustomObjectsApi(api)
        self._core = CoreV1Api(api)
        self.namespace = namespace
        self.watch_namespace = watch_namespace
        self.status_conflicts = 0  # status writes refused with 409 and retried

    def lister(self, **query: Any) -> Awaitable[aiohttp.ClientResponse]:
        """List (or with ``watch=True``, watch) the BuildJobs the operator looks after, raw."""
        if self.watch_namespace:
            call = self._custom.list_namespaced_custom_object(GROUP, VERSION, self.watch_namespace, PLURAL, **query)
        else:
            call = self._custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, **query)
        return cast(Awaitable[aiohttp.ClientResponse], call)

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Create a BuildJob (raises ApiException as the API refuses it, 409 AlreadyExists included)."""
        namespace = manifest["metadata"]["namespace"]
        call = self._custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, cast(Any, manifest), _preload_content=False
        )
        return await _json(call)

    async def get(self, key: Key) -> dict[str, Any] | None:
        """The BuildJob now, or None once it is gone."""
        try:
            call = self._custom.get_namespaced_custom_object(
                GROUP, VERSION, key[0], PLURAL, key[1], _preload_content=False
            )
            return await _json(call)
        except ApiException as error:
            if error.status == NOT_FOUND:
                return None
            raise

    async def write_status(self, buildjob: dict[str, Any], status_for: StatusFor) -> dict[str, Any] | None:
        """Write ``status_for(buildjob)`` as the BuildJob's status unless it is None or unchanged; on 409 re-read
        and compute again. Returns the BuildJob as written (or as found); None once it is gone."""
        current: dict[str, Any] | None = buildjob
        for _ in range(MAX_CONFLICTS):
            if current is None:
                return None
            wanted = status_for(current)
            if wanted is None or current.get("status") == wanted:
                return current
            body = {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]}, "status": wanted}
            namespace, name = key_of(current)
            merge: dict[str, Any] = {"_content_type": "application/merge-patch+json", "_preload_content": False}
            call = self._custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURAL, name, cast(Any, body), **merge
            )
            try:
                return await _json(call)
            except ApiException as error:
                if error.status == NOT_FOUND:
                    return None
                if error.status != CONFLICT:
                    raise
                self.status_conflicts += 1
                current = await self.get((namespace, name))
        log.warning("status of BuildJob %s/%s: %d conflicts in a row; next reconcile", *key_of(buildjob), MAX_CONFLICTS)
        return current

    async def delete(self, key: Key) -> bool:
        """Delete a BuildJob in the foreground (its Pods first); False if it was gone already."""
        try:
            call = self._custom.delete_namespaced_custom_object(
                GROUP, VERSION, key[0], PLURAL, key[1], propagation_policy="Foreground", _preload_content=False
            )
            await _json(call)
        except ApiException as error:
            if error.status == NOT_FOUND:
                return False
            raise
        return True

    async def pod(self, name: str) -> dict[str, Any] | None:
        """A Pod in the operator's namespace, or None."""
        try:
            return await _json(self._core.read_namespaced_pod(name, self.namespace, _preload_content=False))
        except ApiException as error:
            if error.status == NOT_FOUND:
                return None
            raise

    async def delete_pods(self, job_id: str) -> int:
        """Delete every Pod of a job (a leftover of an earlier attempt or leader); returns how many."""
        listing = self._core.list_namespaced_pod(
            self.namespace, label_selector=f"{LABEL_JOB}={job_id}", _preload_content=False
        )
        deleted = 0
        for pod in (await _json(listing)).get("items") or []:
            name = pod["metadata"]["name"]
            try:
                await _json(
                    self._core.delete_namespaced_pod(
                        name, self.namespace, grace_period_seconds=0, _preload_content=False
                    )
                )
                deleted += 1
            except ApiException as error:
                if error.status != NOT_FOUND:
                    raise
        return deleted


class BuildJobWatch(ObjectWatch):
    """Every BuildJob the lister selects, kept current by list-then-watch (resumed after the server ends a watch,
    re-listed after 410 Gone); ``on_change`` hears of each change (None: a fresh list, anything may have changed)."""

    def __init__(self, buildjobs: BuildJobs, on_change: Callable[[Key | None], None]) -> None:
        super().__init__(functools.partial(buildjobs.lister))
        self.objects: dict[Key, dict[str, Any]] = {}
        self.failure: str | None = None
        self._on_change = on_change

    async def _list(self) -> str:
        body = await read_json(await self._lister(_preload_content=False))
        self.objects = {key_of(item): item for item in body.get("items") or []}
        self._on_change(None)
        return str((body.get("metadata") or {}).get("resourceVersion", ""))

    def _apply(self, event: dict[str, Any], version: str) -> str:
        kind, found = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            raise ApiException(status=found.get("code"), reason=found.get("message"))
        version = str((found.get("metadata") or {}).get("resourceVersion") or version)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            key = key_of(found)
            if kind == "DELETED":
                self.objects.pop(key, None)
            else:
                self.objects[key] = found
            self._on_change(key)
        return version

    def _fail(self, error: ExecutionError) -> None:
        self.failure = error.reason
        self._on_change(None)
