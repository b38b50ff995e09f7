"""The scheduler role: a durable pull consumer that moves each submitted job into its priority queue.

It is the place where admission decisions live (later: global caps, retries); today it appends
``queued.<priority>`` for every ``submitted``, or ``queued.<priority>.<pool>`` for a job with constraints or
resources, once that pool's queues exist (``hades.adapters.nats.pools``). Redeliveries are harmless: a job that is
queued already is acknowledged and left alone.
"""

from __future__ import annotations

import logging

from nats.aio.client import Client
from nats.aio.msg import Msg
from opentelemetry import trace

from hades.adapters.nats.pools import Pools
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.core.codec import decode_event
from hades.core.errors import InvalidTransition
from hades.core.events import JobSubmitted
from hades.core.lifecycle import QueueJob
from hades.core.ports import Clock, EventStore, Recorded
from hades.tracing import TRACEPARENT, continuing, parent_context
from hades.workers.consumer import PullConsumer, Settle, stream_seq
from hades.workers.jobs import JobHandle
from hades.workers.pipelines import PipelineCoordinator

log = logging.getLogger(__name__)


async def queue_job(
    store: EventStore,
    clock: Clock,
    job_id: str,
    submitted: Recorded | None = None,
    pools: Pools | None = None,
    pipelines: PipelineCoordinator | None = None,
) -> bool:
    """Queue the job's first attempt; False when it was queued already.

    ``submitted``, the job's first event as the consumer delivered it, spares reading the history: it is the
    whole history unless the job moved on meanwhile, and then the append meets a conflict and re-reads. A job
    with a placement has its pool registered first, so the queue its event lands in exists and is followed. A
    pipeline is never queued: its coordinator launches its first stages instead."""
    if submitted is not None and isinstance(submitted.event, JobSubmitted) and submitted.event.job_id == job_id:
        job = JobHandle.known(store, clock, [submitted])
    else:
        job = await JobHandle.load(store, clock, job_id)
    if job.state is not None and job.state.spec.is_pipeline:
        if pipelines is not None:
            await pipelines.reconcile(job_id)
        return False
    placement = job.state.spec.placement if job.state is not None else None
    if placement is not None and pools is not None:
        await pools.register(placement)
    try:
        await job.run(job_id, QueueJob())
    except InvalidTransition as reason:
        log.debug("not queueing %s: %s", job_id, reason)
        return False
    return True


def scheduler_consumer(
    nc: Client,
    store: EventStore,
    clock: Clock,
    tracer: trace.Tracer | None = None,
    pools: Pools | None = None,
    pipelines: PipelineCoordinator | None = None,
) -> PullConsumer:
    """The scheduler's subscription, bound to the durable consumer ``scheduler`` from streams.yaml: a message is
    acked once handled, naked (redelivered, up to the consumer's ``max_deliver``) when handling it raised.

    Queueing runs in a ``hades.schedule`` span, a child of the submit's (the ``submitted`` event's traceparent),
    so the ``queued`` event hands the job's trace on to the executor.
    """
    tracer = tracer or trace.NoOpTracer()
    # Tracing off: no span is recorded, so none is made (its context manager cost a few percent of the role's CPU);
    # the submit's trace, if it has one, is made current instead, so the ``queued`` event still hands it on.
    traced = not isinstance(tracer, trace.NoOpTracer)

    async def on_submitted(msg: Msg) -> None:
        event = decode_event(msg.data)
        trace_header = (msg.headers or {}).get(TRACEPARENT)
        submitted = Recorded(seq=stream_seq(msg), event=event, trace=trace_header)
        if not traced:
            with continuing(trace_header):
                await queue_job(store, clock, event.job_id, submitted, pools, pipelines)
            return
        parent = parent_context(trace_header)
        with tracer.start_as_current_span("hades.schedule", parent, attributes={"hades.job_id": event.job_id}) as span:
            span.set_attribute("hades.queued", await queue_job(store, clock, event.job_id, submitted, pools, pipelines))

    return PullConsumer(
        nc,
        EVENTS_STREAM,
        "scheduler",
        on_submitted,
        subjects=["hades.events.*.submitted"],
        settle=Settle.NACK_ON_ERROR,
        batch=20,
        max_workers=20,
    )
