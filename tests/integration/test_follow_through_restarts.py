"""Followers of the event log, of a job's log and of the executor pools go on at once after their NATS server
restarts, each message once.

nats-py's ordered consumer lives in the server's memory: a restarted server has forgotten it, and nats-py noticed
only after two missed 5 s heartbeats, on a check of its own clock: the API's views sat 10-20 s behind the log after
every restart (the chaos suite read a job as ``Queued`` from one API while it had succeeded). Here a real
nats-server is SIGKILLed or SIGTERMed and started again on its store and port; what is appended after the restart
must reach the follower within a few seconds (the client's 2 s reconnect wait and a consumer create), in order,
with nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.client import JetStreamContext
from nats.js.errors import APIError

from hades.adapters.nats.connection import connect
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.following import StreamFollower
from hades.adapters.nats.log_store import NatsLogStore
from hades.adapters.nats.pools import Pools
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.constraints import Placement
from hades.core.events import JobSubmitted
from hades.core.logs import LogBudget
from hades.core.spec import JobSpec, Priority
from tests.conftest import eventually
from tests.support.restartable_nats import Restartable, restartable_node

#: The reconnect wait (2 s) and a consumer create, with room for a slow machine; nats-py alone took 10-20 s.
PROMPTLY = 8.0


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Restartable]:
    async with restartable_node(tmp_path / "nats") as node:
        yield node


@contextlib.asynccontextmanager
async def connected(url: str) -> AsyncIterator[Client]:
    nc = await connect(url)
    try:
        yield nc
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def in_background(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """``work`` running while the block runs, cancelled after it."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def event_seqs(nc: Client, seen: list[int]) -> None:
    """Follow the event log from its start as the projections do, noting each sequence handed on."""
    async for batch in NatsEventStore(nc).replay_batches(1):
        seen.extend(recorded.seq for recorded in batch)


async def holds(items: list[Any], count: int, timeout: float = PROMPTLY) -> None:
    """Until ``items`` has ``count`` entries."""
    await eventually(lambda: asyncio.sleep(0, len(items) >= count), timeout=timeout)


def submitted(job_id: str) -> JobSubmitted:
    return JobSubmitted(job_id=job_id, at=datetime.now(UTC), spec=JobSpec(name="t"), priority=Priority.LOW)


async def append_jobs(nc: Client, count: int) -> list[int]:
    store = NatsEventStore(nc)
    seqs = []
    for _ in range(count):
        job_id = str(uuid.uuid4())
        seqs.append(await store.append(job_id, [submitted(job_id)], 0))
    return seqs


@pytest.mark.parametrize("kill", [True, False], ids=["sigkill", "sigterm"])
async def test_the_event_log_is_followed_on_at_once_after_a_restart(node: Restartable, kill: bool) -> None:
    seen: list[int] = []
    async with connected(node.server.url) as follower_nc, in_background(event_seqs(follower_nc, seen)):
        async with connected(node.server.url) as writer:
            before = await append_jobs(writer, 3)
        await holds(seen, 3, timeout=10)

        await asyncio.to_thread(node.restart, kill)
        async with connected(node.server.url) as writer:
            after = await append_jobs(writer, 3)
            await holds(seen, 6)
            more = await append_jobs(writer, 2)  # and it stays live
            await holds(seen, 8)

    assert seen == before + after + more


@pytest.mark.parametrize("kill", [True, False], ids=["sigkill", "sigterm"])
async def test_a_job_log_is_followed_on_at_once_after_a_restart(node: Restartable, kill: bool) -> None:
    lines: list[str] = []
    seqs: list[int] = []
    async with connected(node.server.url) as follower_nc:

        async def follow() -> None:
            async for item in NatsLogStore(follower_nc).follow("job-1", idle=0.2):
                if item is not None:
                    seqs.append(item[0])
                    lines.extend(entry.message for entry in item[1].logs or [])

        async def write(nc: Client, step: int, texts: list[str]) -> None:
            writer = NatsLogStore(nc).writer("job-1", step, LogBudget(), attempt=1)
            await writer.open(f"container-{step}")
            for text in texts:
                await writer.write("stdout", datetime.now(UTC), text)
            await writer.close()

        async with in_background(follow()):
            async with connected(node.server.url) as writer_nc:
                await write(writer_nc, 1, ["one", "two"])
            await holds(lines, 2, timeout=10)

            await asyncio.to_thread(node.restart, kill)
            async with connected(node.server.url) as writer_nc:
                await write(writer_nc, 2, ["three"])
                await holds(lines, 3)

    assert lines == ["one", "two", "three"]
    assert seqs == sorted(set(seqs))  # in order, none twice


async def test_without_a_reconnect_notice_the_heartbeats_bring_the_follower_back(node: Restartable) -> None:
    """A connection that tells nobody it reconnected (not made by ``connect``; or a cluster node lost while the
    connection stayed up): nats-py starts the consumer again after two missed heartbeats, a second each."""
    seen: list[int] = []
    follower_nc = await nats.connect(node.server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.5)
    try:
        async with in_background(event_seqs(follower_nc, seen)):
            async with connected(node.server.url) as writer:
                before = await append_jobs(writer, 2)
            await holds(seen, 2, timeout=10)
            await asyncio.to_thread(node.restart, True)
            async with connected(node.server.url) as writer:
                after = await append_jobs(writer, 2)
                await holds(seen, 4)
    finally:
        await follower_nc.close()
    assert seen == before + after


async def test_a_follower_whose_new_consumer_is_refused_asks_again(
    node: Restartable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the reconnect and its new consumer the follower has none: a refusal (other than "not yet") is no
    reason to stop following for good."""
    real, calls = JetStreamContext.subscribe, 0

    async def refused_once_after_the_first(self: JetStreamContext, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise APIError(code=500, err_code=10049, description="insufficient resources")
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(JetStreamContext, "subscribe", refused_once_after_the_first)
    seen: list[int] = []
    async with connected(node.server.url) as follower_nc, in_background(event_seqs(follower_nc, seen)):
        async with connected(node.server.url) as writer:
            before = await append_jobs(writer, 1)
        await holds(seen, 1, timeout=10)
        await asyncio.to_thread(node.restart, True)
        async with connected(node.server.url) as writer:
            after = await append_jobs(writer, 1)
            await holds(seen, 2)
    assert calls >= 3
    assert seen == before + after


async def test_a_pool_registered_after_a_restart_reaches_its_executors_at_once(node: Restartable) -> None:
    """The executors follow ``HADES_POOLS`` to learn of new pools: a KV watcher sat 10-20 s behind after a restart,
    and a job of a pool created meanwhile waited that long for them."""
    seen: list[tuple[str, Placement | None]] = []
    async with connected(node.server.url) as follower_nc:

        async def follow() -> None:
            async for change in Pools(follower_nc).follow():
                seen.append(change)

        async with in_background(follow()):
            async with connected(node.server.url) as writer:
                first = await Pools(writer).register(Placement(cpu=1))
            await holds(seen, 1, timeout=10)
            await asyncio.to_thread(node.restart, True)
            async with connected(node.server.url) as writer:
                second = await Pools(writer).register(Placement(cpu=2))
                await holds(seen, 2)
    assert seen == [(first, Placement(cpu=1)), (second, Placement(cpu=2))]


async def test_a_message_being_handed_on_when_the_connection_comes_back_is_not_lost(node: Restartable) -> None:
    """The reader is slow (a full buffer holds a message in ``deliver``) just as the follower replaces its consumer:
    the old consumer's callback must not be cancelled mid-hand-on, which would drop that message for good."""
    handed: list[int] = []
    holding, release = asyncio.Event(), asyncio.Event()

    async def deliver(seq: int, _msg: Msg) -> None:
        if seq == 2:
            holding.set()
            await release.wait()
        handed.append(seq)

    async with connected(node.server.url) as follower_nc:
        follower = StreamFollower(follower_nc, EVENTS_STREAM, "hades.events.>", 1, deliver)
        await follower.start()
        try:
            async with connected(node.server.url) as writer:
                before = await append_jobs(writer, 3)
            await eventually(lambda: asyncio.sleep(0, holding.is_set()), timeout=10)
            await asyncio.to_thread(node.restart, True)
            await eventually(lambda: asyncio.sleep(0, follower_nc.is_connected), timeout=PROMPTLY)
            release.set()
            async with connected(node.server.url) as writer:
                after = await append_jobs(writer, 2)
                await holds(handed, 5)
        finally:
            await follower.stop()
    assert handed == before + after
