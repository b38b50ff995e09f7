"""Stopping a task whose first cancel is lost, as Python 3.11's ``asyncio.wait_for`` loses one that arrives with
the reply (nats-py awaits every request through it)."""

from __future__ import annotations

import asyncio

import pytest

from hades.tasks import stop, stop_all


async def _loses_first_cancels(lost: int, ended: asyncio.Event) -> None:
    """A loop that swallows its first ``lost`` cancels, then ends on the next one."""
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if lost == 0:
                ended.set()
                raise
            lost -= 1
            asyncio.current_task().uncancel()  # type: ignore[union-attr]


async def test_stop_cancels_again_until_the_task_has_ended() -> None:
    ended = asyncio.Event()
    task = asyncio.create_task(_loses_first_cancels(2, ended))
    await asyncio.sleep(0)
    await asyncio.wait_for(stop(task, patience=0.01), timeout=5)
    assert task.cancelled() and ended.is_set()


async def test_stop_all_stops_every_task_and_drops_their_errors() -> None:
    ended = [asyncio.Event() for _ in range(3)]
    tasks = [asyncio.create_task(_loses_first_cancels(n, event)) for n, event in enumerate(ended)]

    async def fails() -> None:
        raise ValueError("its own error")

    failing = asyncio.create_task(fails())
    await asyncio.sleep(0)
    await asyncio.wait_for(stop_all([*tasks, failing], patience=0.01), timeout=5)
    assert all(task.cancelled() for task in tasks) and all(event.is_set() for event in ended)
    assert isinstance(failing.exception(), ValueError)


async def test_stop_raises_the_task_own_error() -> None:
    async def fails() -> None:
        raise ValueError("its own error")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="its own error"):
        await stop(task)
