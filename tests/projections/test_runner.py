"""The projection runner: the start-up catch-up folds with Python's cyclic collector paused, and only that."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncGenerator, Iterator
from datetime import UTC, datetime

import pytest

from hades.core.events import JobQueued
from hades.core.ports import Recorded
from hades.core.spec import Priority
from hades.projections.runner import ProjectionRunner, collector_paused

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def recorded(seq: int) -> Recorded:
    return Recorded(seq, JobQueued(job_id="job", at=NOW, attempt=1, priority=Priority.HIGH))


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    """Every test starts with the collector on, and leaves it on whatever happened."""
    gc.enable()
    yield
    gc.enable()


def test_the_collector_is_paused_inside_and_back_on_after_even_on_error() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


async def test_the_catch_up_folds_with_the_collector_paused_then_follows_with_it_on() -> None:
    live = asyncio.Event()

    async def source(from_seq: int) -> AsyncGenerator[list[Recorded], None]:
        yield [recorded(seq) for seq in range(from_seq, 4)]  # the backlog, up to 5
        yield [recorded(4), recorded(5)]
        await live.wait()
        yield [recorded(6)]  # followed live
        await asyncio.Event().wait()

    collector: dict[int, bool] = {}
    runner = ProjectionRunner(source, lambda event: collector.setdefault(event.seq, gc.isenabled()))
    task = asyncio.create_task(runner.run(1, catch_up_to=5))
    assert await runner.wait_for(5)
    assert gc.isenabled()  # caught up: on again before anything else runs
    live.set()
    assert await runner.wait_for(6)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert collector == {1: False, 2: False, 3: False, 4: False, 5: False, 6: True}


async def test_a_catch_up_cut_short_turns_the_collector_back_on() -> None:
    async def source(from_seq: int) -> AsyncGenerator[list[Recorded], None]:
        yield [recorded(from_seq)]
        await asyncio.Event().wait()

    runner = ProjectionRunner(source, lambda event: None)
    task = asyncio.create_task(runner.run(1, catch_up_to=100))
    assert await runner.wait_for(1)
    assert not gc.isenabled()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert gc.isenabled()


async def test_without_a_backlog_the_collector_is_left_alone() -> None:
    async def source(from_seq: int) -> AsyncGenerator[list[Recorded], None]:
        yield [recorded(from_seq)]
        await asyncio.Event().wait()

    collector: list[bool] = []
    runner = ProjectionRunner(source, lambda event: collector.append(gc.isenabled()), start=10)
    task = asyncio.create_task(runner.run(11, catch_up_to=10))
    assert await runner.wait_for(11)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert collector == [True]
