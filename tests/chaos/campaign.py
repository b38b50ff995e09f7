"""A chaos campaign: phases of submitted jobs, a fault injected in the middle of each, the backlog drained after it.

Then one audit over everything: exactly one terminal event per job in the raw stream, no step completed twice for
one attempt, every printed line in its log view, every webhook delivered; and the recovery time of each fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from nats.aio.client import Client
from nats.js import JetStreamContext
from prometheus_client.parser import text_string_to_metric_families

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.adapters.nats.topology import EVENTS_STREAM
from tests.chaos.audit import Fault, completions, ended, missing_log_lines, read_outcome, write_recovery
from tests.chaos.fleet import RoleFleet, Submitter
from tests.conftest import eventually
from tests.support.receiver import Receiver

Inject = Callable[[], Awaitable[None]]


@dataclass
class Campaign:
    """Jobs submitted through faults against one fleet, and what is known of each fault."""

    fleet: RoleFleet
    nc: Client
    submitter: Submitter
    markers: Path
    receiver: Receiver
    jobs_per_fault: int
    rate: float
    faults: list[Fault] = field(default_factory=list)

    async def accepted_at_least(self, count: int) -> bool:
        return len(self.submitter.accepted) >= count

    async def phase(self, kind: str, inject: Inject, drain_timeout: float = 90) -> None:
        """Submit ``jobs_per_fault`` jobs, inject the fault once a third of them is in, then wait for all to end."""
        before = set(self.submitter.accepted)
        submitting = asyncio.create_task(self.submitter.submit_many(self.jobs_per_fault, self.rate))
        try:
            await eventually(lambda: self.accepted_at_least(len(before) + self.jobs_per_fault // 3), timeout=60)
            injected = time.time()
            await inject()
            await submitting
        finally:
            if not submitting.done():
                submitting.cancel()
                with contextlib.suppress(BaseException):
                    await submitting
        jobs = [job_id for job_id in self.submitter.accepted if job_id not in before]
        after = [job_id for job_id, at in self.submitter.accepted.items() if at > injected]
        self.faults.append(Fault(kind, injected, jobs, after))
        await self.drained(drain_timeout)
        print(f"\n{kind}: {len(jobs)} jobs, drained {time.time() - injected:.1f} s after the fault", flush=True)

    async def drained(self, timeout: float = 90) -> None:
        """Until every accepted job has a terminal event in the stream."""
        js = self.nc.jetstream()

        async def all_ended() -> bool | int:
            return not set(self.submitter.accepted) - await ended(js)

        try:
            await eventually(all_ended, timeout=timeout, interval=0.25)
        except AssertionError as error:
            missing = sorted(set(self.submitter.accepted) - await ended(js))
            raise AssertionError(f"{error}: {await self.stuck(js, missing)}") from None

    async def stuck(self, js: JetStreamContext, missing: list[str]) -> str:
        """What the jobs that should have moved on went through, and the consumers' state, for a failure message."""
        store = NatsEventStore(self.nc)
        histories = {job_id: [r.event.type for r in await store.history(job_id)] for job_id in missing[:5]}
        consumers = {}
        for name in ("scheduler", "executor-low", "executor-medium", "executor-high", "notifier", "webhooks"):
            info = await js.consumer_info(EVENTS_STREAM, name)
            consumers[name] = (info.num_pending, info.num_ack_pending, info.num_redelivered)
        return f"{len(missing)} jobs, e.g. {histories}; (pending, ack pending, redelivered): {consumers}"

    async def views_caught_up(self, seq: int, timeout: float = 15) -> None:
        """Until every API replica's views hold the log up to ``seq`` (its ``hades_views_sequence``): a replica
        follows the log again within seconds of a NATS restart, and reads answer from its views."""

        async def behind() -> dict[str, float]:
            lagging = {}
            async with httpx.AsyncClient(timeout=5) as client:
                for url in self.fleet.api_urls:
                    folded = views_sequence((await client.get(f"{url}/metrics")).text)
                    if folded < seq:
                        lagging[url] = folded
            return lagging

        async def caught_up() -> bool:
            return not await behind()

        try:
            await eventually(caught_up, timeout=timeout, interval=0.25)
        except AssertionError as error:
            raise AssertionError(f"{error}: views behind sequence {seq}: {await behind()}") from None

    async def log_story(self, api_url: str, job_ids: list[str]) -> str:
        """For a failure message: each job's events (type, attempt, stream sequence) and its log batches (step,
        attempt, lines) as the raw streams hold them, and the attempt the API's logs answer shows."""
        store, logs = NatsEventStore(self.nc), NatsLogStore(self.nc)
        story = {}
        for job_id in job_ids:
            events = [(r.event.type, getattr(r.event, "attempt", None), r.seq) for r in await store.history(job_id)]
            batches = [(b.step_id, b.attempt, len(b.logs or [])) for b in await logs.read(job_id)]
            async with httpx.AsyncClient(timeout=10) as client:
                shown = (await client.get(f"{api_url}/jobs/{job_id}/logs")).headers.get("X-Hades-Attempt")
                views = [(await client.get(f"{url}/jobs/{job_id}")).text[:300] for url in self.fleet.api_urls]
            story[job_id] = {"events": events, "log batches": batches, "attempt shown": shown, "views": views}
        return f"missing log lines; the jobs' events and log batches: {story}"

    async def audit(self, test: str, api_url: str) -> dict[str, Any]:
        """Assert the guarantees over every job, write the recovery figures, and return them."""
        outcome = await read_outcome(NatsEventStore(self.nc))
        accepted = list(self.submitter.accepted)
        assert self.submitter.refused == 0
        lost = [j for j in accepted if j not in outcome.ends]
        twice = {j: ends for j, ends in outcome.ends.items() if len(ends) > 1}
        unended = outcome.submitted - set(outcome.ends)  # also jobs whose 200 never reached a client
        doubled = outcome.submitted - set(accepted)  # a retried request whose first had landed after all
        assert lost == [], f"{len(lost)} accepted jobs never ended"
        assert doubled == set(), f"{len(doubled)} jobs made by retried submissions (Idempotency-Key)"
        assert twice == {}, f"{len(twice)} jobs ended more than once"
        assert unended == set(), f"{len(unended)} submitted jobs never ended"

        runs = completions(self.markers)
        twice_run = [key for key, count in runs.items() if count > 1]
        assert twice_run == []
        succeeded = [j for j in accepted if outcome.kind(j) == "succeeded"]
        assert all(any(job == j for job, _ in runs) for j in succeeded)
        await self.views_caught_up(await NatsEventStore(self.nc).stream_last_seq())
        missing_lines = await missing_log_lines(api_url, succeeded)
        assert missing_lines == {}, await self.log_story(api_url, sorted(missing_lines)[:3])

        def unhooked() -> list[str]:
            hooked = {r.json()["job_id"] for r in self.receiver.requests}  # type: ignore[index]
            return sorted(set(accepted) - hooked)

        async def hooks_in() -> bool:
            return not unhooked()

        try:
            await eventually(hooks_in, timeout=60, interval=0.25)
        except AssertionError as error:
            raise AssertionError(f"{error}: {await self.stuck(self.nc.jetstream(), unhooked())}") from None

        figures = {
            "jobs_submitted": len(accepted),
            "submission_retries": self.submitter.retries,  # connection errors (a role or node down) and 5xx
            "submission_5xx": dict(self.submitter.server_errors),
            "outcomes": {kind: sum(outcome.kind(j) == kind for j in accepted) for kind in ("succeeded", "failed")},
            "failure_reasons": dict(outcome.reasons),
            "jobs_lost": len(lost),
            "duplicate_terminal_states": len(twice),
            "attempts_completed_twice": len(twice_run),
            "attempts_completed": sum(runs.values()),
            "webhooks_received": len(self.receiver.requests),
            "faults": {fault.kind: fault.recovery(outcome) for fault in self.faults},
        }
        write_recovery(test, figures)
        print(f"\n{test}: {figures}", flush=True)
        return figures


def views_sequence(exposition: str) -> float:
    """``hades_views_sequence`` from a ``/metrics`` answer."""
    for family in text_string_to_metric_families(exposition):
        if family.name == "hades_views_sequence":
            return family.samples[0].value
    raise AssertionError("no hades_views_sequence in /metrics")
