"""Subject names, in one place, and the guard that keeps an id from turning into a wildcard."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")


def token(value: str) -> str:
    """``value`` as one subject token; a dot, ``*``, ``>`` or whitespace would address other subjects."""
    if not _TOKEN.match(value):
        raise ValueError(f"not a valid subject token: {value!r}")
    return value


def job_events(job_id: str) -> str:
    """Every event subject of one job: ``hades.events.<job_id>.>``."""
    return f"hades.events.{token(job_id)}.>"


def job_event(job_id: str, kind: str) -> str:
    """One event's subject: ``hades.events.<job_id>.<kind>`` (kind may have a qualifier, e.g. ``queued.high``)."""
    return f"hades.events.{token(job_id)}.{kind}"


def job_logs(job_id: str) -> str:
    """A job's log subject: ``hades.logs.<job_id>``."""
    return f"hades.logs.{token(job_id)}"
