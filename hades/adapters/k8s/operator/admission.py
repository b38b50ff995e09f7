"""Which waiting BuildJobs start now: pure functions, the Go operator's concurrency gate without its Job suspension.

At most ``limit`` BuildJobs run at once; when a slot frees, the waiting ones are admitted highest
``hades.tum.de/priority`` first (a missing or unreadable label counts as 1, Go's default), the oldest
``creationTimestamp`` first within a priority, and the name last so that the order is total.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hades.adapters.k8s.pods import LABEL_PRIORITY

#: MAX_PARALLELISM when it is unset or 0, as in Go.
DEFAULT_PARALLELISM = 100
DEFAULT_PRIORITY = 1


@dataclass(frozen=True, slots=True)
class Candidate:
    """A BuildJob whose job waits for a slot."""

    namespace: str
    name: str
    priority: int
    created: str  # RFC 3339 in UTC: sorts in time order as text

    @classmethod
    def of(cls, buildjob: dict[str, Any]) -> Candidate:
        """The candidate a BuildJob is (its priority label, its creation time)."""
        metadata = buildjob.get("metadata") or {}
        return cls(
            namespace=str(metadata.get("namespace", "")),
            name=str(metadata.get("name", "")),
            priority=priority_of(buildjob),
            created=str(metadata.get("creationTimestamp", "")),
        )

    @property
    def key(self) -> tuple[str, str]:
        """Namespace and name."""
        return self.namespace, self.name


def priority_of(buildjob: dict[str, Any]) -> int:
    """The ``hades.tum.de/priority`` label as a number, else the same key in ``spec.metadata``, else 1."""
    labels = (buildjob.get("metadata") or {}).get("labels") or {}
    spec_metadata = (buildjob.get("spec") or {}).get("metadata") or {}
    for value in (labels.get(LABEL_PRIORITY), spec_metadata.get(LABEL_PRIORITY)):
        try:
            return int(str(value))
        except ValueError:
            continue
    return DEFAULT_PRIORITY


def effective_limit(max_parallelism: int) -> int:
    """MAX_PARALLELISM as the operator applies it: 0 (unset) means 100."""
    return max_parallelism if max_parallelism > 0 else DEFAULT_PARALLELISM


def admission_order(waiting: Iterable[Candidate]) -> list[Candidate]:
    """Highest priority first, then the oldest, then by name."""
    return sorted(waiting, key=lambda c: (-c.priority, c.created, c.namespace, c.name))


def admit(waiting: Iterable[Candidate], active: int, limit: int) -> list[Candidate]:
    """The candidates to start now, in order, given ``active`` running: never more than ``limit`` in all."""
    room = max(0, limit - active)
    return admission_order(waiting)[:room]
