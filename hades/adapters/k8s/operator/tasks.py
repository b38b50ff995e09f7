"""Stopping a task for sure: nats-py can swallow a cancel that arrives mid-reply, so one ``cancel()`` may not do."""

from __future__ import annotations

import asyncio
from typing import Any


async def stop(task: asyncio.Task[Any], patience: float = 1.0) -> None:
    """Cancel ``task`` and wait for it to end, cancelling again each ``patience`` seconds it goes on; its own
    exception, if it ended with one, propagates."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=patience)
    if not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
