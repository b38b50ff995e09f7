"""One log line per finished job saying where its time went: logger ``hades.timing``, INFO,

``job <id> Succeeded total=1.234s overhead=0.210s overhead_pct=17.0% scheduling=0.004s queue_wait=0.012s ...``

with the same fields (in seconds, unrounded) as the record's ``extra``. The numbers are the timing read model's,
the ones ``GET /jobs/{id}`` and ``hades timing`` show. The scheduler role logs it (one per deployment however many
API replicas run), as it folds each terminal event that arrived live, never for the history replayed at start-up.
"""

from __future__ import annotations

import logging
from typing import Any

from hades.core.events import TERMINAL_TYPES
from hades.core.ports import Recorded
from hades.projections.timing import JobTiming, TimingView

log = logging.getLogger("hades.timing")


def timing_line(job_id: str, status: str, summary: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The message and the ``extra`` fields for one job's timing summary (``JobTiming.summary()``)."""
    phases: dict[str, float | None] = summary["phases"]
    fields: dict[str, Any] = {
        "job_id": job_id,
        "status": status,
        "total": summary["total"],
        "overhead": summary["overhead"],
        "overhead_pct": summary["overhead_pct"],
        **phases,
    }
    pct = summary["overhead_pct"]
    words = [
        f"job {job_id} {status}",
        f"total={_seconds(summary['total'])}",
        f"overhead={_seconds(summary['overhead'])}",
        f"overhead_pct={'-' if pct is None else f'{pct:.1f}%'}",
        *(f"{name}={_seconds(value)}" for name, value in phases.items()),
    ]
    return " ".join(words), fields


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"


class TimingLog:
    """Logs a job's timing when its terminal event is folded, if that came after ``live_from`` (the stream's last
    sequence when the process started).

    The timing view hands an ending job to its ``on_finished`` listeners while folding the terminal event (and may
    then drop it), so the log takes the job there, and writes the line from the projection runner's observer call
    for that same event, which knows its sequence.
    """

    def __init__(self, timing: TimingView, live_from: int) -> None:
        self._live_from = live_from
        self._ending: JobTiming | None = None
        timing.on_finished.append(self._on_finished)

    def _on_finished(self, timing: JobTiming) -> None:
        self._ending = timing

    def on_event(self, recorded: Recorded) -> None:
        """Called by the projection runner after each event is folded into the views."""
        timing, self._ending = self._ending, None
        event = recorded.event
        if timing is None or recorded.seq <= self._live_from or timing.job_id != event.job_id:
            return
        if event.type not in TERMINAL_TYPES:
            return
        message, fields = timing_line(event.job_id, event.type.capitalize(), timing.summary())
        log.info("%s", message, extra=fields)
