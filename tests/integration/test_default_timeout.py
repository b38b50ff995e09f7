"""End to end on the process executor: with ``HADES_DEFAULT_TIMEOUT_SECONDS`` set, a job that sets no timeout is
killed and failed with the timeout reason after the default, instead of holding the executor's one slot forever."""

from __future__ import annotations

import time
from pathlib import Path

from hades.runtime import Roles
from tests.conftest import StartHades
from tests.http.test_prometheus import shell_job


async def test_a_job_without_a_timeout_fails_after_the_default(start_hades: StartHades, tmp_path: Path) -> None:
    hades = await start_hades(
        Roles(api=True, scheduler=True, executor=True),
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(tmp_path),
        HADES_DEFAULT_TIMEOUT_SECONDS=2,
    )
    began = time.monotonic()
    job_id = await hades.submit(shell_job("sleep 60"))

    detail = await hades.wait_terminal(job_id, timeout=40)

    took = time.monotonic() - began
    assert (detail["status"], detail["reason"]) == ("Failed", "job timed out after 2 seconds")
    assert (detail["timeout_seconds"], detail["requested_timeout_seconds"]) == (2, 0)
    assert 2 <= took < 30, took  # the default ended it, not the 60 s script
    after_slot = await hades.wait_terminal(await hades.submit(shell_job("true")), timeout=30)
    assert after_slot["status"] == "Succeeded"  # the executor's one slot is free again
