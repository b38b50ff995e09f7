"""``hades streams show``: every stream, bucket, object store and durable consumer of ``streams.yaml`` as the NATS
server holds it, what an operator looks at first.

Exit codes: 0 when the server matches the file, 1 when something is missing or configured otherwise (each named,
with the fix: ``hades streams apply``), 3 when NATS cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from hades.adapters.nats.connection import NatsUnreachable, connect_once
from hades.adapters.nats.topology import Topology, load_topology
from hades.adapters.nats.topology_state import FIX, ConsumerState, StoreState, TopologyState, inspect
from hades.client.terminal import Display
from hades.config import Settings

MATCHES, DIFFERS, UNREACHABLE = 0, 1, 3
EXIT_CODES = (
    "exit codes: 0 the server matches streams.yaml, 1 something is missing or configured otherwise (run `hades "
    "streams apply`), 3 NATS could not be reached"
)


def tool_nats_url(settings: Settings) -> str:
    """Where a tool finds NATS: ``NATS_URL``, else the server ``hades up`` starts on ``NATS_PORT``."""
    return settings.nats_url or f"nats://localhost:{settings.nats_port}"


def declared_topology(settings: Settings) -> Topology:
    """``streams.yaml`` as ``hades streams apply`` would apply it (with ``HADES_STREAM_REPLICAS``)."""
    topology = load_topology(settings.streams_file)
    return topology if settings.stream_replicas is None else topology.with_replicas(settings.stream_replicas)


async def read_topology_state(settings: Settings) -> TopologyState:
    """Connect once (raising :class:`NatsUnreachable` at once when NATS is not there) and inspect the topology."""
    nc = await connect_once(
        tool_nats_url(settings), settings.nats_username, settings.nats_password, settings.nats_tls_enabled
    )
    try:
        return await inspect(nc.jetstream(), declared_topology(settings))
    finally:
        await nc.close()


def streams_show(args: argparse.Namespace, settings: Settings) -> int:
    """The command: the state as a table (or JSON), then what differs and the fix."""
    try:
        state = asyncio.run(read_topology_state(settings))
    except NatsUnreachable as error:
        print(f"hades: {error}; start Hades (`hades up`) or set NATS_URL to your NATS server", file=sys.stderr)
        return UNREACHABLE
    if args.json:
        print(json.dumps(state.as_json(), indent=2))
        return MATCHES if state.ok else DIFFERS
    display = Display()
    width = max(
        len(item.what) for item in [*state.stores, *state.consumers] if isinstance(item, StoreState | ConsumerState)
    )
    for store in state.stores:
        print(_store_line(store, display, width).rstrip())
    for consumer in state.consumers:
        print(_consumer_line(consumer, display, width).rstrip())
    if state.ok:
        print(display.paint("the server matches streams.yaml", "32"))
        return MATCHES
    print()
    for problem in state.problems:
        print(display.paint(problem, "31"))
    print(f"fix: {FIX}")
    return DIFFERS


def _verdict(missing: bool, differs: bool, display: Display) -> str:
    if missing:
        return display.paint(f"{'MISSING':<8}", "31")
    return display.paint(f"{'DIFFERS':<8}", "31") if differs else display.paint(f"{'ok':<8}", "32")


def _store_line(store: StoreState, display: Display, width: int) -> str:
    head = f"{_verdict(store.missing, bool(store.differences), display)}{store.what:<{width}}"
    if store.missing:
        return head
    sequences = f"seq {store.first_seq}..{store.last_seq}" if store.messages else "empty"
    return (
        f"{head} {store.storage} R{store.replicas}  {store.messages} messages  {_size(store.bytes or 0)}  {sequences}"
    )


def _consumer_line(consumer: ConsumerState, display: Display, width: int) -> str:
    head = f"{_verdict(consumer.missing, bool(consumer.differences), display)}{consumer.what:<{width}}"
    if consumer.missing:
        return head
    line = (
        f"{head} pending {consumer.pending}  ack pending {consumer.ack_pending}  redelivered {consumer.redelivered}"
        f"  waiting {consumer.waiting}"
    )
    if consumer.declared:
        return line
    return f"{line}  (not in streams.yaml{': an executor pool queue' if consumer.name.startswith('executor-') else ''})"


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
