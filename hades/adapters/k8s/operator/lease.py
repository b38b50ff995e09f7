"""Leader election through a ``coordination.k8s.io/v1`` Lease, as controller-runtime does it for the Go operator.

Every replica is a candidate under its own identity (the Pod's name). A candidate takes the Lease when nobody
holds it or its holder let ``leaseDurationSeconds`` pass since its ``renewTime``; the leader renews it every
``retry_period``. Every write carries the resourceVersion it read, so of two candidates racing for an expired
Lease one wins and the other gets 409 ``Conflict``, re-reads, and sees the winner. A leader that cannot renew for
``renew_deadline`` steps down before the Lease can expire for the others, so two leaders never overlap as long
as clocks roughly agree; a leader that stops cleanly gives the Lease up at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast

import aiohttp
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from hades.adapters.k8s.watch import read_json
from hades.tasks import stop

log = logging.getLogger(__name__)
#: The Go operator's leader election id, so a Go and a Python operator never lead at once.
LEASE_NAME = "715d8f3b.hades.tum.de"
NOT_FOUND = 404
CONFLICT = 409
Move = Literal["create", "renew", "take", "wait"]
_TROUBLE = (ApiException, aiohttp.ClientError, OSError, TimeoutError)


@dataclass(frozen=True, slots=True)
class LeaseTerms:
    """How long a Lease lasts, how often it is renewed or tried, and when a leader that cannot renew steps down
    (controller-runtime's defaults: 15 s, 2 s, 10 s)."""

    duration: float = 15.0
    retry_period: float = 2.0
    renew_deadline: float = 10.0


def micro_time(moment: datetime) -> str:
    """``metav1.MicroTime``: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def holder(lease: dict[str, Any] | None) -> str | None:
    """Who holds the Lease (None: nobody)."""
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or None


def expired(lease: dict[str, Any], now: datetime) -> bool:
    """Whether the holder let the Lease run out (a Lease without a holder or a renewal is free)."""
    spec = lease.get("spec") or {}
    renewed, duration = spec.get("renewTime"), spec.get("leaseDurationSeconds")
    if not spec.get("holderIdentity") or not renewed or duration is None:
        return True
    return datetime.fromisoformat(renewed) + timedelta(seconds=float(duration)) < now


def next_move(lease: dict[str, Any] | None, identity: str, now: datetime) -> Move:
    """What a candidate does about the Lease as it stands: create it, renew its own, take an expired one, or wait."""
    if lease is None:
        return "create"
    if holder(lease) == identity:
        return "renew"
    return "take" if expired(lease, now) else "wait"


def lease_body(
    namespace: str,
    identity: str,
    now: datetime,
    terms: LeaseTerms,
    current: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Lease this candidate writes: held by it, renewed now; a takeover counts one more transition. It carries
    the resourceVersion of ``current`` (the version it read), so a write based on a stale read is refused."""
    spec = dict((current or {}).get("spec") or {})
    ours = spec.get("holderIdentity") == identity
    if not ours:
        spec["acquireTime"] = micro_time(now)
        spec["leaseTransitions"] = int(spec.get("leaseTransitions", -1)) + 1 if current else 0
    spec.update(holderIdentity=identity, leaseDurationSeconds=max(1, round(terms.duration)), renewTime=micro_time(now))
    metadata: dict[str, Any] = {"name": LEASE_NAME, "namespace": namespace}
    if current is not None:
        metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


def released(lease: dict[str, Any]) -> dict[str, Any]:
    """The Lease given up by its holder: nobody holds it, so the next candidate takes it without waiting."""
    body = {**lease, "spec": {**(lease.get("spec") or {}), "holderIdentity": None, "leaseDurationSeconds": 1}}
    body["spec"] = {key: value for key, value in body["spec"].items() if value is not None}
    return body


class LeaderElector:
    """Runs ``lead`` while this candidate holds the Lease; cancels it as soon as the Lease is lost."""

    def __init__(
        self,
        api: ApiClient,
        namespace: str,
        identity: str,
        terms: LeaseTerms | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        release_on_cancel: bool = True,
    ) -> None:
        self._leases = CoordinationV1Api(api)
        self._namespace = namespace
        self.identity = identity
        self._terms = terms or LeaseTerms()
        self._now = now
        self._release_on_cancel = release_on_cancel
        self._lease: dict[str, Any] | None = None
        self.leading = False
        self.terms_led = 0  # how often this candidate became the leader

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Campaign, lead, and campaign again after losing the Lease, until cancelled (the Lease is then given up,
        unless ``release_on_cancel`` is off).
        ``lead`` ending by itself ends this too (an error in it propagates)."""
        try:
            while True:
                await self._acquire()
                log.info("%s leads (Lease %s/%s)", self.identity, self._namespace, LEASE_NAME)
                leading = asyncio.create_task(lead(), name="leading")
                renewing = asyncio.create_task(self._keep(), name="lease-renewal")
                try:
                    done, _ = await asyncio.wait({leading, renewing}, return_when=asyncio.FIRST_COMPLETED)
                finally:  # leading stops before anyone else may lead
                    try:
                        await stop(renewing)
                    finally:
                        await stop(leading)
                if leading in done:
                    return
                self.leading = False
                log.warning("%s lost the Lease; stepping down", self.identity)
        finally:
            if self.leading:
                self.leading = False
                if self._release_on_cancel:
                    await asyncio.shield(self._release())

    async def _acquire(self) -> None:
        while True:
            if await self.try_acquire():
                return
            await asyncio.sleep(self._terms.retry_period)  # the election's own cadence

    async def try_acquire(self) -> bool:
        """One look at the Lease: create, renew or take it if this candidate may. True when it now leads."""
        try:
            lease = self._lease = await self._read()
            move = next_move(lease, self.identity, self._now())
            if move == "wait":
                return False
            body = lease_body(self._namespace, self.identity, self._now(), self._terms, lease)
            self._lease = await (self._create(body) if move == "create" else self._replace(body))
        except ApiException as error:
            if error.status != CONFLICT:  # 409: another candidate wrote first; the next look re-reads
                log.warning("Lease %s: %s %s", LEASE_NAME, error.status, error.reason)
            return False
        except _TROUBLE as error:
            log.warning("Lease %s: %s", LEASE_NAME, error)
            return False
        if move != "renew":
            self.terms_led += 1
        self.leading = True
        return True

    async def _keep(self) -> None:
        """Renew every retry period; return (step down) once renewals failed for the renew deadline."""
        loop = asyncio.get_running_loop()
        last = loop.time()
        while loop.time() - last < self._terms.renew_deadline:
            await asyncio.sleep(self._terms.retry_period)
            if await self.try_acquire():
                last = loop.time()
            elif holder(self._lease) != self.identity:
                return  # someone else holds it now
        log.warning("%s could not renew the Lease for %.0f s", self.identity, self._terms.renew_deadline)

    async def _release(self) -> None:
        with contextlib.suppress(*_TROUBLE):
            lease = await self._read()
            if lease is not None and holder(lease) == self.identity:
                await self._replace(released(lease))

    async def _read(self) -> dict[str, Any] | None:
        try:
            call = self._leases.read_namespaced_lease(LEASE_NAME, self._namespace, _preload_content=False)
            return await read_json(cast(aiohttp.ClientResponse, await call))
        except ApiException as error:
            if error.status == NOT_FOUND:
                return None
            raise

    async def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        call = self._leases.create_namespaced_lease(self._namespace, cast(Any, body), _preload_content=False)
        return await read_json(cast(aiohttp.ClientResponse, await call))

    async def _replace(self, body: dict[str, Any]) -> dict[str, Any]:
        call = self._leases.replace_namespaced_lease(
            LEASE_NAME, self._namespace, cast(Any, body), _preload_content=False
        )
        return await read_json(cast(aiohttp.ClientResponse, await call))
