"""Snapshots: restoring one taken at any point and folding the rest gives exactly the full fold."""

from __future__ import annotations

from hades.core.ports import Recorded
from hades.core.state import JobState
from hades.projections.snapshot import SNAPSHOT_FORMAT, restore, take
from hades.projections.views import ReadModels
from tests.projections.test_golden import HISTORIES, load


def whole_log() -> list[Recorded]:
    events = [recorded.event for path in HISTORIES for recorded in load(path)]
    return [Recorded(seq=n, event=event) for n, event in enumerate(events, start=1)]


def folded(log: list[Recorded]) -> ReadModels:
    """As a running process folds: ended jobs kept as summaries, which snapshots must carry too."""
    views = ReadModels()
    for recorded in log:
        views.apply(recorded)
    return views


def same(a: ReadModels, b: ReadModels) -> bool:
    return (a.jobs.jobs, a.jobs.active, a.timing.jobs, a.metrics) == (
        b.jobs.jobs,
        b.jobs.active,
        b.timing.jobs,
        b.metrics,
    )


def test_a_snapshot_taken_anywhere_resumes_to_the_same_views() -> None:
    log = whole_log()
    full = folded(log)
    assert any(not isinstance(job, JobState) for job in full.jobs.jobs.values())
    kinds = set()
    for cut in range(0, len(log) + 1, 3):
        partial = folded(log[:cut])
        kinds |= {type(job) for job in partial.jobs.jobs.values()}
        resumed = restore(take(partial))
        assert resumed is not None and resumed.jobs.last_seq == (log[cut - 1].seq if cut else 0)
        for recorded in log[cut:]:
            resumed.apply(recorded)
        assert same(resumed, full), cut
    assert JobState in kinds  # snapshots with jobs still running, and with ended ones, were both resumed


def test_a_snapshot_of_another_format_or_damaged_is_ignored() -> None:
    data = take(folded(whole_log()))
    assert restore(data.replace(f'"format":{SNAPSHOT_FORMAT}'.encode(), b'"format":999')) is None
    assert restore(data[: len(data) // 2]) is None
    assert restore(b"not json") is None
