"""What the HTTP handlers need, handed in by whoever builds the app (no globals chosen at import time)."""

from __future__ import annotations

from dataclasses import dataclass

from hades.core.ports import Clock, EventStore, LogStore
from hades.projections.jobs import JobsView
from hades.projections.runner import ProjectionRunner


@dataclass(frozen=True)
class ApiServices:
    """The API's collaborators."""

    store: EventStore
    logs: LogStore
    jobs: JobsView
    projections: ProjectionRunner
    clock: Clock
    auth_key: str = ""
