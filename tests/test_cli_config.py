"""``hades config`` through the real console script: the effective settings from the environment and ``.env``,
every secret masked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hades.config import Settings, load_settings
from hades.core.redact import MASK

HADES = Path(sys.executable).parent / "hades"
SECRETS = {
    "AUTH_KEY": "basic-auth-s3cret-4f9a",
    "NATS_PASSWORD": "nats-pa55-77e1",
    "WEBHOOK_SECRET": "hmac-key-0b3c5d",
    "DASHBOARD_PASSWORD_HASH": "$2b$12$abcdefghijklmnopqrstuuvwxyzABCDEFGHIJKLMNOPQRSTUVWXy",
}
FROM_DOTENV = "dashboard-session-secret-from-dotenv-0123456789"
IN_URL = "url-pass-9c2e"


def run_config(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name.upper() not in _read_by_hades()}
    env |= SECRETS | {"NATS_URL": f"nats://hades:{IN_URL}@nats-1:4222,nats://nats-2:4222", "API_PORT": "9099"}
    return subprocess.run(
        [str(HADES), "config", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True
    )


def _read_by_hades() -> set[str]:
    return {str(field.validation_alias) for field in Settings.model_fields.values()}


def write_dotenv(cwd: Path) -> None:
    (cwd / ".env").write_text(f"DASHBOARD_SESSION_SECRET={FROM_DOTENV}\nHADES_VERSION=1.2.3-dotenv\n")


def assert_no_secret_in(output: str) -> None:
    for secret in [*SECRETS.values(), FROM_DOTENV, IN_URL]:
        assert secret not in output


def test_config_prints_the_effective_settings_with_every_secret_masked(tmp_path: Path) -> None:
    write_dotenv(tmp_path)
    result = run_config(tmp_path)

    assert_no_secret_in(result.stdout + result.stderr)
    lines = result.stdout.splitlines()
    assert "API_PORT=9099" in lines  # from the environment
    assert "HADES_VERSION=1.2.3-dotenv" in lines  # from .env
    assert "LOG_MANAGER_PORT=8081" in lines  # a default
    assert "# K8S_KUBECONFIG (unset)" in lines
    for name in [*SECRETS, "DASHBOARD_SESSION_SECRET"]:
        assert f"{name}={MASK}" in lines
    assert f"NATS_URL=nats://hades:{MASK}@nats-1:4222,nats://nats-2:4222" in lines
    assert "# NATS" in lines and "# scheduler" in lines


def test_config_json_is_for_scripts_and_masks_the_same(tmp_path: Path) -> None:
    write_dotenv(tmp_path)
    result = run_config(tmp_path, "--json")

    assert_no_secret_in(result.stdout + result.stderr)
    shown = json.loads(result.stdout)
    assert shown["API"]["API_PORT"] == 9099
    assert shown["API"]["AUTH_KEY"] == MASK
    assert shown["general"]["DEBUG"] is False
    assert shown["NATS"]["NATS_USERNAME"] is None
    variables = {name for section in shown.values() for name in section}
    assert variables == _read_by_hades()


def test_an_empty_variable_means_unset_as_in_the_go_hades(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compose passes ``${VAR:-}`` through as an empty string: optional numbers and durations take their default."""
    monkeypatch.chdir(tmp_path)
    for name in ("UNSCHEDULABLE_TIMEOUT", "MAX_PARALLELISM", "API_PORT", "DASHBOARD_USERNAME"):
        monkeypatch.setenv(name, "")
    settings = load_settings()
    assert settings.unschedulable_timeout is None and settings.max_parallelism == 0 and settings.api_port == 8080
