"""What the NATS server holds of the topology in ``streams.yaml``, live: each stream, bucket and object store with
its state and every way its configuration differs from the file, and each durable consumer with its backlog.

``hades streams show`` prints it and ``hades doctor`` checks it. A difference here is exactly what
``hades streams apply`` would change (the same comparison decides both), so "run `hades streams apply`" is always the
fix for a problem this module reports.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Literal

from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, ConsumerInfo, StreamConfig, StreamInfo
from nats.js.errors import NotFoundError

from hades.adapters.nats.topology import Topology, declared_store_fields, same, stream_consumers

StoreKind = Literal["stream", "bucket", "object store"]
FIX = "run `hades streams apply` to create what is missing and restore what differs"


@dataclass(frozen=True)
class Difference:
    """One declared setting that has another value on the server."""

    setting: str
    declared: Any
    live: Any

    def __str__(self) -> str:
        return f"{self.setting} is {_shown(self.live)} on the server, {_shown(self.declared)} in streams.yaml"


@dataclass
class StoreState:
    """A stream, key-value bucket or object store: its live state, or ``missing``."""

    kind: StoreKind
    name: str
    stream: str
    missing: bool = False
    messages: int | None = None
    bytes: int | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    replicas: int | None = None
    storage: str | None = None
    differences: list[Difference] = field(default_factory=list)

    @property
    def what(self) -> str:
        """``stream HADES_EVENTS``, ``bucket HADES_WORKERS``."""
        return f"{self.kind} {self.name}"


@dataclass
class ConsumerState:
    """A durable consumer: its backlog, or ``missing``; ``declared`` is False for one streams.yaml does not name
    (an executor pool's queue, made by the executors themselves: shown, never a problem)."""

    stream: str
    name: str
    declared: bool = True
    missing: bool = False
    pending: int | None = None
    ack_pending: int | None = None
    redelivered: int | None = None
    waiting: int | None = None
    differences: list[Difference] = field(default_factory=list)

    @property
    def what(self) -> str:
        """``consumer HADES_EVENTS/scheduler``."""
        return f"consumer {self.stream}/{self.name}"


@dataclass
class TopologyState:
    """Everything :func:`inspect` found."""

    stores: list[StoreState]
    consumers: list[ConsumerState]

    @property
    def problems(self) -> list[str]:
        """One line per missing object and per difference, naming it; empty when the server matches the file."""
        lines: list[str] = []
        items: list[StoreState | ConsumerState] = [*self.stores, *self.consumers]
        for item in items:
            if item.missing:
                lines.append(f"{item.what} is missing")
            lines.extend(f"{item.what}: {difference}" for difference in item.differences)
        return lines

    @property
    def ok(self) -> bool:
        """Whether the server holds everything streams.yaml declares, as declared."""
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        """For ``--json``: the stores and consumers as objects, the problems in words, and ``ok``."""
        return {
            "ok": self.ok,
            "stores": [_json(asdict(store)) for store in self.stores],
            "consumers": [_json(asdict(consumer)) for consumer in self.consumers],
            "problems": self.problems,
            "fix": None if self.ok else FIX,
        }


async def inspect(js: JetStreamContext, topology: Topology) -> TopologyState:
    """Read every declared object's state from the server and compare its configuration with ``topology``."""
    stores: list[StoreState] = []
    for name, spec in topology.streams.items():
        stores.append(await _store(js, "stream", name, name, spec.config(name)))
    for name, bucket in topology.key_value.items():
        stores.append(await _store(js, "bucket", name, f"KV_{name}", declared_store_fields(bucket)))
    for name, store in topology.object_stores.items():
        stores.append(await _store(js, "object store", name, f"OBJ_{name}", declared_store_fields(store)))
    consumers: list[ConsumerState] = []
    for stream in topology.streams:
        declared = topology.consumers.get(stream, {})
        live = await _durables(js, stream) if not _missing(stores, stream) else {}
        for name, consumer in declared.items():
            info = live.pop(name, None)
            state = ConsumerState(stream, name, missing=info is None)
            if info is not None:
                _fill_consumer(state, info, config_differences(consumer.config(name), info.config))
            consumers.append(state)
        for name, info in sorted(live.items()):
            extra = ConsumerState(stream, name, declared=False)
            _fill_consumer(extra, info, [])
            consumers.append(extra)
    return TopologyState(stores, consumers)


def config_differences(wanted: StreamConfig | ConsumerConfig, live: StreamConfig | ConsumerConfig) -> list[Difference]:
    """The declared fields of ``wanted`` whose value differs in ``live``.

    Compared as the server's JSON (durations in nanoseconds), as ``apply`` compares; shown as nats-py reads them
    (durations in seconds).
    """
    current = live.as_dict()
    return [
        Difference(key, getattr(wanted, key, value), getattr(live, key, current.get(key)))
        for key, value in wanted.as_dict().items()
        if value is not None and current.get(key) != value
    ]


def field_differences(wanted: dict[str, Any], live: StreamConfig) -> list[Difference]:
    """The fields a bucket's or object store's declaration sets on its stream that differ in ``live``."""
    return [
        Difference(key, value, getattr(live, key))
        for key, value in wanted.items()
        if not same(getattr(live, key), value)
    ]


async def _store(
    js: JetStreamContext, kind: StoreKind, name: str, stream: str, wanted: StreamConfig | dict[str, Any]
) -> StoreState:
    state = StoreState(kind, name, stream)
    try:
        info: StreamInfo = await js.stream_info(stream)
    except NotFoundError:
        state.missing = True
        return state
    state.messages, state.bytes = info.state.messages, info.state.bytes
    state.first_seq, state.last_seq = info.state.first_seq, info.state.last_seq
    state.replicas = info.config.num_replicas
    state.storage = _shown(info.config.storage) if info.config.storage is not None else None
    if isinstance(wanted, StreamConfig):
        state.differences = config_differences(wanted, info.config)
    else:
        state.differences = field_differences(wanted, info.config)
    return state


async def _durables(js: JetStreamContext, stream: str) -> dict[str, ConsumerInfo]:
    """The stream's durable consumers by name (ordered and other ephemeral consumers are left out)."""
    return {info.name: info for info in await stream_consumers(js, stream) if info.config.durable_name}


def _fill_consumer(state: ConsumerState, info: ConsumerInfo, differences: list[Difference]) -> None:
    state.pending, state.ack_pending = info.num_pending or 0, info.num_ack_pending or 0
    state.redelivered, state.waiting = info.num_redelivered or 0, info.num_waiting or 0
    state.differences = differences


def _missing(stores: list[StoreState], stream: str) -> bool:
    return any(store.stream == stream and store.missing for store in stores)


def _shown(value: Any) -> str:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json(item) for item in value]
    if isinstance(value, Enum):
        return value.value
    return value
