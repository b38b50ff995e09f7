"""The job-status webhook's body and headers, pure: the moment and the delivery attempt come in from outside.

The body is the ``job.completed`` object of the product description, field for field. The headers let a receiver
deduplicate (``Idempotency-Key`` is the job id, the same on every attempt; ``X-Hades-Delivery`` names the attempt)
and, when a secret is shared, check that a body comes from Hades and is fresh: ``X-Hades-Signature`` is
``sha256=`` and the hex HMAC-SHA256, keyed with the secret, of ``"<X-Hades-Timestamp>.<raw body>"`` (Stripe's
scheme), so a receiver can refuse a replayed request whose timestamp is minutes old.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

from hades.core.state import JobState

EVENT = "job.completed"
IDEMPOTENCY_KEY = "Idempotency-Key"
DELIVERY = "X-Hades-Delivery"
TIMESTAMP = "X-Hades-Timestamp"
SIGNATURE = "X-Hades-Signature"


def utc_text(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a ``Z`` (``2026-08-21T12:00:05.123456Z``), or None."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def job_completed(state: JobState, attempt: int) -> dict[str, Any]:
    """The body for delivery attempt ``attempt`` (from 1) of a finished job."""
    if not state.status.is_terminal:
        raise ValueError(f"job {state.job_id} is {state.status}: it has not ended")
    duration_ms = None
    if state.started_at is not None and state.finished_at is not None:
        duration_ms = round((state.finished_at - state.started_at).total_seconds() * 1000)
    return {
        "event": EVENT,
        "job_id": state.job_id,
        "name": state.spec.name,
        "status": state.status.value,
        "reason": state.reason,
        "queued_at": utc_text(state.queued_at),
        "started_at": utc_text(state.started_at),
        "finished_at": utc_text(state.finished_at),
        "duration_ms": duration_ms,
        "attempt": attempt,
    }


def encode_body(payload: dict[str, Any]) -> bytes:
    """Compact JSON; the bytes sent are the bytes signed."""
    return json.dumps(payload, separators=(",", ":")).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def webhook_headers(job_id: str, attempt: int, body: bytes, secret: str, timestamp: int) -> dict[str, str]:
    """The headers of one attempt (besides ``Content-Type``); signed only when ``secret`` is set."""
    headers = {IDEMPOTENCY_KEY: job_id, DELIVERY: f"{job_id}:{attempt}"}
    if secret:
        headers[TIMESTAMP] = str(timestamp)
        headers[SIGNATURE] = signature(secret, timestamp, body)
    return headers
