"""A cancel request made while an executor's connection is away still reaches the attempt it runs.

The executor hears cancels on a plain subscription, and what is published while a connection is away is never
delivered to it: the cancel was ignored until the attempt's next append, or its timeout (a one-step, hour-long build
ran its hour). After a reconnect each watched job's newest event is read from the stream instead.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path

from hades.adapters.nats.connection import connect
from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.interruptions import JobInterruptions
from hades.core.events import Event, JobCancelRequested, JobSubmitted
from hades.core.spec import JobSpec, Priority
from tests.conftest import eventually
from tests.support.restartable_nats import restartable_node

#: Seconds the watcher's connection waits between reconnect tries: the cancel is made while it is still away.
RECONNECT_WAIT = 4.0


async def test_a_cancel_made_while_the_connection_was_away_is_heard_after_the_reconnect(tmp_path: Path) -> None:
    async with restartable_node(tmp_path / "nats") as node:
        job_id = str(uuid.uuid4())
        writer = await connect(node.server.url)
        submitted = JobSubmitted(job_id=job_id, at=datetime.now(UTC), spec=JobSpec(name="t"), priority=Priority.LOW)
        seq = await NatsEventStore(writer).append(job_id, [submitted], 0)
        await writer.close()

        nc = await connect(node.server.url)
        nc.options["reconnect_time_wait"] = RECONNECT_WAIT
        interruptions = JobInterruptions(nc)
        heard: list[Event] = []
        try:
            await interruptions.watch(job_id, heard.append)
            node.stop(kill=True)
            await eventually(lambda: asyncio.sleep(0, not nc.is_connected), timeout=5)
            await asyncio.to_thread(node.start)
            writer = await connect(node.server.url)
            cancel = JobCancelRequested(job_id=job_id, at=datetime.now(UTC), by="api", reason="resubmitted")
            await NatsEventStore(writer).append(job_id, [cancel], seq)
            await writer.close()
            assert not nc.is_connected  # made while the watcher was away, so no subscription could hear it

            await eventually(lambda: asyncio.sleep(0, bool(heard)), timeout=RECONNECT_WAIT + 6)
            assert heard == [cancel]
        finally:
            await interruptions.stop()
            await nc.close()
