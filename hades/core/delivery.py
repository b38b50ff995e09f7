"""Delivery bookkeeping: the events that record each attempt to tell a client about a finished job, and their fold.

Two deliveries follow a job's end, each at least once and each on its own: its logs to ``callback_url``
(``logs_forwarded`` / ``logs_forward_failed``) and the job-status webhook to ``status_callback_url``
(``webhook_delivered`` / ``webhook_failed``). They are the only events allowed after a terminal one, and they never
change the job's status.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hades.core.commands import RecordLogsDelivery, RecordWebhookDelivery
from hades.core.errors import InvalidTransition
from hades.core.events import LogsForwarded, LogsForwardFailed, WebhookDelivered, WebhookFailed
from hades.core.reasons import cap_reason
from hades.core.state import JobState, replace

DeliveryEvent = LogsForwarded | LogsForwardFailed | WebhookDelivered | WebhookFailed


def decide_delivery(
    state: JobState, command: RecordLogsDelivery | RecordWebhookDelivery, now: datetime
) -> DeliveryEvent:
    """The event recording one delivery attempt; refused until the job has ended."""
    if not state.status.is_terminal:
        what = "logs are forwarded" if isinstance(command, RecordLogsDelivery) else "its webhook is sent"
        raise InvalidTransition(f"job {state.job_id} is {state.status}: {what} once it has ended")
    common: dict[str, Any] = {
        "job_id": state.job_id,
        "at": now,
        "url": command.url,
        "delivery_attempt": command.delivery_attempt,
        "duration_ms": command.duration_ms,
        "status_code": command.status_code,
    }
    if isinstance(command, RecordLogsDelivery):
        if command.error is None:
            return LogsForwarded(**common, lines=command.lines)
        return LogsForwardFailed(**common, error=cap_reason(command.error), final=command.final)
    if command.error is None:
        return WebhookDelivered(**common, redelivered_by=command.redelivered_by)
    error = cap_reason(command.error)
    return WebhookFailed(**common, error=error, final=command.final, redelivered_by=command.redelivered_by)


def evolve_delivery(state: JobState, event: DeliveryEvent) -> JobState:
    """Fold one delivery attempt: the delivery is settled by a success or by a failure that says it is final."""
    if isinstance(event, LogsForwarded | LogsForwardFailed):
        logs = "forwarded" if isinstance(event, LogsForwarded) else ("failed" if event.final else state.logs_delivery)
        return replace(state, logs_delivery=logs, logs_delivery_attempts=event.delivery_attempt)
    webhook = "delivered" if isinstance(event, WebhookDelivered) else ("failed" if event.final else None)
    return replace(
        state,
        webhook_delivery=webhook or state.webhook_delivery,
        webhook_delivery_attempts=max(state.webhook_delivery_attempts, event.delivery_attempt),
    )
