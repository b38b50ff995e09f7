"""A step's process with its output read straight off its pipes: every line arrives, in order, named by its
stream, and a step that writes faster than its log takes it is held back rather than buffered without bound."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import uvloop

from hades.adapters.process.step_process import CHUNK_BYTES, HELD_BYTES, StepProcess
from hades.core.logs import OutputStream

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


class SlowLog:
    """StepLogs that yields to the loop on every line and notes the most output held unwritten meanwhile."""

    def __init__(self) -> None:
        self.lines: list[tuple[OutputStream, str]] = []
        self.process: StepProcess | None = None
        self.most_held = 0

    async def open(self, container_id: str) -> None:
        pass

    async def write(self, stream: OutputStream, timestamp: object, message: str) -> None:
        await asyncio.sleep(0)
        assert self.process is not None
        self.most_held = max(self.most_held, self.process._held)
        self.lines.append((stream, message))


async def run(script: str, cwd: Path) -> tuple[int, SlowLog]:
    log = SlowLog()
    process = await StepProcess.start(["/bin/sh", "-c", script], str(cwd), ENV)
    log.process = process
    try:
        await process.forward(log)
        return await process.exited(), log
    finally:
        process.close()


def test_a_chatty_step_is_held_back_and_loses_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        code, log = await run("seq 1 60000; echo done >&2", tmp_path)

        assert code == 0
        assert [m for s, m in log.lines if s == "stdout"] == [str(n) for n in range(1, 60001)]
        assert [m for s, m in log.lines if s == "stderr"] == ["done"]
        assert log.most_held < HELD_BYTES + 2 * CHUNK_BYTES  # not the whole 350 KB

    uvloop.run(main())  # as ``hades`` runs


async def test_lines_are_stripped_named_and_the_last_needs_no_newline(tmp_path: Path) -> None:
    code, log = await run(r"printf 'one\r\n\n  two  \n'; printf 'err' >&2; printf 'last'; exit 4", tmp_path)

    assert code == 4
    assert sorted(log.lines) == sorted([("stdout", "one"), ("stdout", "two"), ("stdout", "last"), ("stderr", "err")])
    assert [m for s, m in log.lines if s == "stdout"] == ["one", "two", "last"]


async def test_a_step_that_cannot_start_raises_and_leaves_no_descriptor(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))

    with pytest.raises(FileNotFoundError):
        await StepProcess.start(["/bin/sh", "-c", "true"], str(tmp_path / "gone"), ENV)

    assert len(os.listdir("/proc/self/fd")) == before


async def test_killing_a_step_ends_what_it_started(tmp_path: Path) -> None:
    process = await StepProcess.start(["/bin/sh", "-c", "sleep 30 & sleep 30"], str(tmp_path), ENV)
    log = SlowLog()
    log.process = process
    try:
        process.kill()
        async with asyncio.timeout(10):
            await process.forward(log)  # the background sleep held the pipes: they end with the group
            assert await process.exited() < 0
    finally:
        process.close()
