"""How a process reports on itself: debug logging, /metrics and tracing."""

from __future__ import annotations

from pydantic import BaseModel, Field


class GeneralSettings(BaseModel):
    """What every process reads, whatever its roles (the documents' "general" section, which has no heading)."""

    debug: bool = Field(default=False, validation_alias="DEBUG", description="debug logging")


class ObservabilitySettings(BaseModel):
    """Where metrics are served and traces sent."""

    # observability
    metrics_port: int = Field(
        default=9090,
        ge=0,
        validation_alias="METRICS_PORT",
        description="where a process without the API role serves /metrics and /health (its readiness), on "
        "API_HOST (0 = not at all)",
    )
    otel_endpoint: str | None = Field(
        default=None,
        validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT",
        description="turns tracing on: the collector's OTLP/HTTP base URL (/v1/traces is added)",
    )
    otel_traces_endpoint: str | None = Field(
        default=None,
        validation_alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        description="turns tracing on: the exact OTLP/HTTP traces URL",
    )
