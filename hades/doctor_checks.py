"""The checks of ``hades doctor``, one function each: what it found, and for every problem the fix in one sentence.

Each check does what the roles themselves do at start-up (the same settings validation, the same dashboard
configuration, the same connection options, the same topology comparison as ``hades streams apply``), so a PASS
here means the role will not refuse to start for that reason.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from nats.aio.client import Client
from pydantic import ValidationError

from hades.adapters.nats.heartbeats import Heartbeats
from hades.adapters.nats.topology_state import FIX, TopologyState
from hades.config import Settings
from hades.http.dashboard.config import DashboardConfig, DashboardConfigError

Level = Literal["PASS", "WARN", "FAIL", "INFO"]
DEFAULT_DOCKER_SOCKET = "/var/run/docker.sock"
OLDEST_NATS = (2, 12)


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    level: Level
    message: str
    fix: str | None = None


def settings_problems(error: ValidationError) -> list[Check]:
    """One FAIL per bad value, naming its variable (the alias the roles read), as the roles refuse to start."""
    checks = []
    for problem in error.errors():
        variable = ".".join(str(part) for part in problem["loc"]) or "settings"
        value = problem.get("input")
        shown = f"={value!r}" if isinstance(value, str | int | float) else ""
        checks.append(
            Check(
                "settings",
                "FAIL",
                f"{variable}{shown}: {problem['msg']}",
                f"set {variable} to a valid value (docs/configuration.md lists each one) or unset it",
            )
        )
    return checks


def settings_loaded(settings: Settings) -> list[Check]:
    """The settings load; which executor and NATS they select; an open API is worth a warning."""
    where = settings.nats_url or f"unset, so `hades up` starts its own on port {settings.nats_port}"
    dotenv = " (with .env)" if Path(".env").is_file() else ""
    checks = [Check("settings", "PASS", f"settings load{dotenv}: HADES_EXECUTOR={settings.executor}, NATS_URL {where}")]
    if not settings.auth_key:
        checks.append(
            Check(
                "auth",
                "WARN",
                "AUTH_KEY is empty: /build and /jobs... are open to anyone who can reach the API",
                "set AUTH_KEY; clients then send HTTP Basic auth as user hades with it as the password",
            )
        )
    return checks


def dashboard(settings: Settings) -> Check:
    """Off, or its settings as consistent as the API requires (the same validation, which stops the API)."""
    required = {
        "DASHBOARD_USERNAME": settings.dashboard_username,
        "DASHBOARD_PASSWORD_HASH": settings.dashboard_password_hash,
        "DASHBOARD_SESSION_SECRET": settings.dashboard_session_secret,
    }
    unset = [name for name, value in required.items() if not value]
    if len(unset) == len(required):
        return Check(
            "dashboard", "INFO", "the dashboard is off (DASHBOARD_USERNAME, _PASSWORD_HASH, _SESSION_SECRET unset)"
        )
    if unset:
        return Check(
            "dashboard",
            "WARN",
            f"the dashboard stays off: {', '.join(unset)} unset while the others are set",
            f"set {', '.join(unset)} too (all three turn it on), or unset the others",
        )
    try:
        DashboardConfig.from_settings(settings)
    except DashboardConfigError as error:
        return Check("dashboard", "FAIL", str(error), "fix that value: the API refuses to start with it")
    return Check("dashboard", "PASS", f"the dashboard is on for user {settings.dashboard_username}")


async def nats_server(nc: Client, url: str) -> list[Check]:
    """The server's version and whether JetStream answers."""
    version = nc.connected_server_version
    found = f"nats-server {version.major}.{version.minor}.{version.patch} at {url}"
    checks = [Check("nats", "PASS", f"connected to {found}")]
    if (version.major, version.minor) < OLDEST_NATS:
        checks = [Check("nats", "FAIL", f"{found} is older than 2.12", "upgrade nats-server to 2.12 or newer")]
    try:
        account = await nc.jetstream().account_info()
    except Exception as error:  # ServiceUnavailableError, NoRespondersError, a timeout: JetStream is not there
        reason = str(error) or type(error).__name__
        checks.append(
            Check(
                "jetstream",
                "FAIL",
                f"JetStream does not answer on that server ({reason})",
                "start nats-server with JetStream on (`-js`, or `jetstream {}` in its configuration)",
            )
        )
        return checks
    checks.append(Check("jetstream", "PASS", f"JetStream on: {account.streams} streams, {account.consumers} consumers"))
    return checks


def topology(state: TopologyState) -> Check:
    """The server against streams.yaml, as ``hades streams show`` compares them."""
    if state.ok:
        consumers = sum(1 for consumer in state.consumers if consumer.declared)
        return Check(
            "topology",
            "PASS",
            f"{len(state.stores)} streams, buckets and object stores and {consumers} consumers match streams.yaml",
        )
    return Check("topology", "FAIL", "; ".join(state.problems), FIX)


async def executors_alive(nc: Client) -> Check:
    """The live executors' heartbeats (information: none alive is a state, not a fault)."""
    try:
        alive = await Heartbeats(nc).alive()
    except Exception as error:  # the bucket missing is already a topology FAIL
        return Check("executors", "INFO", f"cannot read executor heartbeats: {error}")
    if not alive:
        return Check(
            "executors",
            "INFO",
            "no executor is alive: jobs wait in the queue until one starts (`hades executor`, or `hades up`)",
        )
    names = ", ".join(sorted(alive)[:5]) + (", ..." if len(alive) > 5 else "")
    return Check("executors", "INFO", f"{len(alive)} executor(s) alive: {names}")


async def docker_engine(settings: Settings) -> Check:
    """The Docker executor: the engine's socket reachable and answering, and its version."""
    from hades.adapters.docker.containers import DockerDefaults

    try:
        DockerDefaults(settings.executor_id, memory_limit=settings.docker_memory_limit).memory_bytes  # noqa: B018
    except ValueError as error:
        return Check("docker", "FAIL", f"DOCKER_MEMORY_LIMIT: {error}", "set DOCKER_MEMORY_LIMIT like 512M or 2G")
    host = settings.docker_host or f"unix://{DEFAULT_DOCKER_SOCKET}"
    if host.startswith("unix://"):
        problem = _socket_problem(host.removeprefix("unix://"))
        if problem is not None:
            return problem
    return await _docker_version(host)


def _socket_problem(path: str) -> Check | None:
    if not os.path.exists(path):
        return Check(
            "docker",
            "FAIL",
            f"no Docker socket at {path}",
            "start the Docker engine (dockerd), or set DOCKER_HOST to where it listens",
        )
    if not os.access(path, os.R_OK | os.W_OK):
        return _permission_denied(path)
    return None


def _permission_denied(path: str) -> Check:
    return Check(
        "docker",
        "FAIL",
        f"permission denied on the Docker socket {path}",
        "add this user to the docker group (`sudo usermod -aG docker $USER`, then log in again) or run Hades as root",
    )


async def _docker_version(host: str) -> Check:
    import aiodocker

    docker = aiodocker.Docker(url=host)
    try:
        version = await asyncio.wait_for(docker.version(), timeout=5)
    except PermissionError:
        return _permission_denied(host.removeprefix("unix://"))
    except Exception as error:  # refused, a timeout, not a Docker engine
        reason = str(error) or type(error).__name__
        return Check(
            "docker",
            "FAIL",
            f"the Docker engine at {host} does not answer: {reason}",
            "start dockerd, or point DOCKER_HOST at a running engine",
        )
    finally:
        await docker.close()
    return Check(
        "docker", "PASS", f"Docker engine {version.get('Version')} (API {version.get('ApiVersion')}) at {host}"
    )


def process_workspaces(settings: Settings) -> Check:
    """The process executor: its workspace folder writable (or creatable)."""
    root = settings.process_root.resolve()
    fix = f"make {root} writable for this user, or set HADES_PROCESS_WORKSPACES to a folder it can write"
    existing = next((folder for folder in (root, *root.parents) if folder.exists()), None)
    if existing is None or not existing.is_dir():
        return Check("workspaces", "FAIL", f"{existing or root} is not a folder", fix)
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        return Check("workspaces", "FAIL", f"cannot write in {existing}: {error.strerror or error}", fix)
    if existing == root:
        return Check("workspaces", "PASS", f"the process executor's workspaces in {root} are writable")
    return Check("workspaces", "PASS", f"{root} will be created (its parent {existing} is writable)")


async def kubernetes_config(settings: Settings) -> Check:
    """The Kubernetes executor or operator: a kubeconfig or the in-cluster configuration, loaded as they load it."""
    from hades.adapters.k8s.executor import load_configuration

    try:
        configuration = await load_configuration(settings.k8s_kubeconfig)
    except Exception as error:  # ConfigException, a missing or unreadable file
        where = (
            f"K8S_KUBECONFIG={settings.k8s_kubeconfig}" if settings.k8s_kubeconfig else "in-cluster or ~/.kube/config"
        )
        return Check(
            "kubernetes",
            "FAIL",
            f"no usable Kubernetes configuration ({where}): {error}",
            "run inside the cluster with a service account, or set K8S_KUBECONFIG to a kubeconfig file",
        )
    return Check("kubernetes", "PASS", f"Kubernetes API at {configuration.host}, namespace {settings.k8s_namespace}")
