"""Submit-to-Succeeded latency of the one-step hello job, against ``docker run --rm`` of the same container.

Starts ``hades up`` (embedded nats-server, Docker executor) in a temporary data folder, submits
examples/hello.json N times one after another, and measures each job from the POST to the moment the client sees
``Succeeded`` (polling every 5 ms), plus the server-side span from the ``submitted`` to the ``succeeded`` event.
The baselines are the same container run by ``docker run --rm`` and straight through aiodocker, interleaved with
the Hades jobs in the same run. Prints medians and
the ratio. Needs a Docker engine and the image ``alpine:latest`` (scripts/busybox-image.sh makes one offline).

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
from datetime import datetime
from pathlib import Path

import aiodocker
import httpx

REPO = Path(__file__).resolve().parents[1]
JOB = json.loads((REPO / "examples" / "hello.json").read_text())


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


def one_job(client: httpx.Client) -> tuple[float, float]:
    """(client-seen seconds, server-side seconds from the submitted to the succeeded event)."""
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
    return seen, (stamps[-1] - stamps[0]).total_seconds()


def docker_run_once() -> float:
    began = time.perf_counter()
    subprocess.run(
        ["docker", "run", "--rm", "alpine:latest", "sh", "-c", "echo 'Hello, Hades!'"],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - began


async def aiodocker_once() -> float:
    """The same container through the engine API: create, start, wait, read its output, remove."""
    async with aiodocker.Docker() as docker:
        began = time.perf_counter()
        container = await docker.containers.create(
            {"Image": "alpine:latest", "Entrypoint": ["/bin/sh", "-c", "echo 'Hello, Hades!'"]}
        )
        await container.start()
        await container.wait()
        await container.log(stdout=True)
        await container.delete(force=True)
        return time.perf_counter() - began


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
    base_cli, base_api = statistics.median(cli), statistics.median(api)
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


if __name__ == "__main__":
    main()
