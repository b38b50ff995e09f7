"""The dashboard: its login, its sessions, and what it shows."""

from __future__ import annotations

from pydantic import BaseModel, Field

from hades.config.fields import SECRET


class DashboardSettings(BaseModel):
    """The dashboard's settings (it is on only when its login and session secret are set)."""

    # dashboard: on only when the username, the bcrypt hash and the session secret are all set
    dashboard_username: str = Field(
        default="",
        validation_alias="DASHBOARD_USERNAME",
        description="the dashboard's login; with the password hash and the session secret it turns the dashboard on",
    )
    dashboard_password_hash: str = Field(
        default="",
        validation_alias="DASHBOARD_PASSWORD_HASH",
        repr=False,
        json_schema_extra=SECRET,
        description="a bcrypt hash of the dashboard's password",
    )
    dashboard_session_secret: str = Field(
        default="",
        validation_alias="DASHBOARD_SESSION_SECRET",
        repr=False,
        json_schema_extra=SECRET,
        description="signs dashboard sessions: at least 32 characters, or start-up fails",
    )
    dashboard_session_ttl: str = Field(
        default="12h",
        validation_alias="DASHBOARD_SESSION_TTL",
        description="how long a dashboard login lasts (Go duration syntax: 90m, 1h30m)",
    )
    dashboard_job_retention: str = Field(
        default="1h",
        validation_alias="DASHBOARD_JOB_RETENTION",
        description="how long ended jobs stay in the dashboard's list (they stay readable by id)",
    )
    dashboard_cookie_insecure: bool = Field(
        default=False,
        validation_alias="DASHBOARD_COOKIE_INSECURE",
        description="drop Secure from the session cookie, for plain-HTTP development only",
    )
    dashboard_trusted_proxies: str = Field(
        default="",
        validation_alias="DASHBOARD_TRUSTED_PROXIES",
        description="comma-separated addresses or CIDR ranges of proxies whose X-Forwarded-For the login lockout "
        "believes; empty = none",
    )
    hades_version: str = Field(
        default="dev", validation_alias="HADES_VERSION", description="the version the dashboard shows"
    )
    secret_redact_mode: str = Field(
        default="smart",
        validation_alias="SECRET_REDACT_MODE",
        description="the dashboard's metadata masking: smart (values that look secret) or all (every value)",
    )
    secret_key_patterns: str = Field(
        default="",
        validation_alias="SECRET_KEY_PATTERNS",
        description="a regex of metadata keys whose values are masked; empty = the built-in pattern",
    )
