"""The process executor's workspaces: an emptied one is renamed aside and reused, never one a step left anything
in or changed, and the sweep leaves the kept ones alone."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from hades.adapters.process.executor import ProcessExecutor
from hades.adapters.process.workspaces import SPARES, Workspaces
from hades.clock import SystemClock
from hades.core.lifecycle import JobState, SubmitJob, decide, evolve
from hades.core.spec import JobSpec, Step


def job_state() -> JobState:
    job_id = str(uuid.uuid4())
    spec = JobSpec(name="w", steps=(Step(id=1, image="ignored", script="true"),))
    state = None
    for event in decide(None, SubmitJob(job_id=job_id, spec=spec), SystemClock().now()):
        state = evolve(state, event)
    assert state is not None
    return state


async def test_an_emptied_workspace_is_the_next_attempts(tmp_path: Path) -> None:
    executor = ProcessExecutor(tmp_path, "exec")
    first, second = job_state(), job_state()
    await executor.prepare(first)
    made = os.stat(executor.workspace(first)).st_ino
    await executor.cleanup(first)
    assert not executor.workspace(first).exists()

    await executor.prepare(second)

    assert os.stat(executor.workspace(second)).st_ino == made  # renamed into place, no directory made
    assert list(executor.workspace(second).iterdir()) == []


async def test_a_workspace_with_anything_left_in_it_is_removed(tmp_path: Path) -> None:
    workspaces = Workspaces(str(tmp_path))
    used = str(tmp_path / "a")
    workspaces.make(used)
    Path(used, "left").write_text("x")
    (Path(used) / "dir").mkdir()

    await workspaces.remove(used)

    assert not Path(used).exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # nothing kept
    workspaces.make(str(tmp_path / "b"))
    assert list((tmp_path / "b").iterdir()) == []


async def test_a_workspace_whose_mode_a_step_changed_is_removed(tmp_path: Path) -> None:
    workspaces = Workspaces(str(tmp_path))
    used = tmp_path / "a"
    workspaces.make(str(used))
    fresh = used.stat().st_mode
    used.chmod(0o500 if fresh & 0o777 != 0o500 else 0o700)

    await workspaces.remove(str(used))

    assert [p.name for p in tmp_path.iterdir()] == []
    workspaces.make(str(tmp_path / "b"))
    assert (tmp_path / "b").stat().st_mode == fresh


async def test_a_kept_workspace_removed_behind_its_back_is_made_anew(tmp_path: Path) -> None:
    workspaces = Workspaces(str(tmp_path))
    workspaces.make(str(tmp_path / "a"))
    await workspaces.remove(str(tmp_path / "a"))
    [spare] = list(tmp_path.iterdir())
    spare.rmdir()

    workspaces.make(str(tmp_path / "b"))

    assert (tmp_path / "b").is_dir()


async def test_a_full_directory_in_the_way_is_kept_and_so_is_the_spare(tmp_path: Path) -> None:
    workspaces = Workspaces(str(tmp_path))
    workspaces.make(str(tmp_path / "a"))
    await workspaces.remove(str(tmp_path / "a"))
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "inputs").write_text("placed before")

    workspaces.make(str(taken))  # as ``mkdir(exist_ok=True)`` did: what is there stays

    assert (taken / "inputs").read_text() == "placed before"
    spare = next(p for p in tmp_path.iterdir() if Workspaces.is_spare(p.name))
    workspaces.make(str(tmp_path / "c"))
    assert not spare.exists() and (tmp_path / "c").is_dir()


async def test_no_more_than_so_many_are_kept(tmp_path: Path) -> None:
    workspaces = Workspaces(str(tmp_path))
    paths = [str(tmp_path / f"w{n}") for n in range(SPARES + 5)]
    for path in paths:
        workspaces.make(path)
    for path in paths:
        await workspaces.remove(path)

    assert len(list(tmp_path.iterdir())) == SPARES


async def test_the_sweep_leaves_kept_workspaces_alone(tmp_path: Path) -> None:
    executor = ProcessExecutor(tmp_path, "exec")
    kept, left_behind = job_state(), job_state()
    await executor.prepare(kept)
    await executor.cleanup(kept)
    await executor.prepare(left_behind)
    await executor.prepare(kept_again := job_state())
    await executor.cleanup(kept_again)

    assert await executor.sweep(lambda job_id: False, set()) == 1

    assert not executor.workspace(left_behind).exists()
    [spare] = list((tmp_path / "exec").iterdir())
    assert Workspaces.is_spare(spare.name)
