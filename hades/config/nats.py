"""Where the event log lives: the NATS server, its JetStream store, and how appends wait for it."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from hades.config.fields import SECRET


class NatsSettings(BaseModel):
    """The NATS connection, the embedded server of `hades up`, and the streams on it."""

    # NATS
    nats_url: str | None = Field(
        default=None,
        validation_alias="NATS_URL",
        description="the NATS server(s), comma-separated; unset: `hades up` starts its own, other roles use "
        "nats://localhost:4222",
    )
    nats_username: str | None = Field(default=None, validation_alias="NATS_USERNAME", description="the NATS user")
    nats_password: str | None = Field(
        default=None,
        validation_alias="NATS_PASSWORD",
        repr=False,
        json_schema_extra=SECRET,
        description="the NATS user's password",
    )
    nats_tls_enabled: bool = Field(
        default=False, validation_alias="NATS_TLS_ENABLED", description="connect to NATS over TLS"
    )
    nats_port: int = Field(
        default=4222, validation_alias="NATS_PORT", description="the embedded server's port (`hades up` alone)"
    )
    nats_sync_interval: str | None = Field(
        default=None,
        validation_alias="NATS_SYNC_INTERVAL",
        description="the embedded server's fsync interval, e.g. 'always' (about 3x slower appends) or '10s'; "
        "unset: the server's 2 min",
    )
    data_dir: Path = Field(
        default=Path(".hades"),
        validation_alias="HADES_DATA_DIR",
        description="where `hades up` keeps the embedded server's JetStream store",
    )
    streams_file: Path | None = Field(
        default=None,
        validation_alias="HADES_STREAMS_FILE",
        description="the topology `streams apply` applies; unset: the streams.yaml shipped with Hades",
    )
    stream_replicas: int | None = Field(
        default=None,
        ge=1,
        le=5,
        validation_alias="HADES_STREAM_REPLICAS",
        description="`streams apply`: copies of every stream, bucket and object store (3 on a NATS cluster)",
    )
    snapshot_seconds: float = Field(
        default=300.0,
        ge=0,
        validation_alias="HADES_SNAPSHOT_SECONDS",
        description="seconds between snapshots of the read models to the object store (0 = never; start-up then "
        "replays the whole log)",
    )
    publish_timeout: float = Field(
        default=5.0,
        validation_alias="HADES_PUBLISH_TIMEOUT",
        description="seconds an append (an event, a log batch) waits for JetStream's acknowledgement",
    )
