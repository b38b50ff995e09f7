"""What a job may carry beyond its steps: artifacts and inputs, and a pipeline's stages."""

from __future__ import annotations

from pydantic import BaseModel, Field

from hades.config.fields import SECRET


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
