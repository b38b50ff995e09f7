"""Artifacts end to end on the process executor: real nats-server, every role in this process."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from hades.adapters.nats.artifacts import ARTIFACTS_STORE, ArtifactStore
from hades.runtime import Roles
from tests.conftest import RunningHades, StartHades, eventually
from tests.support.receiver import receiving

BIG = 300_000  # more than two object-store chunks (128 KiB each)


def job(name: str, script: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "steps": [{"id": 1, "name": "s", "image": "ignored", "script": script}], **fields}


async def process_hades(
    start_hades: StartHades, tmp_path: Path, roles: Roles | None = None, **env: Any
) -> RunningHades:
    return await start_hades(roles, HADES_EXECUTOR="process", HADES_PROCESS_WORKSPACES=str(tmp_path / "ws"), **env)


async def kept(api: RunningHades, job_id: str) -> dict[str, Any]:
    """The job's artifact list once its ``artifacts_stored`` event is in (it follows the terminal event)."""

    async def recorded() -> bool:
        events = (await api.client.get(f"/jobs/{job_id}/events")).json()["events"]
        return any(e["type"] == "artifacts_stored" for e in events)

    await eventually(recorded, timeout=20)
    answer: dict[str, Any] = (await api.client.get(f"/jobs/{job_id}/artifacts")).json()
    return answer


async def test_files_and_directories_are_kept_listed_downloaded_and_placed_as_inputs(
    start_hades: StartHades, tmp_path: Path
) -> None:
    api = await process_hades(start_hades, tmp_path)
    script = (
        "mkdir -p out/sub && printf hello > out/a.txt && "
        f"head -c {BIG} /dev/urandom > out/sub/big.bin && printf report > report.txt"
    )
    first = await api.submit(job("writes", script, artifacts=["./out/", "report.txt", "missing.txt"]))
    assert (await api.wait_terminal(first))["status"] == "Succeeded"

    listed = await kept(api, first)
    rows = {row["path"]: row for row in listed["artifacts"]}
    assert sorted(rows) == ["out/a.txt", "out/sub/big.bin", "report.txt"]
    assert rows["out/sub/big.bin"]["size"] == BIG and rows["out/a.txt"]["size"] == 5
    assert not any(row["expired"] for row in rows.values()) and rows["report.txt"]["stored_at"].endswith("Z")
    assert listed["skipped"] == [{"path": "missing.txt", "reason": "not found in the workspace"}]
    for path, row in rows.items():
        download = await api.client.get(f"/jobs/{first}/artifacts/{path}")
        assert download.status_code == 200, download.text
        assert hashlib.sha256(download.content).hexdigest() == row["sha256"] and len(download.content) == row["size"]
        assert download.headers["content-disposition"] == f"attachment; filename*=UTF-8''{path.rsplit('/', 1)[-1]}"
    assert (
        (await api.client.get(f"/jobs/{first}/artifacts/report.txt")).headers["content-type"].startswith("text/plain")
    )
    assert (await api.client.get(f"/jobs/{first}/artifacts/out/nothing")).status_code == 404
    assert (await api.client.get("/jobs/00000000-0000-4000-8000-000000000000/artifacts")).status_code == 404

    big_sha = rows["out/sub/big.bin"]["sha256"]
    reader = (
        f'test "$(cat in/r.txt)" = report && test "$(cat out/sub/../a.txt 2>/dev/null)" = "" && '
        f'test "$(sha256sum out/sub/big.bin | cut -d" " -f1)" = {big_sha}'
    )
    inputs = [f"{first}:out/sub", {"source": f"{first}:report.txt", "destination": "in/r.txt"}]
    second = await api.submit(job("reads", reader, inputs=inputs))
    ended = await api.wait_terminal(second)
    assert ended["status"] == "Succeeded", ended["reason"]

    absent = await api.submit(job("absent", "true", inputs=[f"{first}:nope"]))
    failed = await api.wait_terminal(absent)
    assert (
        failed["status"] == "Failed" and failed["reason"] == f"input {first}:nope: job {first} kept no artifact at nope"
    )


async def test_url_inputs_are_fetched_and_refused_where_the_callback_policy_forbids(
    start_hades: StartHades, tmp_path: Path
) -> None:
    async with receiving(b"#!/bin/sh\necho tool\n") as receiver:
        url = f"{receiver.url}/files/tool.sh"
        api = await process_hades(start_hades, tmp_path, Roles(api=True, scheduler=True))
        runner = await process_hades(start_hades, tmp_path, Roles(executor=True))
        fetched = await api.submit(job("fetch", 'test "$(sh tool.sh)" = tool', inputs=[url]))
        assert (await api.wait_terminal(fetched))["status"] == "Succeeded"
        assert [r.path for r in receiver.requests] == ["/files/tool.sh"]

        await runner.stop()  # the executor now refuses internal targets; the API, which lets any through, accepts
        await process_hades(start_hades, tmp_path, Roles(executor=True), CALLBACK_DENY_PRIVATE="true")
        refused = await api.submit(job("refused at fetch", "true", inputs=[{"source": url, "destination": "t"}]))
        ended = await api.wait_terminal(refused)
        assert ended["status"] == "Failed"
        assert ended["reason"] == f"input {url}: input URL host 127.0.0.1 is a loopback address (CALLBACK_DENY_PRIVATE)"
        assert len(receiver.requests) == 1

    strict = await process_hades(start_hades, tmp_path, Roles(api=True), CALLBACK_DENY_PRIVATE="true")
    answer = await strict.client.post("/build", json=job("refused at submit", "true", inputs=[url]))
    assert answer.status_code == 400
    assert answer.text == "Invalid inputs[0]: input URL host 127.0.0.1 is a loopback address (CALLBACK_DENY_PRIVATE)"


async def test_when_and_the_size_limit_decide_what_is_kept(start_hades: StartHades, tmp_path: Path) -> None:
    api = await process_hades(start_hades, tmp_path, ARTIFACT_MAX_BYTES="3000")
    failing = await api.submit(
        job("fails", "printf x > a.txt; exit 3", artifacts=["a.txt"], artifacts_when="on_success")
    )
    two = "head -c 2000 /dev/zero > d/a.bin && head -c 2000 /dev/zero > d/b.bin"
    over = await api.submit(job("over", f"mkdir d && {two}", artifacts=["d"], artifacts_when="on_success"))

    assert (await api.wait_terminal(failing))["status"] == "Failed"
    nothing = await kept(api, failing)
    reason = "not kept: artifacts_when is on_success and the job ended Failed"
    assert nothing["artifacts"] == [] and nothing["skipped"] == [{"path": "a.txt", "reason": reason}]

    assert (await api.wait_terminal(over))["status"] == "Succeeded"
    cut = await kept(api, over)
    assert [(row["path"], row["size"]) for row in cut["artifacts"]] == [("d/a.bin", 2000)]
    assert cut["skipped"] == [
        {"path": "d/b.bin", "reason": "over ARTIFACT_MAX_BYTES (3000 bytes a job): 2000 bytes with 1000 left"}
    ]


async def test_retention_expires_objects_and_the_api_says_so(start_hades: StartHades, tmp_path: Path, nc: Any) -> None:
    info = await nc.jetstream().stream_info(f"OBJ_{ARTIFACTS_STORE}")
    assert info.config.max_age == 7 * 24 * 3600 and info.config.max_bytes == 10 * 2**30  # streams.yaml's retention

    api = await process_hades(start_hades, tmp_path)
    job_id = await api.submit(job("short-lived", "printf a > a.txt && printf b > b.txt", artifacts=["a.txt", "b.txt"]))
    assert len((await kept(api, job_id))["artifacts"]) == 2
    await ArtifactStore(nc).delete(f"{job_id}/a.txt")  # what max_age does to an old object

    rows = {
        row["path"]: row["expired"] for row in (await api.client.get(f"/jobs/{job_id}/artifacts")).json()["artifacts"]
    }
    assert rows == {"a.txt": True, "b.txt": False}
    gone = await api.client.get(f"/jobs/{job_id}/artifacts/a.txt")
    assert gone.status_code == 404
    assert gone.json() == {"error": f"artifact a.txt of job {job_id} has expired (HADES_ARTIFACTS retention)"}
    assert (await api.client.get(f"/jobs/{job_id}/artifacts/b.txt")).content == b"b"

    expired = await api.submit(job("late reader", "true", inputs=[f"{job_id}:a.txt"]))
    ended = await api.wait_terminal(expired)
    assert ended["reason"] == f"input {job_id}:a.txt: a.txt of job {job_id} has expired (HADES_ARTIFACTS retention)"
