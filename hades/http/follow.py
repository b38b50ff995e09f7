"""Following a job's logs live: the backlog, then each batch as it is written, then the job's end."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

from litestar.response import ServerSentEventMessage

from hades.http.services import ApiServices

KEEPALIVE_SECONDS = 15.0


async def follow_logs(services: ApiServices, job_id: str) -> AsyncGenerator[ServerSentEventMessage, None]:
    """``log`` events until the job has ended and every batch it wrote was sent, then one ``end`` event.

    A job's batches are all in the stream before its terminal event is appended, so once the job has ended the
    newest batch at that moment is the last one: nothing is guessed with a drain timeout.
    """
    logs = services.logs
    job = services.jobs.get(job_id)
    if job is None:
        yield ServerSentEventMessage(data=json.dumps({"error": f"job not found: {job_id}"}), event="error")
        return
    sent, final_seq, idle = 0, None, 0.0
    async for item in logs.follow(job_id):
        if item is not None:
            sent, batch = item
            yield ServerSentEventMessage(data=batch.model_dump_json(exclude={"step_id"}), event="log", id=sent)
            idle = 0.0
        else:
            idle += 1.0
            if idle >= KEEPALIVE_SECONDS:
                idle = 0.0
                yield ServerSentEventMessage(comment="keepalive", data=None)
        job = services.jobs.get(job_id)
        if job is not None and job.status.is_terminal:
            final_seq = final_seq if final_seq is not None else await logs.last_seq(job_id)
            if sent >= final_seq:
                end = {"status": job.status.value, "reason": job.reason}
                yield ServerSentEventMessage(data=json.dumps(end), event="end")
                return
