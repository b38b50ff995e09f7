"""No-wait pulls from the executor queues on a real nats-server: one request takes up to a batch, by priority."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from hades.adapters.nats.queues import NoWaitPuller
from hades.core.spec import Priority
from hades.workers.executor_queues import ExecutorQueues


@pytest.fixture
async def queues(nc: Client) -> AsyncIterator[str]:
    """A stream of its own with one consumer per priority (``q-high``, ``q-medium``, ``q-low``)."""
    name = f"Q{uuid.uuid4().hex[:8]}"
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    for priority in Priority:
        config = ConsumerConfig(
            durable_name=f"q-{priority.value}", ack_policy=AckPolicy.EXPLICIT, filter_subject=f"{name}.{priority.value}"
        )
        await js.add_consumer(name, config)
    yield name
    await js.delete_stream(name)


async def puller(nc: Client, stream: str, priority: Priority) -> NoWaitPuller:
    pulling = NoWaitPuller(nc, stream, f"q-{priority.value}")
    await pulling.start()
    return pulling


async def publish(nc: Client, stream: str, priority: Priority, count: int) -> None:
    for n in range(count):
        await nc.jetstream().publish(f"{stream}.{priority.value}", f"{priority.value}-{n}".encode())


async def test_one_request_takes_up_to_the_batch_and_an_empty_queue_answers_at_once(nc: Client, queues: str) -> None:
    high = await puller(nc, queues, Priority.HIGH)
    await publish(nc, queues, Priority.HIGH, 5)
    assert [m.data for m in await high.pull_many(3)] == [b"high-0", b"high-1", b"high-2"]
    assert [m.data for m in await high.pull_many(5, timeout=2)] == [b"high-3", b"high-4"]  # then a 404, no wait
    assert await high.pull_many(4, timeout=2) == []
    assert await high.pull(timeout=2) is None
    await high.stop()


async def test_a_batch_is_filled_from_the_highest_priority_first(nc: Client, queues: str) -> None:
    pullers = {priority: await puller(nc, queues, priority) for priority in Priority}
    await publish(nc, queues, Priority.LOW, 2)
    await publish(nc, queues, Priority.MEDIUM, 3)
    await publish(nc, queues, Priority.HIGH, 2)
    executor_queues = ExecutorQueues(nc, pullers, labels={}, places=None, ring=lambda: None)
    taken = await executor_queues.pull(4, running=[])
    assert [m.data for m, _ in taken] == [b"high-0", b"high-1", b"medium-0", b"medium-1"]
    taken = await executor_queues.pull(4, running=[])
    assert [m.data for m, _ in taken] == [b"medium-2", b"low-0", b"low-1"]
    for pulling in pullers.values():
        await pulling.stop()
