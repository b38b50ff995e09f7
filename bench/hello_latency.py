"""Submit-to-Succeeded latency of the one-step hello job, against ``docker run --rm`` of the same container.

Starts ``hades up`` (embedded nats-server, Docker executor) in a temporary data folder, submits
examples/hello.json N times one after another, and measures each job from the POST to the moment the client sees
``Succeeded`` (polling every 5 ms), plus the server-side span from the ``submitted`` to the ``succeeded`` event.
The baseline is the same container run straight through ``docker run --rm`` in the same run. Prints medians and
the ratio. Needs a Docker engine and the image ``alpine:latest`` (scripts/busybox-image.sh makes one offline).

    .venv/bin/python bench/hello_latency.py [N]
"""

from __future__ import annotations

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


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    docker_run_once()  # warm the engine's caches like Hades's first job does
    baseline = [docker_run_once() for _ in range(runs)]
    with tempfile.TemporaryDirectory(prefix="hades-bench-") as data:
        process, url = start_hades(Path(data))
        try:
            with httpx.Client(base_url=url, timeout=30) as client:
                one_job(client)  # warm-up
                results = [one_job(client) for _ in range(runs)]
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    seen = statistics.median(r[0] for r in results)
    server = statistics.median(r[1] for r in results)
    base = statistics.median(baseline)
    print(f"runs: {runs}")
    print(f"docker run --rm (baseline)         median {base * 1000:7.1f} ms")
    print(f"hades POST -> Succeeded (client)   median {seen * 1000:7.1f} ms   ratio {seen / base:5.2f}x")
    print(f"hades submitted -> succeeded event median {server * 1000:7.1f} ms   ratio {server / base:5.2f}x")


if __name__ == "__main__":
    main()
