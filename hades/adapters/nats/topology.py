"""The NATS topology from ``streams.yaml``: load it, apply it idempotently, check that it is there.

Only ``hades streams apply`` (and ``hades up``) change streams; running roles call :func:`verify` and refuse to
start against a server that lacks them, so no service silently rewrites a stream's configuration.

On a NATS cluster the same file is applied with a replica count for everything (``hades streams apply --replicas 3``
or ``HADES_STREAM_REPLICAS``): :meth:`Topology.with_replicas` sets it on every stream, key-value bucket and object
store; durable consumers ask for no count of their own and so follow their stream's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BucketNotFoundError, NotFoundError
from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)

EVENTS_STREAM = "HADES_EVENTS"
LOGS_STREAM = "HADES_LOGS"


class StreamSpec(BaseModel):
    """One stream as declared."""

    model_config = ConfigDict(extra="forbid")

    subjects: list[str]
    storage: Literal["file", "memory"] = "file"
    retention: Literal["limits", "workqueue", "interest"] = "limits"
    max_age: float = 0
    max_bytes: int = -1
    max_msgs: int = -1
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    duplicate_window: float = 120
    allow_direct: bool = True
    allow_atomic: bool = False
    replicas: int = 1

    def config(self, name: str) -> StreamConfig:
        """The nats-py stream configuration."""
        return StreamConfig(
            name=name,
            subjects=self.subjects,
            storage=StorageType(self.storage),
            retention=RetentionPolicy(self.retention),
            max_age=self.max_age,
            max_bytes=self.max_bytes,
            max_msgs=self.max_msgs,
            max_msgs_per_subject=self.max_msgs_per_subject,
            max_msg_size=self.max_msg_size,
            duplicate_window=self.duplicate_window,
            allow_direct=self.allow_direct,
            allow_atomic=self.allow_atomic or None,
            num_replicas=self.replicas,
        )


class ConsumerSpec(BaseModel):
    """One durable pull consumer as declared."""

    model_config = ConfigDict(extra="forbid")

    filter_subjects: list[str]
    ack_wait: float = 30
    max_deliver: int = -1
    max_ack_pending: int = 1000

    def config(self, name: str) -> ConsumerConfig:
        """The nats-py consumer configuration."""
        return ConsumerConfig(
            name=name,
            durable_name=name,
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            max_deliver=self.max_deliver,
            max_ack_pending=self.max_ack_pending,
            filter_subjects=self.filter_subjects,
        )


class BucketSpec(BaseModel):
    """One key-value bucket as declared."""

    model_config = ConfigDict(extra="forbid")

    history: int = 1
    ttl: float | None = None
    replicas: int = 1


class ObjectStoreSpec(BaseModel):
    """One object store as declared; ``max_age`` (seconds) and ``max_bytes`` are its stream's retention."""

    model_config = ConfigDict(extra="forbid")

    replicas: int = 1
    max_age: float | None = None
    max_bytes: int | None = None


class Topology(BaseModel):
    """Everything ``streams.yaml`` declares."""

    model_config = ConfigDict(extra="forbid")

    streams: dict[str, StreamSpec]
    consumers: dict[str, dict[str, ConsumerSpec]] = Field(default_factory=dict)
    key_value: dict[str, BucketSpec] = Field(default_factory=dict)
    object_stores: dict[str, ObjectStoreSpec] = Field(default_factory=dict)

    def with_replicas(self, replicas: int) -> Topology:
        """The same topology with ``replicas`` copies of every stream, bucket and object store (R3 on a cluster)."""
        if replicas < 1:
            raise ValueError(f"replicas must be at least 1, not {replicas}")
        copies = {"replicas": replicas}
        return self.model_copy(
            update={
                "streams": {name: spec.model_copy(update=copies) for name, spec in self.streams.items()},
                "key_value": {name: spec.model_copy(update=copies) for name, spec in self.key_value.items()},
                "object_stores": {name: spec.model_copy(update=copies) for name, spec in self.object_stores.items()},
            }
        )


def load_topology(path: Path | None = None) -> Topology:
    """Read ``streams.yaml``: the given path, else the packaged copy, else the one at the repository root."""
    if path is None:
        packaged = resources.files("hades").joinpath("streams.yaml")
        path = Path(str(packaged)) if packaged.is_file() else Path(__file__).parents[3] / "streams.yaml"
    return Topology.model_validate(yaml.safe_load(path.read_text()))


@dataclass
class ApplyReport:
    """What ``apply`` did, for the CLI to print."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


async def apply(js: JetStreamContext, topology: Topology) -> ApplyReport:
    """Create what is missing and update what differs; safe to run any number of times."""
    report = ApplyReport()
    for name, spec in topology.streams.items():
        await _apply_stream(js, name, spec.config(name), report)
    for bucket, bucket_spec in topology.key_value.items():
        await _apply_bucket(js, bucket, bucket_spec, report)
    for bucket, store_spec in topology.object_stores.items():
        await _apply_object_store(js, bucket, store_spec, report)
    for stream, consumers in topology.consumers.items():
        for name, consumer in consumers.items():
            await _apply_consumer(js, stream, name, consumer.config(name), report)
    return report


async def _apply_stream(js: JetStreamContext, name: str, config: StreamConfig, report: ApplyReport) -> None:
    try:
        info = await js.stream_info(name)
    except NotFoundError:
        await js.add_stream(config=config)
        report.created.append(f"stream {name}")
        return
    if _differs(info.config.as_dict(), config.as_dict()):
        await js.update_stream(config=config)
        report.updated.append(f"stream {name}")
    else:
        report.unchanged.append(f"stream {name}")


async def _apply_consumer(
    js: JetStreamContext, stream: str, name: str, config: ConsumerConfig, report: ApplyReport
) -> None:
    try:
        info = await js.consumer_info(stream, name)
    except NotFoundError:
        await js.add_consumer(stream, config=config)
        report.created.append(f"consumer {stream}/{name}")
        return
    if _differs(info.config.as_dict(), config.as_dict()):
        await js.add_consumer(stream, config=config)
        report.updated.append(f"consumer {stream}/{name}")
    else:
        report.unchanged.append(f"consumer {stream}/{name}")


async def _apply_bucket(js: JetStreamContext, bucket: str, spec: BucketSpec, report: ApplyReport) -> None:
    try:
        await js.key_value(bucket)
    except (NotFoundError, BucketNotFoundError):
        await js.create_key_value(
            bucket=bucket, history=spec.history, ttl=spec.ttl, direct=True, replicas=spec.replicas
        )
        report.created.append(f"bucket {bucket}")
        return
    await _apply_fields(js, f"KV_{bucket}", f"bucket {bucket}", declared_store_fields(spec), report)


async def _apply_object_store(js: JetStreamContext, bucket: str, spec: ObjectStoreSpec, report: ApplyReport) -> None:
    try:
        await js.object_store(bucket)
    except (NotFoundError, BucketNotFoundError):
        await js.create_object_store(bucket, replicas=spec.replicas, ttl=spec.max_age, max_bytes=spec.max_bytes)
        report.created.append(f"object store {bucket}")
        return
    await _apply_fields(js, f"OBJ_{bucket}", f"object store {bucket}", declared_store_fields(spec), report)


async def _apply_fields(
    js: JetStreamContext, stream: str, what: str, fields: dict[str, Any], report: ApplyReport
) -> None:
    """Restore the settings a bucket's or object store's declaration sets on the stream under it."""
    config = (await js.stream_info(stream)).config
    if all(same(getattr(config, key), value) for key, value in fields.items()):
        report.unchanged.append(what)
        return
    for key, value in fields.items():
        setattr(config, key, value)
    await js.update_stream(config=config)
    report.updated.append(what)


def declared_store_fields(spec: BucketSpec | ObjectStoreSpec) -> dict[str, Any]:
    """The settings of the stream under a bucket or object store that its declaration fixes (nats-py's names).

    A bucket declares its history, TTL (none: ``max_age`` 0) and replicas; an object store its replicas and, when
    given, its retention.
    """
    if isinstance(spec, BucketSpec):
        return {"max_msgs_per_subject": spec.history, "max_age": spec.ttl or 0.0, "num_replicas": spec.replicas}
    fields: dict[str, Any] = {"num_replicas": spec.replicas}
    if spec.max_age is not None:
        fields["max_age"] = spec.max_age
    if spec.max_bytes is not None:
        fields["max_bytes"] = spec.max_bytes
    return fields


def same(live: Any, declared: Any) -> bool:
    """Whether a live setting equals the declared one (numbers compared as numbers: 10 s is 10.0 s)."""
    if isinstance(live, int | float) and isinstance(declared, int | float):
        return abs(float(live) - float(declared)) < 1e-6
    return bool(live == declared)


def _differs(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """True when a declared field has another value on the server (fields we do not declare are ignored)."""
    return any(current.get(key) != value for key, value in wanted.items() if value is not None)


async def verify(js: JetStreamContext, topology: Topology) -> None:
    """Raise a clear error when a declared stream or consumer is missing (run ``hades streams apply``)."""
    missing: list[str] = []
    for name in topology.streams:
        try:
            await js.stream_info(name)
        except NotFoundError:
            missing.append(f"stream {name}")
    for stream, consumers in topology.consumers.items():
        for name in consumers:
            try:
                await js.consumer_info(stream, name)
            except NotFoundError:
                missing.append(f"consumer {stream}/{name}")
    if missing:
        raise RuntimeError(f"NATS topology incomplete ({', '.join(missing)}): run `hades streams apply`")


async def stream_consumers(js: JetStreamContext, stream: str) -> list[ConsumerInfo]:
    """Every consumer of the stream. The server answers a list request with one page (256 at most; executor pools
    make three consumers each), so the list is asked for again from the next offset until a page comes back empty."""
    found: list[ConsumerInfo] = []
    while page := await js.consumers_info(stream, offset=len(found) or None):
        found += page
    return found
