"""The job-status webhook: once a job has ended, POST one ``job.completed`` object to its ``status_callback_url``.

The durable consumer ``webhooks`` (streams.yaml) sees every terminal event, as ``notifier`` does for the logs but
on its own: the webhook needs no logs, so it goes out at once, and each delivery retries on its own schedule. Each
delivery of the message is one attempt, recorded as ``webhook_delivered`` / ``webhook_failed``; a failed attempt
that is not the last is ``nak``-ed with an exponential, fully jittered delay, so JetStream keeps the schedule and a
notifier that dies between attempts loses nothing. Competing notifier replicas share the consumer, so each attempt
is made by one of them.

The same sender makes a manual redelivery for the API: one more attempt at once, numbered after the last one.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from nats.aio.client import Client

from hades.adapters.http_delivery import DeliveryResult
from hades.core.errors import InvalidTransition
from hades.core.events import FollowUps, WebhookDelivered, WebhookFailed
from hades.core.lifecycle import JobState, RecordWebhookDelivery
from hades.core.ports import Clock, EventStore
from hades.core.webhook import encode_body, job_completed, webhook_headers
from hades.workers.consumer import PullConsumer
from hades.workers.jobs import JobHandle
from hades.workers.notifier import (
    behind,
    record_attempt,
    recorded_url,
    terminal_consumer,
    wants_a_delivery_to,
)

log = logging.getLogger(__name__)

WEBHOOKS_CONSUMER = "webhooks"

#: POST ``body`` to ``url`` with extra ``headers``; never raises for what the receiver or the network does.
SendWithHeaders = Callable[[str, bytes, Mapping[str, str]], Awaitable[DeliveryResult]]


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """Attempts in all, the timeout of one, the backoff between them (seconds), and the signing secret."""

    max_attempts: int = 8
    timeout: float = 10.0
    backoff_base: float = 1.0
    backoff_max: float = 300.0
    secret: str = ""


class WebhookSender:
    """Makes one attempt at a finished job's webhook and records it through the lifecycle."""

    def __init__(
        self,
        store: EventStore,
        clock: Clock,
        send: SendWithHeaders,
        settings: WebhookSettings,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self._store = store
        self._clock = clock
        self._send = send
        self._settings = settings
        self._draw = draw

    async def deliver(
        self, job_id: str, delivered: int, seq: int = 0, follow_ups: FollowUps | None = None
    ) -> float | None:
        """Attempt the delivery (``delivered`` = the message's delivery count, ``seq`` the terminal event's
        sequence, ``follow_ups`` what it says the end sets going); the delay before the next attempt, or None when
        the message is done with (delivered, given up, or nothing to deliver)."""
        wanted = await wants_a_delivery_to(self._store, job_id, "status_callback_url", follow_ups)
        if not wanted:
            return behind(job_id, delivered) if wanted is None else None
        job = await JobHandle.load(self._store, self._clock, job_id)
        if job.seq < seq:
            return behind(job_id, delivered)
        state = job.state
        if state is None or not _wants_delivery(state):
            return None
        # Normally the delivery count; never at or below an attempt the job's history has recorded already (a
        # re-created consumer counts from 1 again, and a manual redelivery takes a number too).
        attempt = max(delivered, state.webhook_delivery_attempts + 1)
        result = await self._post(state, attempt)
        final = not result.ok and attempt >= self._settings.max_attempts
        command = _record(state, attempt, result, final)
        return await record_attempt(job, command, attempt, result, final, self._settings, self._draw())

    async def redeliver(self, job: JobHandle, by: str) -> WebhookDelivered | WebhookFailed:
        """Send the webhook of a finished job once more, now, as its next attempt, and record it for ``by``.

        A failure is final unless automatic attempts are still to come. Raises InvalidTransition when the job
        has not ended or has no ``status_callback_url``.
        """
        state = job.state
        if state is None or not state.status.is_terminal or not state.spec.status_callback_url:
            raise InvalidTransition("only a finished job with a status_callback_url has a webhook to send")
        attempt = state.webhook_delivery_attempts + 1
        result = await self._post(state, attempt)
        retries_left = state.webhook_delivery is None and attempt < self._settings.max_attempts
        [event] = await job.run(state.job_id, _record(state, attempt, result, not retries_left, by))
        assert isinstance(event, WebhookDelivered | WebhookFailed)
        return event

    async def _post(self, state: JobState, attempt: int) -> DeliveryResult:
        body = encode_body(job_completed(state, attempt))
        timestamp = int(self._clock.now().timestamp())
        headers = webhook_headers(state.job_id, attempt, body, self._settings.secret, timestamp)
        return await self._send(state.spec.status_callback_url, body, headers)


def _wants_delivery(state: JobState) -> bool:
    return state.status.is_terminal and bool(state.spec.status_callback_url) and state.webhook_delivery is None


def _record(
    state: JobState, attempt: int, result: DeliveryResult, final: bool, by: str | None = None
) -> RecordWebhookDelivery:
    return RecordWebhookDelivery(
        url=recorded_url(state.spec.status_callback_url),
        delivery_attempt=attempt,
        duration_ms=result.duration_ms,
        status_code=result.status_code,
        error=result.error,
        final=final and not result.ok,
        redelivered_by=by,
    )


def webhook_consumer(nc: Client, sender: WebhookSender) -> PullConsumer:
    """The webhook subscription, bound to the durable consumer ``webhooks`` from streams.yaml."""
    return terminal_consumer(nc, WEBHOOKS_CONSUMER, sender.deliver)
