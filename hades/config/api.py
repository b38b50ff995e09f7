"""The HTTP API: where it listens, who may use it, and where the callback URLs it accepts may point."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from hades.config.fields import SECRET
from hades.core.urls import CallbackPolicy


class ApiSettings(BaseModel):
    """Where the API listens and where clients find it."""

    # API
    api_host: str = Field(
        default="0.0.0.0", validation_alias="API_HOST", description="the address the API and /metrics listen on"
    )
    api_port: int = Field(default=8080, validation_alias="API_PORT", description="the API's port")
    auth_key: str = Field(
        default="",
        validation_alias="AUTH_KEY",
        repr=False,
        json_schema_extra=SECRET,
        description="the Basic-auth password (user `hades`) for /build and /jobs...; empty: open",
    )
    log_manager_port: int = Field(
        default=8081, validation_alias="LOG_MANAGER_PORT", description="where `hades logmanager` listens"
    )
    api_url: str | None = Field(
        default=None,
        validation_alias="HADES_API_URL",
        description="where the CLI finds a running Hades, and what executors give pipeline stages as their "
        "HADES_API_URL; unset: http://localhost:$API_PORT",
    )
    max_request_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        validation_alias="MAX_REQUEST_BYTES",
        description="bytes: the largest request body the API reads; a larger one is refused with 413",
    )

    @property
    def client_api_url(self) -> str:
        """Where the CLI finds a running Hades."""
        return self.api_url or f"http://localhost:{self.api_port}"


class CallbackSettings(BaseModel):
    """The policy that callback URLs must meet, against SSRF."""

    # where callback_url and status_callback_url may point (against SSRF); see docs/security.md
    callback_allowed_hosts: str = Field(
        default="",
        validation_alias="CALLBACK_ALLOWED_HOSTS",
        description="where callback URLs may point: comma-separated host names, patterns like *.example.com, and "
        "CIDR ranges; empty = any host",
    )
    callback_deny_private: bool = Field(
        default=False,
        validation_alias="CALLBACK_DENY_PRIVATE",
        description="refuse callback URLs to loopback, private, link-local, unique-local and multicast addresses "
        "after resolution",
    )

    @field_validator("callback_allowed_hosts")
    @classmethod
    def _callback_hosts_parse(cls, value: str) -> str:
        CallbackPolicy.parse(value)  # a bad entry stops the process at start-up, naming the entry
        return value

    @property
    def callback_policy(self) -> CallbackPolicy:
        """Where callback URLs may point."""
        return CallbackPolicy.parse(self.callback_allowed_hosts, self.callback_deny_private)
