"""Leader election through one Lease on the in-test API server: two candidates, one leader, a takeover."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import kubernetes_validate
import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from hades.adapters.k8s.operator.lease import (
    LEASE_NAME,
    LeaderElector,
    LeaseTerms,
    expired,
    lease_body,
    next_move,
    released,
)
from hades.tasks import stop
from tests.conftest import eventually
from tests.support.k8s_api import KubeApi

NAMESPACE = "ops"
API = "coordination.k8s.io/v1"
#: Short terms so a takeover takes about a second.
TERMS = LeaseTerms(duration=1.0, retry_period=0.1, renew_deadline=0.6)
NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


@pytest.fixture
async def kube() -> AsyncIterator[KubeApi]:
    async with KubeApi() as api:
        yield api


@pytest.fixture
async def api(kube: KubeApi) -> AsyncIterator[ApiClient]:
    async with ApiClient(Configuration(host=kube.url)) as client:
        yield client


class Candidate:
    """An elector whose ``lead`` records that it leads and reconciles until cancelled."""

    def __init__(self, api: ApiClient, identity: str, release_on_cancel: bool = True) -> None:
        self.elector = LeaderElector(api, NAMESPACE, identity, TERMS, release_on_cancel=release_on_cancel)
        self.leading = asyncio.Event()
        self.reconciled = 0
        self.task: asyncio.Task[None] | None = None

    async def lead(self) -> None:
        self.leading.set()
        try:
            while True:
                self.reconciled += 1
                await asyncio.sleep(0.01)  # stands for a reconcile pass
        finally:
            self.leading.clear()

    def start(self) -> Candidate:
        self.task = asyncio.create_task(self.elector.run(self.lead))
        return self

    async def stop(self) -> None:
        assert self.task is not None
        await stop(self.task)


def holder(kube: KubeApi) -> Any:
    lease = kube.get(NAMESPACE, "leases", LEASE_NAME, api=API) or {}
    return (lease.get("spec") or {}).get("holderIdentity")


async def until(condition: Callable[[], Any], timeout: float = 5.0) -> Any:
    return await eventually(lambda: asyncio.sleep(0, condition()), timeout)


def test_a_candidate_creates_renews_takes_an_expired_lease_or_waits() -> None:
    ours = lease_body(NAMESPACE, "a", NOW, LeaseTerms(duration=15))
    ours["metadata"]["resourceVersion"] = "7"
    assert next_move(None, "a", NOW) == "create"
    assert next_move(ours, "a", NOW) == "renew"
    assert next_move(ours, "b", NOW + timedelta(seconds=14)) == "wait"
    assert next_move(ours, "b", NOW + timedelta(seconds=16)) == "take"
    assert expired(released(ours), NOW)  # given up: free at once

    taken = lease_body(NAMESPACE, "b", NOW + timedelta(seconds=16), LeaseTerms(duration=15), ours)
    assert taken["spec"]["holderIdentity"] == "b" and taken["spec"]["leaseTransitions"] == 1
    assert taken["metadata"]["resourceVersion"] == "7"  # the write is conditional on what was read
    renewed = lease_body(NAMESPACE, "b", NOW + timedelta(seconds=20), LeaseTerms(duration=15), taken)
    assert renewed["spec"]["acquireTime"] == taken["spec"]["acquireTime"]
    assert renewed["spec"]["renewTime"] == "2026-12-03T09:00:20.000000Z"


@pytest.mark.parametrize("version", ["1.25.0", kubernetes_validate.latest_version()])
def test_the_lease_is_valid_kubernetes(version: str) -> None:
    first = lease_body(NAMESPACE, "operator-0", NOW, LeaseTerms())
    first["metadata"]["resourceVersion"] = "1"
    for lease in (first, lease_body(NAMESPACE, "operator-1", NOW, LeaseTerms(), first), released(first)):
        kubernetes_validate.validate(lease, version, strict=True)


async def test_of_two_candidates_one_leads_and_the_other_takes_over_when_it_stops_renewing(
    kube: KubeApi, api: ApiClient
) -> None:
    # neither gives the Lease up when stopped: a leader that stops renewing must lose it by expiry
    first = Candidate(api, "operator-0", release_on_cancel=False).start()
    second = Candidate(api, "operator-1", release_on_cancel=False).start()
    await until(lambda: first.leading.is_set() or second.leading.is_set())
    leader, follower = (first, second) if first.leading.is_set() else (second, first)
    assert holder(kube) == leader.elector.identity
    seen = follower.reconciled
    await until(lambda: leader.reconciled > 20)  # several renewals pass
    assert not follower.leading.is_set() and follower.reconciled == seen == 0

    await leader.stop()  # stops renewing, without giving the Lease up
    stopped = asyncio.get_running_loop().time()
    assert holder(kube) == leader.elector.identity
    await until(lambda: follower.leading.is_set())

    assert asyncio.get_running_loop().time() - stopped >= TERMS.duration * 0.5  # it waited for the expiry
    assert holder(kube) == follower.elector.identity
    assert (kube.get(NAMESPACE, "leases", LEASE_NAME, api=API) or {})["spec"]["leaseTransitions"] == 1
    await follower.stop()


async def test_a_leader_that_stops_cleanly_gives_the_lease_up_at_once(kube: KubeApi, api: ApiClient) -> None:
    first = Candidate(api, "operator-0").start()
    await until(first.leading.is_set)
    second = Candidate(api, "operator-1").start()
    await first.stop()

    assert holder(kube) is None
    await until(second.leading.is_set, timeout=TERMS.duration * 0.9)  # before the Lease could have expired
    await second.stop()


async def test_a_leader_steps_down_when_another_holds_the_lease(kube: KubeApi, api: ApiClient) -> None:
    candidate = Candidate(api, "operator-0").start()
    await until(candidate.leading.is_set)
    lease = kube.get(NAMESPACE, "leases", LEASE_NAME, api=API) or {}
    far = datetime.now(UTC) + timedelta(hours=1)
    kube.put(NAMESPACE, "leases", lease_body(NAMESPACE, "usurper", far, LeaseTerms(duration=3600), lease), api=API)

    await until(lambda: not candidate.leading.is_set())
    assert holder(kube) == "usurper" and candidate.elector.leading is False
    await candidate.stop()
    assert holder(kube) == "usurper"  # not ours to give up


async def test_a_write_on_a_stale_version_is_refused_and_the_candidate_reads_again(
    kube: KubeApi, api: ApiClient
) -> None:
    lapsed = lease_body(NAMESPACE, "gone", NOW, LeaseTerms(duration=1))
    kube.put(NAMESPACE, "leases", lapsed, api=API)
    kube.conflict("leases")  # another candidate writes first
    elector = LeaderElector(api, NAMESPACE, "operator-0", TERMS)

    assert await elector.try_acquire() is False  # 409: lost the race
    assert holder(kube) == "gone"
    assert await elector.try_acquire() is True  # re-read, still expired: taken
    assert holder(kube) == "operator-0"
    writes = [r for r in kube.requests if r[0] == "PUT"]
    assert len(writes) == 2
