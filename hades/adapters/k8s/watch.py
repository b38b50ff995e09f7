"""One object's latest state, kept current by Kubernetes's list-then-watch.

The list gives the object and a resourceVersion; the watch streams every change after it. A watch the server ends
(its timeout, a restart, a load balancer) is resumed from the last version seen; a version the server no longer
has (410 Gone, as an HTTP status or as an ERROR event) means changes were missed, so the object is listed again.
Waiters are woken on every change and re-check their condition against the latest state: nothing polls.

An API server that cannot be reached or answers 5xx (restarting, a load balancer failing over) is tried again,
with a backoff growing to 2 s, for ``patience`` seconds; only then is it lost (``AttemptLost``: the engine's fault,
not the job's). A 4xx other than 410 is a refusal (``ExecutionError``) at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from hades.core.ports import AttemptLost, ExecutionError

T = TypeVar("T")
#: ``lister(**query)`` calls a list route (e.g. ``CoreV1Api.list_namespaced_pod`` with its namespace and a field
#: selector bound) with ``_preload_content=False`` and returns the raw aiohttp response.
Lister = Callable[..., Awaitable[aiohttp.ClientResponse]]
GONE = 410
#: How long the API may stay unreachable, or answer 5xx, before it counts as lost (an API server's restart takes
#: tens of seconds; the Docker executor gives its engine 60 s too).
API_PATIENCE = 60.0


async def read_json(response: aiohttp.ClientResponse) -> dict[str, Any]:
    """The body of a 2xx answer; anything else raises ApiException with the status and the API's message."""
    try:
        body = await response.read()
    finally:
        response.release()
    if not 200 <= response.status <= 299:
        raise ApiException(status=response.status, reason=_message(body) or response.reason)
    decoded: dict[str, Any] = json.loads(body)
    return decoded


def _message(body: bytes) -> str | None:
    with contextlib.suppress(ValueError, AttributeError):
        message = json.loads(body).get("message")
        return str(message) if message else None
    return None


class ObjectWatch:
    """The latest version of the one object a lister selects (None while it does not exist)."""

    def __init__(self, lister: Lister, watch_seconds: int = 300, patience: float = API_PATIENCE) -> None:
        self._lister = lister
        self._watch_seconds = watch_seconds
        self._patience = patience
        self.latest: dict[str, Any] | None = None
        self.relists = 0  # lists after the first: each one followed a 410 Gone
        self.reconnects = 0  # watches resumed after the server ended one
        self._loaded = False
        self._error: ExecutionError | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ObjectWatch:
        self._task = asyncio.create_task(self._follow(), name="k8s-watch")
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def until(
        self, verdict: Callable[[dict[str, Any] | None], T | None], timeout: float | None = None
    ) -> T | None:
        """The first non-None ``verdict`` of the object's latest state; None if ``timeout`` passes first.

        Raises ExecutionError once the API refuses the list or the watch, AttemptLost once it stayed unreachable
        (or answering 5xx) for the patience.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            changed = self._changed
            if self._error is not None:
                raise self._error
            if self._loaded:
                found = verdict(self.latest)
                if found is not None:
                    return found
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return None
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return None

    def _update(self, found: dict[str, Any] | None) -> None:
        self.latest = found
        self._loaded = True
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _follow(self) -> None:
        loop = asyncio.get_running_loop()
        version: str | None = None
        failures, since = 0, 0.0
        while True:
            try:
                if version is None:
                    version = await self._list()
                version = await self._watch(version)
            except ApiException as error:
                if error.status == GONE:
                    version = None
                    self.relists += 1
                    continue
                if error.status is not None and 400 <= error.status < 500:
                    refused = f"the Kubernetes API refused to watch: {error.status} {error.reason}"
                    return self._fail(ExecutionError(refused))
                trouble = f"{error.status} {error.reason}"
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as error:
                trouble = f"{type(error).__name__}: {error}"
            else:
                failures = 0
                continue
            failures += 1
            since = loop.time() if failures == 1 else since
            if loop.time() - since >= self._patience:
                lost = f"lost the Kubernetes API: {trouble} (for {loop.time() - since:.0f} s, {failures} tries)"
                return self._fail(AttemptLost(lost))
            await asyncio.sleep(min(0.05 * 2**failures, 2.0))  # backoff between reconnects, not a wait on state

    def _fail(self, error: ExecutionError) -> None:
        self._error = error
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _list(self) -> str:
        body = await read_json(await self._lister(_preload_content=False))
        items = body.get("items") or []
        self._update(items[0] if items else None)
        return str((body.get("metadata") or {}).get("resourceVersion", ""))

    async def _watch(self, version: str) -> str:
        """Follow changes after ``version`` until the server ends the stream; returns the last version seen."""
        response = await self._lister(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self._watch_seconds,
            _preload_content=False,
        )
        if response.status != 200:
            await read_json(response)  # raises with the status (410 Gone included)
        try:
            async for line in response.content:
                if line.strip():
                    version = self._apply(json.loads(line), version)
        finally:
            response.release()
        self.reconnects += 1
        return version

    def _apply(self, event: dict[str, Any], version: str) -> str:
        kind, found = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            raise ApiException(status=found.get("code"), reason=found.get("message"))
        version = str((found.get("metadata") or {}).get("resourceVersion") or version)
        if kind in ("ADDED", "MODIFIED"):
            self._update(found)
        elif kind == "DELETED":
            self._update(None)
        return version
