"""What the chaos tests drive: Hades role processes to SIGKILL and restart, and clients that submit through faults.

A role runs as two replicas unless told otherwise; killing a role kills all of its processes at once (the worst
case: nobody of that role is left), restarting starts as many again. API replicas keep their ports across restarts,
so the submitting clients keep one list of URLs, as behind a load balancer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import free_port

#: ``hades <role>``, except that a role that dies leaves its traceback in its log (the CLI prints only the message).
LAUNCH = """
import sys, traceback
import hades.cli as cli
role = cli._role
def traced(args, settings):
    try:
        return role(args, settings)
    except BaseException:
        traceback.print_exc()
        raise
cli._role = traced
sys.exit(cli.main())
"""
ROLES = ("api", "scheduler", "executor", "notifier")


@dataclass
class RoleFleet:
    """``hades <role>`` processes against one NATS (a server list on a cluster)."""

    nats_url: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    replicas: int = 2
    processes: dict[str, list[subprocess.Popen[bytes]]] = field(default_factory=dict)
    api_ports: list[int] = field(default_factory=list)
    _spawned: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def api_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.api_ports]

    def start(self, role: str) -> None:
        """Start the role's replicas (API replicas on their ports, chosen once)."""
        if role == "api" and not self.api_ports:
            self.api_ports = [free_port() for _ in range(self.replicas)]
        self.processes[role] = [self._spawn(role, index) for index in range(self.replicas)]

    def start_all(self) -> None:
        for role in ROLES:
            self.start(role)

    def kill(self, role: str) -> None:
        """SIGKILL every process of the role, as a crash or a lost machine would."""
        for process in self.processes.get(role, []):
            if process.poll() is None:
                process.kill()
                process.wait()

    def exited(self) -> list[str]:
        """Roles with a process that ended without being killed by the test (a role that died on its own)."""
        return [role for role, group in self.processes.items() for p in group if p.poll() not in (None, -9)]

    def stop(self) -> None:
        """SIGKILL whatever still runs (also on test failure)."""
        for process in self._spawned:
            if process.poll() is None:
                process.kill()
        for process in self._spawned:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)

    def _spawn(self, role: str, index: int) -> subprocess.Popen[bytes]:
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("HADES_", "API_", "AUTH_"))}
        environment.update(
            NATS_URL=self.nats_url,
            HADES_DATA_DIR=str(self.workdir / "data"),
            METRICS_PORT="0",
            DOCKER_PULL_POLICY="never",
            **self.env,
        )
        if role == "api":
            environment.update(API_HOST="127.0.0.1", API_PORT=str(self.api_ports[index]))
        log = self.workdir / f"{role}-{index}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-c", LAUNCH, role], env=environment, stdout=out, stderr=subprocess.STDOUT
            )
        self._spawned.append(process)
        return process


@contextlib.contextmanager
def role_fleet(nats_url: str, workdir: Path, **env: str) -> Iterator[RoleFleet]:
    """A fleet whose processes are all killed when the block ends, however it ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    fleet = RoleFleet(nats_url, workdir, dict(env))
    try:
        yield fleet
    finally:
        fleet.stop()


@dataclass
class Submitter:
    """Clients that POST /build across the API replicas, retrying connection errors and 5xx with the job's
    Idempotency-Key; only 200s count."""

    urls: list[str]
    job: Any  # (index) -> the job body
    accepted: dict[str, float] = field(default_factory=dict)  # job id -> wall time its accepted POST was sent
    refused: int = 0  # 4xx: a bug in the test or in Hades, asserted to be 0
    retries: int = 0
    server_errors: collections.Counter[int] = field(default_factory=collections.Counter)  # retried 5xx by status
    latencies: list[float] = field(default_factory=list)
    _counter: Iterator[int] = field(default_factory=itertools.count)
    _turn: Iterator[int] = field(default_factory=itertools.count)

    async def submit(self, client: httpx.AsyncClient, deadline: float) -> str | None:
        """One job, retried until accepted or ``deadline`` (monotonic); its id, or None when refused."""
        body = self.job(next(self._counter))
        key = {"Idempotency-Key": f"chaos-{uuid.uuid4()}"}  # a retry of a request that landed is the same job
        while time.monotonic() < deadline:
            url = self.urls[next(self._turn) % len(self.urls)]
            sent, began = time.time(), time.perf_counter()
            try:
                response = await client.post(f"{url}/build", json=body, headers=key)
            except httpx.HTTPError:
                self.retries += 1
                await asyncio.sleep(0.05)  # a back-off between retries, not a synchronisation
                continue
            if response.status_code >= 500:
                self.retries += 1
                self.server_errors[response.status_code] += 1
                await asyncio.sleep(0.05)
                continue
            if response.status_code != 200:
                self.refused += 1
                return None
            self.latencies.append(time.perf_counter() - began)
            job_id = str(response.json()["job_id"])
            self.accepted[job_id] = sent
            return job_id
        raise AssertionError(f"no API replica accepted a job within the deadline ({self.retries} retries)")

    async def submit_many(self, count: int, rate: float, timeout: float = 60) -> None:
        """``count`` jobs at about ``rate`` per second, each from its own client task, all retried through faults."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=10) as client, asyncio.TaskGroup() as group:
            start = time.monotonic()
            for index in range(count):
                await asyncio.sleep(max(0.0, start + index / rate - time.monotonic()))  # pacing, not waiting
                group.create_task(self.submit(client, deadline))
