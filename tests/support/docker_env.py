"""Helpers for tests that need a real Docker engine.

Plain functions (no fixtures) so conftest.py can decide scoping:

* ``docker_available()`` -- is an engine answering on the unix socket?
* ``ensure_test_images(tags)`` -- make sure the tiny busybox test image exists under every tag.
* ``require_docker()`` -- skip (laptop) or fail (``CI=true``) when no engine is answering.

No image can be pulled in the test environment, so "seed" tags such as ``alpine:latest`` are
local busybox images built by ``scripts/busybox-image.sh`` (no network, ~1 s). They have a
busybox userland (sh, cat, sleep, ip, ...) but nothing else: no python, no apk/apt.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlparse

BUSYBOX_TAG = "hades-test/busybox:1"
SEED_TAGS = ["alpine:latest", "ubuntu:latest", "python:3.9-alpine"]

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = REPO_ROOT / "scripts"
DEFAULT_SOCKET = "/var/run/docker.sock"


def docker_socket_path() -> str:
    """The engine's unix socket: ``DOCKER_HOST`` if it is a ``unix://`` URL, else the default."""
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        return urlparse(host).path or DEFAULT_SOCKET
    return DEFAULT_SOCKET


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._unix_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def docker_available(timeout: float = 2.0) -> bool:
    """True if the Docker socket exists and ``GET /_ping`` answers ``200 OK``."""
    path = docker_socket_path()
    if not os.path.exists(path):
        return False
    conn = _UnixHTTPConnection(path, timeout=timeout)
    try:
        conn.request("GET", "/_ping")
        resp = conn.getresponse()
        body = resp.read(64)
        return resp.status == 200 and body.strip() == b"OK"
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def ensure_test_images(tags: list[str]) -> None:
    """Build/tag the busybox test image under every tag in ``tags`` (no-op for existing tags).

    Raises ``RuntimeError`` carrying the script's output if it fails.
    """
    if not tags:
        return
    script = SCRIPTS_DIR / "busybox-image.sh"
    try:
        proc = subprocess.run(
            ["bash", str(script), *tags],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"{script} {' '.join(tags)} could not run: {exc}") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"{script} {' '.join(tags)} failed with exit code {proc.returncode}:\n{proc.stdout}")


def require_docker() -> None:
    """Skip the calling test when Docker is unavailable; under ``CI=true`` fail instead."""
    import pytest

    if docker_available():
        return
    msg = f"Docker engine not answering on {docker_socket_path()} (start one with: sudo scripts/start-dockerd.sh)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {msg}; Docker tests must not be skipped in CI", pytrace=False)
    pytest.skip(msg)
