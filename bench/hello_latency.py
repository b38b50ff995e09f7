"""Submit-to-Succeeded latency of the one-step hello job, against ``docker run --rm`` of the same container.

Starts ``hades up`` (embedded nats-server, Docker executor) in a temporary data folder, submits
examples/hello.json N times one after another, and measures each job from the POST to the moment the client sees
``Succeeded`` (polling every 5 ms), plus the server-side span from the ``submitted`` to the ``succeeded`` event.
The baselines are the same container run by ``docker run --rm`` and straight through aiodocker, interleaved with
the Hades jobs in the same run. Prints medians and the ratio. The aiodocker baseline creates the very container
Hades would (the Docker executor's own ``container_config``: the ``/shared`` volume mount, working directory,
environment, labels and security options; the engine makes the named volume at create), so that what the engine
spends on that container's configuration falls on both sides alike; its volume is removed after the timer, as
Hades removes the job's volume after the job's end.

The engine's own create, start and wait of the container vary by hundreds of milliseconds from one run to the next
on a slow storage driver (vfs: a create copies the image), far more than Hades adds, so the bench also prints each
side's time beyond those three calls (Hades: its step's ``create``, ``start`` and ``run`` phases; the baseline: its
create, start and wait), and the median of the paired differences.

Needs a Docker engine and the image ``alpine:latest`` (scripts/busybox-image.sh makes one offline).

    .venv/bin/python bench/hello_latency.py [N]
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiodocker
import httpx

from hades.adapters.docker.containers import DockerDefaults, container_config
from hades.core.go_request import parse_job_request
from hades.core.lifecycle import SubmitJob, decide, evolve

REPO = Path(__file__).resolve().parents[1]
JOB = json.loads((REPO / "examples" / "hello.json").read_text())
SPEC = parse_job_request((REPO / "examples" / "hello.json").read_bytes())
#: The step's phases that are the engine's own work on the container, timed alike on both sides.
ENGINE_CALLS = ("create", "start", "run")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_hades(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "HADES_DATA_DIR": str(data), "API_PORT": str(port), "NATS_PORT": str(free_port())}
    env.pop("NATS_URL", None)
    process = subprocess.Popen([sys.executable, "-m", "hades.cli", "up"], env=env, cwd=REPO, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/ping", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("hades up did not start")


def one_job(client: httpx.Client) -> tuple[float, float, float]:
    """(client-seen seconds, server-side seconds from the submitted to the succeeded event, the engine's seconds
    for the step's container: its create, start and wait, as its ``step_finished`` phases say)."""
    began = time.perf_counter()
    job_id = client.post("/build", json=JOB).json()["job_id"]
    while True:
        status = client.get(f"/jobs/{job_id}/status").json()["status"]
        if status in ("Succeeded", "Failed", "Stopped"):
            break
        time.sleep(0.005)
    seen = time.perf_counter() - began
    if status != "Succeeded":
        raise SystemExit(f"job {job_id} ended {status}")
    events = client.get(f"/jobs/{job_id}/events").json()["events"]
    stamps = [datetime.fromisoformat(e["at"].replace("Z", "+00:00")) for e in events]
    phases = next(e["phases"] for e in events if e["type"] == "step_finished")
    engine = sum(phases.get(name, 0.0) for name in ENGINE_CALLS)
    return seen, (stamps[-1] - stamps[0]).total_seconds(), engine


def docker_run_once() -> float:
    began = time.perf_counter()
    subprocess.run(
        ["docker", "run", "--rm", "alpine:latest", "sh", "-c", "echo 'Hello, Hades!'"],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - began


def same_container() -> dict[str, Any]:
    """The create body Hades's Docker executor sends for the hello job's step (a fresh job id each time)."""
    job = evolve(None, decide(None, SubmitJob(job_id=str(uuid.uuid4()), spec=SPEC), datetime.now(UTC))[0])
    return container_config(job, 0, DockerDefaults(executor_id="bench"))


async def aiodocker_once() -> tuple[float, float]:
    """The same container through the engine API: create, start, wait, read its output, remove. (Seconds in all,
    seconds of its create, start and wait.)"""
    config = same_container()
    async with aiodocker.Docker() as docker:
        began = time.perf_counter()
        container = await docker.containers.create(config)
        await container.start()
        await container.wait()
        engine = time.perf_counter() - began
        await container.log(stdout=True)
        await container.delete(force=True)
        took = time.perf_counter() - began
        await (await docker.volumes.get(config["HostConfig"]["Mounts"][0]["Source"])).delete()
        return took, engine


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    results, cli, api = [], [], []
    with tempfile.TemporaryDirectory(prefix="hades-bench-") as data:
        process, url = start_hades(Path(data))
        try:
            with httpx.Client(base_url=url, timeout=30) as client:
                one_job(client), docker_run_once(), asyncio.run(aiodocker_once())  # warm-up
                # Interleaved, so that the engine's drift over the run affects all three alike.
                for _ in range(runs):
                    results.append(one_job(client))
                    cli.append(docker_run_once())
                    api.append(asyncio.run(aiodocker_once()))
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    seen = statistics.median(r[0] for r in results)
    server = statistics.median(r[1] for r in results)
    base_cli, base_api = statistics.median(cli), statistics.median(a[0] for a in api)
    beyond = [r[0] - r[2] for r in results]
    beyond_api = [a[0] - a[1] for a in api]
    print(f"runs: {runs} (interleaved)")
    print(f"docker run --rm                      median {base_cli * 1000:7.1f} ms")
    print(f"aiodocker create/start/wait/delete   median {base_api * 1000:7.1f} ms")
    print(
        f"hades POST -> Succeeded (client)     median {seen * 1000:7.1f} ms   "
        f"{seen / base_cli:5.2f}x docker run, {seen / base_api:5.2f}x aiodocker"
    )
    print(
        f"hades submitted -> succeeded event   median {server * 1000:7.1f} ms   "
        f"{server / base_cli:5.2f}x docker run, {server / base_api:5.2f}x aiodocker"
    )
    print(
        f"engine's create+start+wait           median {statistics.median(r[2] for r in results) * 1000:7.1f} ms "
        f"hades, {statistics.median(a[1] for a in api) * 1000:7.1f} ms aiodocker"
    )
    print(
        f"beyond create+start+wait             median {statistics.median(beyond) * 1000:7.1f} ms hades, "
        f"{statistics.median(beyond_api) * 1000:7.1f} ms aiodocker (log read and delete): "
        f"{(statistics.median(beyond) - statistics.median(beyond_api)) * 1000:+.1f} ms"
    )
    paired = [r[0] - a[0] for r, a in zip(results, api, strict=True)]
    print(f"paired hades - aiodocker, per run    median {statistics.median(paired) * 1000:+7.1f} ms")


if __name__ == "__main__":
    main()
