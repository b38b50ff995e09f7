"""What a job may carry beyond its steps: how long it may run, artifacts and inputs, and a pipeline's stages."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, Field, model_validator

from hades.config.fields import SECRET
from hades.core.spec import MAX_TIMEOUT_SECONDS
from hades.core.timeouts import TimeoutPolicy


class JobTimeoutSettings(BaseModel):
    """The longest a job runs, whatever its client sends: the API fixes each job's timeout when it accepts it."""

    # job timeouts: the API fixes each job's when it accepts it, and every executor enforces that one
    default_timeout_seconds: int = Field(
        default=0,
        ge=0,
        le=MAX_TIMEOUT_SECONDS,
        validation_alias="HADES_DEFAULT_TIMEOUT_SECONDS",
        description="seconds a job (or a pipeline's stage) that sets no timeout_seconds may run, counted from each "
        "attempt's start; 0: no default (the Go contract's forever), or HADES_MAX_TIMEOUT_SECONDS when that is set",
    )
    max_timeout_seconds: int = Field(
        default=0,
        ge=0,
        le=MAX_TIMEOUT_SECONDS,
        validation_alias="HADES_MAX_TIMEOUT_SECONDS",
        description="the most seconds any job or stage may run: a larger timeout_seconds is capped to it, not "
        "refused (the submitted event records the client's value); 0: no cap",
    )

    @model_validator(mode="after")
    def _default_within_max(self) -> Self:
        if self.max_timeout_seconds and self.default_timeout_seconds > self.max_timeout_seconds:
            raise ValueError("HADES_DEFAULT_TIMEOUT_SECONDS must not exceed HADES_MAX_TIMEOUT_SECONDS")
        return self

    @property
    def timeout_policy(self) -> TimeoutPolicy:
        """The rule the API applies to every job it accepts."""
        return TimeoutPolicy(self.default_timeout_seconds, self.max_timeout_seconds)


class ArtifactSettings(BaseModel):
    """How much a job may keep and be given."""

    # artifacts (docs/artifacts.md): kept in the object store HADES_ARTIFACTS, whose retention streams.yaml sets
    artifact_max_bytes: int = Field(
        default=256 * 2**20,
        gt=0,
        validation_alias="ARTIFACT_MAX_BYTES",
        description="bytes of artifacts kept per job (what does not fit is listed as skipped), and of inputs placed",
    )
    artifact_fetch_timeout: float = Field(
        default=60.0, gt=0, validation_alias="ARTIFACT_FETCH_TIMEOUT", description="seconds to fetch one URL input"
    )


class PipelineSettings(BaseModel):
    """How large a pipeline may grow, and what signs its tokens."""

    # pipelines (docs/pipelines.md)
    max_pipeline_stages: int = Field(
        default=50,
        ge=1,
        validation_alias="MAX_PIPELINE_STAGES",
        description="stages one pipeline may have, declared plus added by its stages",
    )
    pipeline_token_key: str = Field(
        default="",
        repr=False,
        json_schema_extra=SECRET,
        validation_alias="HADES_PIPELINE_TOKEN_KEY",
        description="the key that signs pipelines' tokens (API and executors alike); empty: one generated once and "
        "kept in KV HADES_SECRETS",
    )
