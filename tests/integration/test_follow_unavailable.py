"""A projection started while JetStream cannot make its consumer yet waits, rather than ending its process.

A cluster that lost quorum and got it back answers some requests before it can create consumers: the API's
projection met ``503 JetStream system temporarily unavailable`` on its ordered consumer and the role ended (the
clean-clone chaos test of a role started without quorum caught it). Here the create fails twice that way, on a
real nats-server, and the follower still delivers the log.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
from nats.aio.client import Client
from nats.js.client import JetStreamContext
from nats.js.errors import ServiceUnavailableError

from hades.adapters.nats.event_store import NatsEventStore
from hades.clock import SystemClock
from hades.core.lifecycle import SubmitJob, decide
from hades.core.spec import JobSpec, Step


async def test_a_follower_waits_out_a_jetstream_that_cannot_make_its_consumer_yet(
    nc: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = NatsEventStore(nc)
    job_id = str(uuid.uuid4())
    spec = JobSpec(name="early", steps=(Step(id=1, image="x"),))
    seq = await store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), SystemClock().now()), 0)
    refusals = 2
    real = JetStreamContext.subscribe

    async def not_yet(self: JetStreamContext, *args: Any, **kwargs: Any) -> Any:
        nonlocal refusals
        if refusals:
            refusals -= 1
            raise ServiceUnavailableError(
                code=503, err_code=10008, description="JetStream system temporarily unavailable"
            )
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(JetStreamContext, "subscribe", not_yet)

    async with contextlib.aclosing(store.replay_batches(seq)) as batches:
        batch = await anext(batches)

    assert refusals == 0
    assert [(r.seq, r.event.job_id) for r in batch] == [(seq, job_id)]
