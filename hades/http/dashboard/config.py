"""The dashboard's configuration, checked once at start-up: a bad value stops the API with a message naming it."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import timedelta

from hades.config import Settings
from hades.core.redact import Redactor

MIN_SECRET_LENGTH = 32
_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class DashboardConfigError(ValueError):
    """A dashboard setting that cannot be used."""


def parse_go_duration(text: str, name: str) -> timedelta:
    """Go's ``time.ParseDuration`` (``12h``, ``1h30m``, ``90s``, ``500ms``); a bare ``0`` is zero."""
    text = text.strip()
    if text in ("0", "-0", "+0"):
        return timedelta(0)
    sign, body = (-1, text[1:]) if text.startswith("-") else (1, text.removeprefix("+"))
    position, seconds = 0, 0.0
    for match in _GO_DURATION.finditer(body):
        if match.start() != position:
            break
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not body or position != len(body):
        raise DashboardConfigError(f"{name}: {text!r} is not a duration (use e.g. 12h, 90m, 30s)")
    return timedelta(seconds=sign * seconds)


def parse_networks(text: str) -> tuple[Network, ...]:
    """``DASHBOARD_TRUSTED_PROXIES``: comma-separated addresses or CIDR ranges; empty trusts none."""
    networks = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise DashboardConfigError(
                f"DASHBOARD_TRUSTED_PROXIES: {item!r} is not an IP address or CIDR range"
            ) from None
    return tuple(networks)


@dataclass(frozen=True)
class DashboardConfig:
    """What the dashboard routes need to know."""

    username: str
    password_hash: bytes
    secret: bytes
    session_ttl: timedelta
    job_retention: timedelta
    version: str
    cookie_secure: bool
    trusted_proxies: tuple[Network, ...]
    redactor: Redactor

    @classmethod
    def from_settings(cls, settings: Settings) -> DashboardConfig | None:
        """None when the dashboard is off (any of the three required variables unset)."""
        if not (settings.dashboard_username and settings.dashboard_password_hash and settings.dashboard_session_secret):
            return None
        if len(settings.dashboard_session_secret) < MIN_SECRET_LENGTH:
            raise DashboardConfigError(f"DASHBOARD_SESSION_SECRET must be at least {MIN_SECRET_LENGTH} characters")
        if not re.fullmatch(r"\$2[abxy]?\$\d\d\$[./A-Za-z0-9]{53}", settings.dashboard_password_hash):
            raise DashboardConfigError("DASHBOARD_PASSWORD_HASH is not a bcrypt hash ($2a$/$2b$/$2y$...)")
        ttl = parse_go_duration(settings.dashboard_session_ttl, "DASHBOARD_SESSION_TTL")
        retention = parse_go_duration(settings.dashboard_job_retention, "DASHBOARD_JOB_RETENTION")
        try:
            redactor = Redactor(settings.secret_redact_mode, settings.secret_key_patterns)
        except ValueError as error:
            raise DashboardConfigError(str(error)) from None
        return cls(
            username=settings.dashboard_username,
            password_hash=settings.dashboard_password_hash.encode(),
            secret=settings.dashboard_session_secret.encode(),
            session_ttl=ttl if ttl > timedelta(0) else timedelta(hours=12),
            job_retention=retention if retention > timedelta(0) else timedelta(hours=1),
            version=settings.hades_version,
            cookie_secure=not settings.dashboard_cookie_insecure,
            trusted_proxies=parse_networks(settings.dashboard_trusted_proxies),
            redactor=redactor,
        )
