"""A small Kubernetes API server for tests (aiohttp.web), speaking the routes kubernetes-asyncio calls with real
Kubernetes JSON. No cluster can be had on these machines; this is what the executor and the operator loops run
against.

Generic over namespaced resources, core (``/api/v1/namespaces/{ns}/{plural}``) and grouped
(``/apis/{group}/{version}/namespaces/{ns}/{plural}``), plus the cluster-wide list/watch of each
(``/api/v1/{plural}``, ``/apis/{group}/{version}/{plural}``):

- create (POST) → 201, or 409 ``AlreadyExists``; get → 404 ``NotFound``; delete → 200 with the object (and a
  ``DELETED`` event); list with ``labelSelector`` (``k=v``, ``k!=v``, ``k``, ``!k``, comma-joined) and
  ``fieldSelector`` (``metadata.name``, ``metadata.namespace``);
- PUT and PATCH (merge patch; strategic merge is treated as merge) of the object and of its ``/status``
  subresource; a body carrying a stale ``metadata.resourceVersion`` → 409 ``Conflict`` (optimistic concurrency, as
  Leases and status updates use it);
- ``watch=true``: JSON lines ``{"type": ADDED|MODIFIED|DELETED, "object": ...}`` from the given resourceVersion on
  (the stored history first, then live), ending after ``timeoutSeconds``; a resourceVersion older than the last
  :meth:`KubeApi.compact` gets the real apiserver's answer, an ``ERROR`` event with a 410 ``Expired`` Status;
- ``pods/{name}/log`` with ``container``, ``follow`` and ``timestamps``, streaming the text a test feeds.

Test hooks: :meth:`KubeApi.drop_watches` ends every open watch (the client must resume), :meth:`KubeApi.compact`
expires old resourceVersions (the client must re-list), :meth:`KubeApi.set_status` / :meth:`KubeApi.put` change
objects as a controller would, :meth:`KubeApi.refuse` makes creates of a resource fail as admission or RBAC
would (422, 403), :meth:`KubeApi.conflict` answers the next writes of a resource with 409 ``Conflict`` (a write
that lost a race), :meth:`KubeApi.outage` plays a server that is down (503s, or connections closed unanswered),
``requests`` records every call. Every resourceVersion is one global counter, as in etcd.
``tests.support.kubelet`` plays a Pod's containers on it like a node would; ``tests.support.k8s_objects`` holds
the Kubernetes JSON helpers it answers with.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tests.support.k8s_objects import (
    field_matches,
    has_started,
    label_matches,
    merge_patch,
    query_flag,
    status_body,
    watch_line,
)

CORE = "v1"
KINDS = {"pods": "Pod", "leases": "Lease", "buildjobs": "BuildJob", "events": "Event", "jobs": "Job"}
Key = tuple[str, str, str, str]  # api ("v1" or "group/version"), namespace, plural, name
_END = object()


@dataclass
class _Watcher:
    api: str
    namespace: str | None
    plural: str
    labels: str
    fields: str
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)

    def wants(self, key: Key, obj: dict[str, Any]) -> bool:
        api, namespace, plural, _ = key
        return (
            (api, plural) == (self.api, self.plural)
            and self.namespace in (None, namespace)
            and label_matches((obj.get("metadata") or {}).get("labels") or {}, self.labels)
            and field_matches(obj, self.fields)
        )


@dataclass
class _LogFeed:
    lines: list[tuple[datetime, str]] = field(default_factory=list)
    ended: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def touch(self) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()


class KubeApi:
    """The in-test API server: start it with ``async with KubeApi() as api`` and point a client at ``api.url``."""

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.history: list[tuple[int, Key, str, dict[str, Any]]] = []
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.version = 0
        self.compacted = 0
        self._watchers: list[_Watcher] = []
        self._refusals: dict[str, tuple[int, str, str]] = {}
        self._conflicts: dict[str, int] = {}
        self._logs: dict[tuple[str, str, str], _LogFeed] = {}
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._outage: str | None = None
        self.url = ""

    # -- lifecycle ------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> KubeApi:
        app = web.Application()
        collection = "/namespaces/{ns}/{plural}"
        for prefix in ("/api/{version:v1}", "/apis/{group}/{version}"):
            app.router.add_route("GET", prefix + "/{plural}", self._list_all)
            app.router.add_route("GET", prefix + collection, self._list)
            app.router.add_route("POST", prefix + collection, self._create)
            app.router.add_route("GET", prefix + collection + "/{name}", self._get)
            app.router.add_route("PUT", prefix + collection + "/{name}", self._replace)
            app.router.add_route("PATCH", prefix + collection + "/{name}", self._patch)
            app.router.add_route("DELETE", prefix + collection + "/{name}", self._delete)
            app.router.add_route("GET", prefix + collection + "/{name}/status", self._get)
            app.router.add_route("PUT", prefix + collection + "/{name}/status", self._replace)
            app.router.add_route("PATCH", prefix + collection + "/{name}/status", self._patch)
        app.router.add_route("GET", "/api/v1/namespaces/{ns}/pods/{name}/log", self._log)
        app.middlewares.append(self._record)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.drop_watches()
        for feed in self._logs.values():
            feed.ended = True
            feed.touch()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- test hooks -----------------------------------------------------------------------------------------------

    def get(self, namespace: str, plural: str, name: str, api: str = CORE) -> dict[str, Any] | None:
        """The stored object, or None."""
        return self.objects.get((api, namespace, plural, name))

    def items(self, namespace: str, plural: str, api: str = CORE) -> list[dict[str, Any]]:
        """Every stored object of a resource in a namespace."""
        return [obj for (a, ns, p, _), obj in self.objects.items() if (a, ns, p) == (api, namespace, plural)]

    def put(self, namespace: str, plural: str, obj: dict[str, Any], api: str = CORE) -> dict[str, Any]:
        """Store (create or replace) an object as a controller would, with a new resourceVersion."""
        key = (api, namespace, plural, obj["metadata"]["name"])
        kind = "MODIFIED" if key in self.objects else "ADDED"
        return self._store(key, self._stamped(key, copy.deepcopy(obj)), kind)

    def set_status(self, namespace: str, plural: str, name: str, status: dict[str, Any], api: str = CORE) -> None:
        """Merge ``status`` into the object's status (a MODIFIED event)."""
        key = (api, namespace, plural, name)
        obj = copy.deepcopy(self.objects[key])
        obj["status"] = merge_patch(obj.get("status") or {}, status)
        self._store(key, obj, "MODIFIED")

    def drop_watches(self) -> int:
        """End every open watch stream now (a client must resume from its last resourceVersion)."""
        for watcher in self._watchers:
            watcher.queue.put_nowait(_END)
        return len(self._watchers)

    def compact(self) -> None:
        """Forget the history so far: a watch from any resourceVersion given out until now gets 410 Expired."""
        self.compacted = self.version + 1
        self.history.clear()

    def refuse(self, plural: str, code: int, reason: str, message: str) -> None:
        """Answer every create of ``plural`` with this error (e.g. 422 ``Invalid``, 403 ``Forbidden``)."""
        self._refusals[plural] = (code, reason, message)

    def conflict(self, resource: str, times: int = 1) -> None:
        """Answer the next ``times`` writes (PUT or PATCH) of ``resource`` (a plural, or ``<plural>/status``) with 409
        ``Conflict``, as when another writer moved the object first; the object itself moves on (a new
        resourceVersion), so a writer that re-reads gets a fresh version."""
        self._conflicts[resource] = self._conflicts.get(resource, 0) + times

    def outage(self, kind: str | None) -> None:
        """Until called again with None, answer every request as an API server that is down would: ``"503"`` with
        a ``ServiceUnavailable`` Status (a restarting server behind a load balancer), ``"disconnect"`` by closing
        the connection unanswered (the client sees a transport error). Open watches are ended first."""
        self._outage = kind
        if kind is not None:
            self.drop_watches()

    @property
    def open_watches(self) -> int:
        """Watch streams being served now."""
        return len(self._watchers)

    def feed_log(self, namespace: str, pod: str, container: str, *lines: str) -> None:
        """Add lines to a container's log (streamed to followers at once)."""
        feed = self._logs.setdefault((namespace, pod, container), _LogFeed())
        feed.lines.extend((datetime.now(UTC), line) for line in lines)
        feed.touch()

    def end_log(self, namespace: str, pod: str, container: str) -> None:
        """The container exited: followers get the rest and the stream ends."""
        feed = self._logs.setdefault((namespace, pod, container), _LogFeed())
        feed.ended = True
        feed.touch()

    async def wait_for(
        self, condition: Callable[[], Any], timeout: float = 10.0
    ) -> Any:  # wakes on every change, no polling
        """Wait until ``condition()`` is truthy (checked on every stored change); returns its value."""
        async with asyncio.timeout(timeout):
            while True:
                changed = self._changed
                found = condition()
                if found:
                    return found
                await changed.wait()

    # -- storage --------------------------------------------------------------------------------------------------

    def _stamped(self, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        api, namespace, plural, name = key
        metadata = obj.setdefault("metadata", {})
        old = self.objects.get(key)
        metadata.update(name=name, namespace=namespace)
        metadata.setdefault("uid", (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()))
        metadata.setdefault(
            "creationTimestamp",
            (old or {}).get("metadata", {}).get("creationTimestamp")
            or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        obj.setdefault("apiVersion", api)
        obj.setdefault("kind", KINDS.get(plural, plural.capitalize().rstrip("s")))
        return obj

    def _store(self, key: Key, obj: dict[str, Any], kind: str) -> dict[str, Any]:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        if kind == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        snapshot = copy.deepcopy(obj)
        self.history.append((self.version, key, kind, snapshot))
        for watcher in self._watchers:
            if watcher.wants(key, snapshot):
                watcher.queue.put_nowait({"type": kind, "object": snapshot})
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        return obj

    # -- routes ---------------------------------------------------------------------------------------------------

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.method, request.path, dict(request.query)))
        if self._outage == "503":
            body = status_body(503, "ServiceUnavailable", "the server is currently unable to handle the request")
            return web.json_response(body, status=503)
        if self._outage == "disconnect" and request.transport is not None:
            request.transport.abort()
            return web.Response(status=503)  # never sent: the connection is gone
        return await handler(request)

    @staticmethod
    def _key(request: web.Request) -> Key:
        info = request.match_info
        api = CORE if "group" not in info else f"{info['group']}/{info['version']}"
        return api, info["ns"], info["plural"], info.get("name", "")

    def _missing(self, key: Key) -> web.Response:
        _, _, plural, name = key
        body = status_body(404, "NotFound", f'{plural} "{name}" not found', {"name": name, "kind": plural})
        return web.json_response(body, status=404)

    async def _create(self, request: web.Request) -> web.Response:
        api, namespace, plural, _ = self._key(request)
        obj = await request.json()
        metadata = obj.setdefault("metadata", {})
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:5]
        key = (api, namespace, plural, metadata.get("name", ""))
        if plural in self._refusals:
            code, reason, message = self._refusals[plural]
            return web.json_response(status_body(code, reason, message), status=code)
        if key in self.objects:
            message = f'{plural} "{key[3]}" already exists'
            body = status_body(409, "AlreadyExists", message, {"name": key[3], "kind": plural})
            return web.json_response(body, status=409)
        obj.pop("status", None) if plural != "pods" else obj.setdefault("status", {"phase": "Pending"})
        metadata.pop("resourceVersion", None)
        return web.json_response(self._store(key, self._stamped(key, obj), "ADDED"), status=201)

    async def _get(self, request: web.Request) -> web.Response:
        key = self._key(request)
        obj = self.objects.get(key)
        return web.json_response(obj) if obj is not None else self._missing(key)

    async def _write(
        self, request: web.Request, change: Callable[[dict[str, Any], Any], dict[str, Any]]
    ) -> web.Response:
        key = self._key(request)
        current = self.objects.get(key)
        if current is None:
            return self._missing(key)
        body = await request.json()
        expected = (body.get("metadata") or {}).get("resourceVersion")
        resource = key[2] + ("/status" if request.path.endswith("/status") else "")
        if self._conflicts.get(resource):
            self._conflicts[resource] -= 1
            self._store(key, copy.deepcopy(current), "MODIFIED")  # someone else's write
            expected = "stale"
        if expected and expected != current["metadata"]["resourceVersion"]:
            message = (
                f'Operation cannot be fulfilled on {key[2]} "{key[3]}": the object has been modified; '
                "please apply your changes to the latest version and try again"
            )
            return web.json_response(status_body(409, "Conflict", message, {"name": key[3]}), status=409)
        updated = change(copy.deepcopy(current), body)
        if request.path.endswith("/status"):  # the status subresource changes the status only
            updated = {**copy.deepcopy(current), "status": updated.get("status")}
        else:  # and the main resource everything but the status
            updated["status"] = copy.deepcopy(current.get("status"))
            if updated["status"] is None:
                updated.pop("status")
        return web.json_response(self._store(key, self._stamped(key, updated), "MODIFIED"))

    async def _replace(self, request: web.Request) -> web.Response:
        return await self._write(request, lambda _current, body: body)

    async def _patch(self, request: web.Request) -> web.Response:
        return await self._write(request, merge_patch)

    async def _delete(self, request: web.Request) -> web.Response:
        key = self._key(request)
        obj = self.objects.get(key)
        if obj is None:
            return self._missing(key)
        if key[2] == "pods":  # its containers are killed: their log streams end, as a real server's do
            for (namespace, pod, _), feed in self._logs.items():
                if (namespace, pod) == (key[1], key[3]):
                    feed.ended = True
                    feed.touch()
        return web.json_response(self._store(key, copy.deepcopy(obj), "DELETED"))

    async def _list_all(self, request: web.Request) -> web.StreamResponse:
        return await self._list(request, all_namespaces=True)

    async def _list(self, request: web.Request, all_namespaces: bool = False) -> web.StreamResponse:
        api, namespace, plural, _ = self._key(request) if not all_namespaces else (*self._key_all(request), "")
        query = request.query
        watcher = _Watcher(
            api,
            None if all_namespaces else namespace,
            plural,
            query.get("labelSelector", ""),
            query.get("fieldSelector", ""),
        )
        if query_flag(query.get("watch")):
            return await self._watch(request, watcher)
        items = [obj for key, obj in self.objects.items() if watcher.wants(key, obj)]
        kind = KINDS.get(plural, plural.capitalize()) + "List"
        return web.json_response(
            {"kind": kind, "apiVersion": api, "metadata": {"resourceVersion": str(self.version)}, "items": items}
        )

    @staticmethod
    def _key_all(request: web.Request) -> tuple[str, str, str]:
        info = request.match_info
        api = CORE if "group" not in info else f"{info['group']}/{info['version']}"
        return api, "", info["plural"]

    async def _watch(self, request: web.Request, watcher: _Watcher) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        since = int(request.query.get("resourceVersion") or 0)
        timeout = float(request.query.get("timeoutSeconds") or 1800)
        if since and since < self.compacted:
            message = f"too old resource version: {since} ({self.compacted})"
            await response.write(watch_line({"type": "ERROR", "object": status_body(410, "Expired", message)}))
            return response
        if since:
            backlog = [
                (key, {"type": kind, "object": obj}) for version, key, kind, obj in self.history if version > since
            ]
        else:
            backlog = [(key, {"type": "ADDED", "object": obj}) for key, obj in self.objects.items()]
        self._watchers.append(watcher)  # before the first await: what changes meanwhile is queued, not lost
        try:
            for key, event in backlog:
                if watcher.wants(key, event["object"]):
                    await response.write(watch_line(event))
            async with asyncio.timeout(timeout):
                while (event := await watcher.queue.get()) is not _END:
                    await response.write(watch_line(event))
        except (TimeoutError, ConnectionResetError):
            pass
        finally:
            self._watchers.remove(watcher)
        return response

    async def _log(self, request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info["ns"], request.match_info["name"]
        pod = self.objects.get((CORE, namespace, "pods", name))
        if pod is None:
            return self._missing((CORE, namespace, "pods", name))
        containers = [c["name"] for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]]
        container = request.query.get("container") or (containers[0] if len(containers) == 1 else "")
        if container not in containers:
            message = f"container {container} is not valid for pod {name}"
            return web.json_response(status_body(400, "BadRequest", message), status=400)
        if not has_started(pod, container):
            message = f'container "{container}" in pod "{name}" is waiting to start: PodInitializing'
            return web.json_response(status_body(400, "BadRequest", message), status=400)
        follow = query_flag(request.query.get("follow"))
        stamps = query_flag(request.query.get("timestamps"))
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        feed = self._logs.setdefault((namespace, name, container), _LogFeed())
        sent = 0
        while True:
            changed = feed.changed
            for at, text in feed.lines[sent:]:
                prefix = at.strftime("%Y-%m-%dT%H:%M:%S.%f000Z ") if stamps else ""
                await response.write(f"{prefix}{text}\n".encode())
            sent = len(feed.lines)
            if feed.ended or not follow:
                return response
            await changed.wait()


@contextlib.asynccontextmanager
async def kube_api() -> AsyncIterator[KubeApi]:
    """``async with kube_api() as api``: a started server, stopped at the end."""
    async with KubeApi() as api:
        yield api
