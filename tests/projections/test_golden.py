"""Golden histories: real event logs recorded from real runs (tests/golden/*.jsonl), folded on every test run into
the views the API serves, compared with the views recorded next to them (*.expected.json).

A change that alters an outcome must update them on purpose: ``UPDATE_GOLDEN=1 pytest tests/projections``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hades.core.codec import decode_event
from hades.core.ports import Recorded
from hades.http.views import job_detail
from hades.projections.views import ReadModels

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
HISTORIES = sorted(GOLDEN.glob("*.jsonl"))


def load(path: Path) -> list[Recorded]:
    lines = path.read_text().splitlines()
    return [Recorded(seq=n, event=decode_event(line.encode())) for n, line in enumerate(lines, start=1)]


def views_of(history: list[Recorded]) -> dict[str, Any]:
    models = ReadModels.folded(history)
    job_id = history[0].event.job_id
    job = models.jobs.get(job_id)
    assert job is not None
    return {
        "detail": job_detail(job, models.timing.get(job_id)),
        "metrics": models.metrics.snapshot(history[-1].event.at),
    }


def test_there_are_golden_histories() -> None:
    assert len(HISTORIES) >= 4


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
def test_a_golden_history_folds_to_its_recorded_views(path: Path) -> None:
    expected_path = path.with_suffix(".expected.json")
    actual = json.loads(json.dumps(views_of(load(path))))
    if os.environ.get("UPDATE_GOLDEN") == "1":
        expected_path.write_text(json.dumps(actual, indent=2, sort_keys=True) + "\n")
    assert actual == json.loads(expected_path.read_text())


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
def test_folding_in_pieces_equals_folding_at_once(path: Path) -> None:
    history = load(path)
    live = ReadModels.whole()
    for cut in range(len(history)):  # a follower that saw the log grow event by event, with re-deliveries
        for recorded in history[: cut + 1]:
            live.apply(recorded)
    assert views_of(history) == {
        "detail": job_detail(live.jobs.get(history[0].event.job_id), live.timing.get(history[0].event.job_id)),  # type: ignore[arg-type]
        "metrics": live.metrics.snapshot(history[-1].event.at),
    }
