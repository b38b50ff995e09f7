"""The per-job timing line: one INFO record on ``hades.timing`` per finished job, with the numbers of
``GET /jobs/{id}``'s ``timing``, written by the scheduler role alone and only for jobs that end while it runs."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hades.core.events import JobQueued, JobSubmitted, JobSucceeded
from hades.core.ports import Recorded
from hades.core.spec import JobSpec, Priority
from hades.projections.timing import TimingView
from hades.runtime import Roles
from hades.timing_log import TimingLog, timing_line
from tests.conftest import RunningHades, StartHades, eventually
from tests.http.test_prometheus import shell_job

PHASES = ("scheduling", "queue_wait", "volume", "images", "create", "start", "run", "logs", "teardown")
LINE = re.compile(
    r"job (?P<job>\S+) (?P<status>Succeeded|Failed|Stopped) total=(?P<total>\S+)s overhead=(?P<overhead>\S+)s "
    r"overhead_pct=(?P<overhead_pct>\S+)% " + " ".join(rf"{p}=(?P<{p}>\S+)" for p in PHASES) + "$"
)


class Collected(logging.Handler):
    """Every record of one logger, held on the logger itself: litestar reconfigures the root logger when an API
    starts, which takes pytest's caplog handler away."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def of(self, job_id: str) -> list[logging.LogRecord]:
        return [r for r in self.records if getattr(r, "job_id", None) == job_id]


@pytest.fixture
def timing_log() -> Iterator[Collected]:
    logger = logging.getLogger("hades.timing")
    handler, level = Collected(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_the_line_has_every_phase_and_the_extra_the_exact_numbers() -> None:
    summary = {
        "total": 1.23456,
        "overhead": 0.2,
        "overhead_pct": 16.2,
        "phases": {**dict.fromkeys(PHASES, 0.01), "images": None, "run": 1.03456},
    }

    message, fields = timing_line("j-1", "Failed", summary)

    match = LINE.match(message)
    assert match is not None, message
    assert (match["job"], match["status"], match["total"], match["overhead_pct"]) == ("j-1", "Failed", "1.235", "16.2")
    assert (match["run"], match["images"], match["teardown"]) == ("1.035s", "-", "0.010s")
    head = {"job_id": "j-1", "status": "Failed", "total": 1.23456, "overhead": 0.2, "overhead_pct": 16.2}
    assert fields == {**head, **summary["phases"]}


async def run_job(hades: RunningHades, script: str = "true") -> dict[str, Any]:
    return await hades.wait_terminal(await hades.submit(shell_job(script)))


async def test_a_finished_job_is_logged_once_with_its_timing(
    start_hades: StartHades, tmp_path: Path, timing_log: Collected
) -> None:
    await start_hades(
        Roles(scheduler=True, executor=True), HADES_EXECUTOR="process", HADES_PROCESS_WORKSPACES=str(tmp_path)
    )
    api = await start_hades(Roles(api=True))
    await start_hades(Roles(api=True))  # a second replica folds the same events and must not log them again

    detail = await run_job(api, "exit 3")

    records = await eventually(lambda: _for(timing_log, detail["id"]))
    assert len(records) == 1
    record = records[0]
    assert record.levelno == logging.INFO
    match = LINE.match(record.getMessage())
    assert match is not None, record.getMessage()
    timing = detail["timing"]
    fields: dict[str, Any] = vars(record)
    assert fields["status"] == "Failed" == match["status"]
    assert fields["job_id"] == detail["id"]
    assert {k: fields[k] for k in ("total", "overhead", "overhead_pct")} == {
        k: timing[k] for k in ("total", "overhead", "overhead_pct")
    }
    assert {p: fields[p] for p in PHASES} == timing["phases"]
    assert float(match["total"]) == pytest.approx(timing["total"], abs=0.0005)
    assert float(match["run"].removesuffix("s")) == pytest.approx(timing["phases"]["run"], abs=0.0005)
    assert float(match["overhead_pct"]) == timing["overhead_pct"]


async def test_a_job_that_timed_out_ran_its_timeout_and_little_else(
    start_hades: StartHades, tmp_path: Path, timing_log: Collected
) -> None:
    hades = await start_hades(
        Roles(api=True, scheduler=True, executor=True),
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(tmp_path),
    )
    job = {**shell_job("sleep 60"), "timeout_seconds": 2}

    detail = await hades.wait_terminal(await hades.submit(job))

    assert detail["reason"] == "job timed out after 2 seconds"
    timing = detail["timing"]
    # the step ran from its start (just after the attempt's) to the deadline; killing it is the overhead
    assert 1.5 < timing["phases"]["run"] <= 2.0
    assert timing["overhead"] < 1.0 and timing["overhead_pct"] < 40
    records = await eventually(lambda: _for(timing_log, detail["id"]))
    assert vars(records[0])["run"] == timing["phases"]["run"]


async def _for(timing_log: Collected, job_id: str) -> list[logging.LogRecord]:
    return timing_log.of(job_id)


async def test_jobs_that_ended_before_the_scheduler_started_are_not_logged_again(
    start_hades: StartHades, tmp_path: Path, timing_log: Collected
) -> None:
    env = {"HADES_EXECUTOR": "process", "HADES_PROCESS_WORKSPACES": str(tmp_path), "HADES_SNAPSHOT_SECONDS": "0"}
    first = await start_hades(**env)
    old = (await run_job(first))["id"]
    await eventually(lambda: _for(timing_log, old))
    await first.stop()
    timing_log.records.clear()

    second = await start_hades(**env)  # replays the whole log from sequence 1, every earlier job included
    new = (await run_job(second))["id"]
    await eventually(lambda: _for(timing_log, new))

    logged = [getattr(r, "job_id", None) for r in timing_log.records]
    assert logged == [new], "only the job that ended after start-up is logged"


def test_the_observer_skips_replayed_and_non_terminal_events(timing_log: Collected) -> None:
    at = datetime(2026, 12, 2, tzinfo=UTC)
    view, finished = TimingView(), []
    view.on_finished.append(finished.append)  # the phase histograms' hook: it must still see every job
    observer = TimingLog(view, live_from=3)
    events = [
        JobSubmitted(job_id="a", at=at, spec=JobSpec(name="a"), priority=Priority.HIGH),
        JobSucceeded(job_id="a", at=at + timedelta(seconds=1), attempt=1),  # replayed: at or before live_from
        JobSubmitted(job_id="b", at=at, spec=JobSpec(name="b"), priority=Priority.HIGH),
        JobQueued(job_id="b", at=at + timedelta(seconds=1), attempt=1, priority=Priority.HIGH),
        JobSucceeded(job_id="b", at=at + timedelta(seconds=2), attempt=1),
    ]
    for seq, event in enumerate(events, start=1):
        recorded = Recorded(seq=seq, event=event)
        view.apply(recorded)
        observer.on_event(recorded)

    assert [r.getMessage().split()[1] for r in timing_log.records] == ["b"]
    assert [timing.job_id for timing in finished] == ["a", "b"]
    assert timing_log.records[0].getMessage().startswith("job b Succeeded total=2.000s overhead=2.000s")
