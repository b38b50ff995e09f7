"""The pull consumer loop of the scheduler and the notifier, on a real nats-server: what is acked, what comes back."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from hades.workers.consumer import PullConsumer, Settle, delivered
from tests.conftest import eventually


@pytest.fixture
async def stream(nc: Client) -> AsyncIterator[str]:
    """A stream of its own (subjects ``<name>.>``) with a durable consumer ``work`` (ack wait 1 s, 3 deliveries)."""
    name = f"T{uuid.uuid4().hex[:8]}"
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    config = ConsumerConfig(
        durable_name="work", ack_policy=AckPolicy.EXPLICIT, ack_wait=1, max_deliver=3, filter_subject=f"{name}.>"
    )
    await js.add_consumer(name, config)
    yield name
    await js.delete_stream(name)


@contextlib.asynccontextmanager
async def consuming(consumer: PullConsumer) -> AsyncIterator[None]:
    await consumer.start()
    task = asyncio.create_task(consumer.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def pending(nc: Client, stream: str) -> tuple[int, int]:
    info = await nc.jetstream().consumer_info(stream, "work")
    return info.num_pending, info.num_ack_pending


async def test_a_handled_message_is_acked_and_a_failing_one_is_naked_until_max_deliver(nc: Client, stream: str) -> None:
    deliveries: list[tuple[bytes, int]] = []

    async def handler(msg: Msg) -> None:
        deliveries.append((msg.data, msg.metadata.num_delivered))
        if msg.data == b"bad":
            raise RuntimeError("boom")

    consumer = PullConsumer(nc, stream, "work", handler, subjects=[f"{stream}.>"], settle=Settle.NACK_ON_ERROR)
    async with consuming(consumer):
        await nc.jetstream().publish(f"{stream}.a", b"good")
        await nc.jetstream().publish(f"{stream}.b", b"bad")
        # naked, so redelivered at once (well before the 1 s ack wait), up to max_deliver
        await eventually(lambda: _settled(deliveries, 4), timeout=0.9)
        await eventually(lambda: _no_work(nc, stream), timeout=5)
    assert sorted(deliveries) == [(b"bad", 1), (b"bad", 2), (b"bad", 3), (b"good", 1)]


async def test_a_manual_handler_settles_itself_and_one_that_raises_comes_back_after_the_ack_wait(
    nc: Client, stream: str
) -> None:
    deliveries: list[tuple[bytes, int]] = []

    async def handler(msg: Msg) -> None:
        deliveries.append((msg.data, msg.metadata.num_delivered))
        if msg.metadata.num_delivered == 1:
            raise RuntimeError("the event log is unreachable")
        await msg.nak(delay=0.1) if msg.metadata.num_delivered == 2 else await msg.ack()

    consumer = PullConsumer(nc, stream, "work", handler, subjects=[f"{stream}.>"], settle=Settle.MANUAL)
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with consuming(consumer):
        await nc.jetstream().publish(f"{stream}.a", b"job")
        await eventually(lambda: _settled(deliveries, 3), timeout=10)
        await eventually(lambda: _no_work(nc, stream), timeout=5)
    assert deliveries == [(b"job", 1), (b"job", 2), (b"job", 3)]
    assert loop.time() - began >= 1.0  # the second delivery waited for the ack wait: nothing naked it


async def test_no_more_than_max_workers_run_at_once(nc: Client, stream: str) -> None:
    running, most = 0, 0

    async def handler(msg: Msg) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05)
        running -= 1

    consumer = PullConsumer(
        nc, stream, "work", handler, subjects=[f"{stream}.>"], settle=Settle.NACK_ON_ERROR, batch=10, max_workers=3
    )
    async with consuming(consumer):
        for n in range(12):
            await nc.jetstream().publish(f"{stream}.{n}", b"x")
        await eventually(lambda: _no_work(nc, stream), timeout=5)
    assert most == 3


async def _settled(deliveries: list[tuple[bytes, int]], count: int) -> bool:
    return len(deliveries) >= count


async def _no_work(nc: Client, stream: str) -> bool:
    return await pending(nc, stream) == (0, 0)


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.HADES_EVENTS.notifier.3.1234.77.1700000000000000000.5",
        "$JS.ACK.hub.ACCOUNTHASH.HADES_EVENTS.notifier.3.1234.77.1700000000000000000.5.token",
    ],
    ids=["v1", "v2-with-domain"],
)
def test_the_stream_sequence_and_delivery_count_are_read_off_the_ack_subject_as_nats_py_reads_them(reply: str) -> None:
    msg = Msg(_client=None, subject="hades.events.j.succeeded", reply=reply)  # type: ignore[arg-type]
    metadata = msg.metadata
    assert delivered(msg) == (metadata.sequence.stream, metadata.num_delivered) == (1234, 3)
