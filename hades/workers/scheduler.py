"""The scheduler role: a FastStream consumer that moves each submitted job into its priority queue.

It is the place where admission decisions live (later: global caps, constraints, retries); today it appends
``queued.<priority>`` for every ``submitted``. Redeliveries are harmless: a job that is queued already is
acknowledged and left alone.
"""

from __future__ import annotations

import logging

from faststream import AckPolicy
from faststream.nats import JStream, NatsRouter, PullSub
from faststream.nats.annotations import NatsMessage
from opentelemetry import trace

from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.codec import decode_event
from hades.core.errors import InvalidTransition
from hades.core.lifecycle import QueueJob
from hades.core.ports import Clock, EventStore
from hades.tracing import TRACEPARENT, parent_context
from hades.workers.jobs import JobHandle

log = logging.getLogger(__name__)


async def queue_job(store: EventStore, clock: Clock, job_id: str) -> bool:
    """Queue the job's first attempt; False when it was queued already."""
    job = await JobHandle.load(store, clock, job_id)
    try:
        await job.run(job_id, QueueJob())
    except InvalidTransition as reason:
        log.debug("not queueing %s: %s", job_id, reason)
        return False
    return True


def scheduler_router(store: EventStore, clock: Clock, tracer: trace.Tracer | None = None) -> NatsRouter:
    """The scheduler's subscriptions, bound to the durable consumer ``scheduler`` from streams.yaml.

    Queueing runs in a ``hades.schedule`` span, a child of the submit's (the ``submitted`` event's traceparent),
    so the ``queued`` event hands the job's trace on to the executor.
    """
    router = NatsRouter()
    tracer = tracer or trace.NoOpTracer()

    @router.subscriber(
        "hades.events.*.submitted",
        stream=JStream(EVENTS_STREAM, declare=False),
        durable="scheduler",
        pull_sub=PullSub(batch_size=20, timeout=5.0),
        ack_policy=AckPolicy.NACK_ON_ERROR,
    )
    async def on_submitted(msg: NatsMessage) -> None:
        event = decode_event(msg.body)
        parent = parent_context(msg.headers.get(TRACEPARENT))
        with tracer.start_as_current_span("hades.schedule", parent, attributes={"hades.job_id": event.job_id}) as span:
            span.set_attribute("hades.queued", await queue_job(store, clock, event.job_id))

    return router
