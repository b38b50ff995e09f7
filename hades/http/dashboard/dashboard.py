"""The dashboard's per-process parts: its configuration, the login lockout and the live job feed."""

from __future__ import annotations

from dataclasses import dataclass, field

from hades.http.dashboard.config import DashboardConfig
from hades.http.dashboard.feed import JobFeed
from hades.http.dashboard.session import Lockout, sign_session


@dataclass
class Dashboard:
    """Handed to the app when the dashboard is on."""

    config: DashboardConfig
    feed: JobFeed
    lockout: Lockout = field(default_factory=Lockout)
    metrics_every: float = 5.0  # seconds between metrics frames on /api/stream
    heartbeat: float = 25.0  # seconds between ": ping" comments on both streams

    def session_token(self, username: str, expires: int) -> str:
        """A signed session for ``username`` until the unix second ``expires``."""
        return sign_session(self.config.secret, username, expires)
