"""Reasons a person reads (why a job failed, why a delivery did not land), capped as the Go Hades caps them."""

from __future__ import annotations

MAX_REASON_CHARS = 500


def cap_reason(reason: str) -> str:
    """Reasons are capped at 500 characters plus an ellipsis, as the Go Hades does."""
    return reason if len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS] + "…"
