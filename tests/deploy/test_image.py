"""The Dockerfile and the chart agree: the image's user, its Python, what it copies, and the roles the chart runs.

The image is not built here (no registry to pull ``python:3.11-slim`` from on these machines); these checks are on
the Dockerfile's text and on the CLI the image's entry point is.
"""

from __future__ import annotations

import argparse
import re
import tomllib

import pytest
import yaml

from hades.cli import _parser
from tests.deploy.manifests import CHART, ROOT, pod_specs, render

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    """The arguments of every Dockerfile instruction called ``name``, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    return [line.split(None, 1)[1] for line in joined.splitlines() if line.split(None, 1)[:1] == [name]]


def test_the_image_runs_as_the_user_the_chart_asks_for() -> None:
    (user,) = instructions("USER")
    uid, gid = user.split(":")
    pod = yaml.safe_load((CHART / "values.yaml").read_text())["podSecurityContext"]
    assert (int(uid), int(gid)) == (pod["runAsUser"], pod["runAsGroup"])
    assert int(uid) != 0


def test_the_image_python_satisfies_the_project() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floor = re.fullmatch(r">=(\d+)\.(\d+)", project["requires-python"])
    assert floor is not None
    for base in instructions("FROM"):
        version = re.match(r"python:(\d+)\.(\d+)", base)
        assert version is not None, base
        assert tuple(map(int, version.groups())) >= tuple(map(int, floor.groups())), base
    # the Kubernetes roles' client is a dependency of the package the image installs, not an extra
    assert any(dependency.startswith("kubernetes-asyncio") for dependency in project["dependencies"])


def test_what_the_image_copies_exists() -> None:
    for copy in instructions("COPY"):
        if copy.startswith("--from="):
            continue
        *sources, _destination = copy.split()
        for source in sources:
            assert (ROOT / source).exists(), source
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "hades" not in ignored and "streams.yaml" not in ignored


@pytest.mark.parametrize("mode", ["executor", "operator"])
def test_every_role_the_chart_runs_is_a_hades_command(mode: str) -> None:
    (commands,) = (a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    for workload, pod in pod_specs(render({"execution": {"mode": mode}})).items():
        for container in pod["containers"] + pod.get("initContainers", []):
            if not container["image"].startswith("ghcr.io/hades-scheduler/"):
                continue  # NATS
            command = container["args"][0]
            assert command in commands.choices, f"{workload}: hades {command}"


def test_every_setting_the_chart_gives_is_one_hades_reads() -> None:
    """A misspelt variable would be ignored silently (``extra="ignore"``): each name is a Settings alias."""
    from hades.config import Settings

    known = {field.validation_alias for field in Settings.model_fields.values()} | {"PYTHONDONTWRITEBYTECODE"}
    values = {"auth": {"secretName": "a"}, "hadesApi": {"dashboard": {"enabled": True, "secretName": "d"}}}
    operator = {**values, "execution": {"mode": "operator"}}
    workloads = {**pod_specs(render(values)), **pod_specs(render(operator))}
    for workload, pod in workloads.items():
        for container in pod["containers"] + pod.get("initContainers", []):
            if container["image"].startswith("ghcr.io/hades-scheduler/"):
                unknown = {item["name"] for item in container.get("env", [])} - known
                assert not unknown, f"{workload} {container['name']}: {sorted(unknown)}"
