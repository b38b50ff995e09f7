"""Retry delays: exponential backoff with full jitter, the random draw passed in (the core draws nothing itself).

Full jitter (``uniform(0, min(cap, base * 2**(attempt - 1)))``) spreads retries of many failed deliveries over the
whole window instead of bunching them at its end, which is what hammers a receiver that is just coming back.
"""

from __future__ import annotations

#: Past this many doublings the ceiling is the cap anyway; it also keeps ``2.0 ** n`` from overflowing.
_MAX_DOUBLINGS = 1000


def backoff_ceiling(attempt: int, base: float, cap: float) -> float:
    """The longest delay after failed attempt ``attempt`` (1 for the first): ``min(cap, base * 2**(attempt-1))``."""
    if attempt < 1:
        raise ValueError(f"attempts count from 1, got {attempt}")
    if base < 0 or cap < 0:
        raise ValueError(f"backoff base and cap must not be negative, got {base} and {cap}")
    return min(cap, base * 2.0 ** min(attempt - 1, _MAX_DOUBLINGS))


def backoff_delay(attempt: int, base: float, cap: float, draw: float) -> float:
    """Seconds to wait after failed attempt ``attempt``: ``draw`` (uniform in [0, 1)) times the ceiling."""
    if not 0.0 <= draw < 1.0:
        raise ValueError(f"the random draw must be in [0, 1), got {draw}")
    return draw * backoff_ceiling(attempt, base, cap)
