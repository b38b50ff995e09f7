"""After the dust settles: what the raw event stream, the step markers, the log views and the receiver say happened.

Every check reads a source of truth of its own: terminal events are counted in ``HADES_EVENTS`` itself (not in a
projection), a step's completion in the marker file its script appends to, a webhook in what the receiver read.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from nats.js import JetStreamContext

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.topology import EVENTS_STREAM

TERMINAL = ("succeeded", "failed", "stopped")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "chaos"


def job_body(index: int, markers: Path, hook: str) -> dict[str, Any]:
    """A one-step job for the process executor: two log lines, then a marker line ``<job id> <job id>-<attempt>``
    (the workspace's name) once the step ran to its end."""
    script = f'echo "line 1 of $UUID"; echo "line 2 of $UUID"; echo "$UUID $(basename "$PWD")" >> {markers}'
    step = {"id": 1, "image": "busybox", "script": script}
    return {"name": f"chaos-{index}", "status_callback_url": hook, "steps": [step]}


async def ended(js: JetStreamContext) -> set[str]:
    """Ids of the jobs with a terminal event in the stream (by subject: no decoding)."""
    ids: set[str] = set()
    for kind in TERMINAL:
        info = await js.stream_info(EVENTS_STREAM, subjects_filter=f"hades.events.*.{kind}")
        ids.update(subject.split(".")[2] for subject in info.state.subjects or {})
    return ids


@dataclass
class Outcome:
    """Every job's terminal events, read from the raw stream."""

    submitted: set[str] = field(default_factory=set)
    ends: dict[str, list[tuple[str, float]]] = field(default_factory=lambda: collections.defaultdict(list))
    reasons: collections.Counter[str] = field(default_factory=collections.Counter)  # why jobs failed, how often

    def end_time(self, job_id: str) -> float:
        return self.ends[job_id][0][1]

    def kind(self, job_id: str) -> str:
        return self.ends[job_id][0][0]


async def read_outcome(store: NatsEventStore) -> Outcome:
    """Every event up to the stream's last one now (a replay would go on following live ones)."""
    outcome = Outcome()
    last = await store.stream_last_seq()
    async with contextlib.aclosing(store.replay()) as events:
        async for recorded in events:
            event = recorded.event
            if event.type == "submitted":
                outcome.submitted.add(event.job_id)
            elif event.type in TERMINAL:
                outcome.ends[event.job_id].append((event.type, event.at.timestamp()))
                if event.type == "failed":
                    outcome.reasons[event.reason] += 1
            if recorded.seq >= last:
                break
    return outcome


def completions(markers: Path) -> collections.Counter[tuple[str, int]]:
    """How many times each (job, attempt) ran its step to the end."""
    counts: collections.Counter[tuple[str, int]] = collections.Counter()
    for line in markers.read_text().splitlines() if markers.exists() else []:
        job_id, workspace = line.split()
        counts[(job_id, int(workspace.rsplit("-", 1)[1]))] += 1
    return counts


async def missing_log_lines(api_url: str, job_ids: list[str]) -> dict[str, list[str]]:
    """Per job, the lines its step printed that its log view (GET /jobs/{id}/logs) lacks."""
    limit = asyncio.Semaphore(16)

    async def missing(client: httpx.AsyncClient, job_id: str) -> tuple[str, list[str]]:
        async with limit:
            response = await client.get(f"{api_url}/jobs/{job_id}/logs")
        assert response.status_code == 200, response.text
        seen = {line["message"] for batch in response.json()["logs"] for line in batch["logs"] or []}
        return job_id, [text for text in (f"line 1 of {job_id}", f"line 2 of {job_id}") if text not in seen]

    async with httpx.AsyncClient(timeout=30) as client:
        results = await asyncio.gather(*(missing(client, job_id) for job_id in job_ids))
    return {job_id: lines for job_id, lines in results if lines}


@dataclass
class Fault:
    """One fault of a campaign: when it was injected and which jobs were accepted during its phase."""

    kind: str
    injected: float
    jobs: list[str]
    accepted_after: list[str]

    def recovery(self, outcome: Outcome) -> dict[str, float]:
        """Seconds from the fault to the first end of a job accepted after it, and to the phase's last end; and the
        longest stretch from the fault to that last end in which no job at all ended (the outage as the jobs saw it:
        a job accepted just after the fault may still end before the fault took effect, as through a SIGTERM)."""
        firsts = [outcome.end_time(j) for j in self.accepted_after if j in outcome.ends]
        drained = max(outcome.end_time(j) for j in self.jobs)
        return {
            "first_end_after_fault_s": round(min(firsts) - self.injected, 2) if firsts else -1.0,
            "longest_pause_in_ends_s": round(longest_pause(outcome, self.injected, drained), 2),
            "backlog_drained_s": round(drained - self.injected, 2),
        }


def longest_pause(outcome: Outcome, start: float, end: float) -> float:
    """The longest time between ``start``, the ends of any jobs in between, and ``end`` with no job ending."""
    ends = sorted(at for job_ends in outcome.ends.values() for _, at in job_ends if start < at < end)
    marks = [start, *ends, end]
    return max(later - earlier for earlier, later in itertools.pairwise(marks))


def write_recovery(test: str, figures: dict[str, Any]) -> None:
    """Merge this test's figures into test-artifacts/chaos/recovery.json (one key per test)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / "recovery.json"
    recorded = json.loads(path.read_text()) if path.exists() else {}
    recorded[test] = {**figures, "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path.write_text(json.dumps(recorded, indent=2) + "\n")
