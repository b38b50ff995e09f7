"""The notifier: logs forwarded to a job's callback_url, and the job-status webhook, each retried with backoff."""

from __future__ import annotations

from pydantic import BaseModel, Field

from hades.config.fields import SECRET


class LogForwardSettings(BaseModel):
    """How a job's logs are POSTed to its callback_url."""

    # notifier: logs forwarded to callback_url
    log_forward_max_attempts: int = Field(
        default=6,
        ge=1,
        validation_alias="LOG_FORWARD_MAX_ATTEMPTS",
        description="attempts in all to POST a job's logs to its callback_url",
    )
    log_forward_timeout: float = Field(
        default=10.0,
        gt=0,
        lt=30,
        validation_alias="LOG_FORWARD_TIMEOUT",
        description="seconds (below 30, the consumer's ack wait) for one log-forwarding attempt",
    )
    log_forward_backoff_base: float = Field(
        default=1.0,
        ge=0,
        validation_alias="LOG_FORWARD_BACKOFF_BASE",
        description="seconds: the log-forwarding backoff's first ceiling (doubled per attempt, full jitter)",
    )
    log_forward_backoff_max: float = Field(
        default=60.0, ge=0, validation_alias="LOG_FORWARD_BACKOFF_MAX", description="seconds: that backoff's cap"
    )


class WebhookSettings(BaseModel):
    """How the job-status webhook is sent to status_callback_url."""

    # notifier: the job-status webhook sent to status_callback_url
    webhook_max_attempts: int = Field(
        default=8,
        ge=1,
        validation_alias="WEBHOOK_MAX_ATTEMPTS",
        description="attempts in all to POST the job-status webhook; the last failed one is recorded final",
    )
    webhook_timeout: float = Field(
        default=10.0,
        gt=0,
        lt=30,
        validation_alias="WEBHOOK_TIMEOUT",
        description="seconds (below 30, the consumer's ack wait) for one attempt: connect, send, response head",
    )
    webhook_backoff_base: float = Field(
        default=1.0,
        ge=0,
        validation_alias="WEBHOOK_BACKOFF_BASE",
        description="seconds: the webhook backoff's first ceiling (doubled per attempt, full jitter)",
    )
    webhook_backoff_max: float = Field(
        default=300.0, ge=0, validation_alias="WEBHOOK_BACKOFF_MAX", description="seconds: that backoff's cap"
    )
    webhook_secret: str = Field(
        default="",
        validation_alias="WEBHOOK_SECRET",
        repr=False,
        json_schema_extra=SECRET,
        description="signs every webhook attempt (X-Hades-Signature) when set",
    )
