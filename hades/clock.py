"""The wall clock, behind the ``Clock`` port so tests and replays can control time."""

from __future__ import annotations

from datetime import UTC, datetime


class SystemClock:
    """UTC now, from the system."""

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)
