"""Stopping tasks for sure.

On Python 3.11, ``asyncio.wait_for`` returns its result and drops a cancel that arrives just as the awaited reply
lands (fixed in 3.12), and nats-py awaits every request through it. A task cancelled once while it talks to NATS may
therefore go on running, and ``task.cancel(); await task`` then waits forever (seen in CI: a heartbeat loop kept
renewing its key after its cancel, and the test hung for its full timeout). Everything that cancels a task and
waits for it goes through here: it cancels again until the task has ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def stop(task: asyncio.Task[Any], patience: float = 1.0) -> None:
    """Cancel ``task`` and wait for it to end, cancelling again each ``patience`` seconds it goes on; its own
    exception, if it ended with one, propagates."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=patience)
    if not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]


async def stop_all(tasks: Iterable[asyncio.Task[Any]], patience: float = 1.0) -> None:
    """Cancel every task and wait until all have ended, cancelling again those that go on; their own exceptions
    are dropped (the caller is shutting them down)."""
    every = list(tasks)
    pending = {task for task in every if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=patience)
    for task in every:
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log "exception was never retrieved"
