"""The writers of one log store share one JetStream context: a step's writer leaves no subscription behind.

nats-py's JetStream context subscribes to an inbox of its own on its first asynchronous publish and never drops
it; with a context per writer, every step an executor ran cost a SUB and left one more subscription (and its
task) on the connection for good.
"""

from __future__ import annotations

from datetime import UTC, datetime

from nats.aio.client import Client

from hades.adapters.nats.log_store import NatsLogStore
from hades.core.logs import LogBudget


async def test_many_steps_leave_no_subscription_behind(nc: Client) -> None:
    store = NatsLogStore(nc)
    first = store.writer("job-subs", 1, LogBudget(), 1)
    await first.open("c-1")
    await first.close()
    subscriptions = len(nc._subs)

    for step in range(2, 22):
        writer = store.writer("job-subs", step, LogBudget(), 1)
        await writer.open(f"c-{step}")
        await writer.write("stdout", datetime.now(UTC), f"line {step}")
        assert await writer.close() is not None

    assert len(nc._subs) == subscriptions
    batches = await store.read("job-subs")
    assert [batch.step_id for batch in batches if batch.logs] == list(range(2, 22))
