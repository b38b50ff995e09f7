"""``hades k8s manifest``: the Pod or the BuildJob a job file becomes, as YAML."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from hades.cli import main
from tests.deploy.manifests import buildjob_validator

JOB = {
    "id": "0b6c0f5e-8a63-4c2f-9d55-0f6f3a7c2e11",
    "name": "demo",
    "timeout_seconds": 300,
    "steps": [
        {"id": 1, "image": "alpine/git", "script": "echo $(date)", "memory_limit": "2g", "cpu_limit": 2},
        {"id": 2, "image": "gradle:8", "script": "gradle test", "continue_on_error": True},
    ],
}


def manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, object]:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(JOB))
    assert main(["k8s", "manifest", str(path), *flags]) == 0
    loaded: dict[str, object] = yaml.safe_load(capsys.readouterr().out)
    return loaded


def test_the_pod_for_a_job_file_is_printed_and_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K8S_NAMESPACE", "builds")

    pod = manifest(tmp_path, capsys)

    kubernetes_validate.validate(pod, kubernetes_validate.latest_version(), strict=True)
    assert pod["metadata"] == {
        "name": f"hades-{JOB['id']}-1",
        "namespace": "builds",
        "labels": {
            "hades/job-id": JOB["id"],
            "hades/attempt": "1",
            "hades.tum.de/priority": "3",
            "app.kubernetes.io/managed-by": "hades-executor",
        },
        "annotations": pod["metadata"]["annotations"],  # type: ignore[index]
    }
    assert pod["spec"]["initContainers"][0]["resources"] == {"limits": {"cpu": "2", "memory": "2Gi"}}  # type: ignore[index]


def test_the_buildjob_for_a_job_file_is_printed_and_the_crd_accepts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    buildjob = manifest(tmp_path, capsys, "--operator")

    assert list(buildjob_validator().iter_errors(buildjob)) == []
    assert buildjob["kind"] == "BuildJob" and buildjob["spec"]["maxRetries"] == 2  # type: ignore[index]


def test_the_manifest_has_the_timeout_the_api_would_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HADES_MAX_TIMEOUT_SECONDS", "120")

    pod, buildjob = manifest(tmp_path, capsys), manifest(tmp_path, capsys, "--operator")

    assert pod["spec"]["activeDeadlineSeconds"] == 120  # type: ignore[index]
    assert buildjob["spec"]["timeoutSeconds"] == 120  # type: ignore[index]


def test_an_invalid_job_file_is_refused_with_the_apis_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"steps": [{"id": 1, "image": "a"}]}))

    assert main(["k8s", "manifest", str(path)]) == 2
    assert capsys.readouterr().err == 'hades: Invalid request payload: "name" is required\n'
