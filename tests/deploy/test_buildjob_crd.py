"""The BuildJob CRD (``helm/hades/crds``) and the sample BuildJobs, checked against the CRD's own schema.

The CRD itself passes Kubernetes' schema in ``test_helm_chart``; here a BuildJob is validated against its
``openAPIV3Schema`` the way the API server with strict field validation would, so the contract's holes stay closed:
memory limits in the API's units (``2g`` included), ``maxRetries`` declared, a refused spec refused at the door.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from hades.core.memory import MemoryFormatError, parse_memory
from hades.core.spec import parse_job_request
from tests.deploy.manifests import ROOT, buildjob_validator, crd

SAMPLE = ROOT / "examples" / "buildjob.yaml"
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def sample() -> dict[str, Any]:
    """examples/buildjob.yaml."""
    loaded: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return loaded


def check(buildjob: dict[str, Any]) -> None:
    """What the API server checks when a BuildJob is created: its type, its name, its schema."""
    definition = crd()["spec"]
    (version,) = definition["versions"]
    assert buildjob["apiVersion"] == f"{definition['group']}/{version['name']}"
    assert buildjob["kind"] == definition["names"]["kind"]
    name = buildjob["metadata"]["name"]
    assert len(name) <= 253 and DNS_SUBDOMAIN.match(name), name
    buildjob_validator().validate(buildjob)


def test_the_crd_names_what_the_operator_watches() -> None:
    definition = crd()
    assert definition["metadata"]["name"] == "buildjobs.build.hades.tum.de"
    spec = definition["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["plural"]) == ("build.hades.tum.de", "Namespaced", "buildjobs")
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}


def test_the_schema_is_structural() -> None:
    """Every node says its type (or is int-or-string), as apiextensions/v1 requires of a CRD."""
    (version,) = crd()["spec"]["versions"]

    def walk(node: dict[str, Any], path: str) -> None:
        assert "type" in node or node.get("x-kubernetes-int-or-string") is True, path
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}{{}}")

    walk(version["schema"]["openAPIV3Schema"], "")


def test_printer_columns_show_fields_the_schema_has() -> None:
    (version,) = crd()["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    columns = {column["name"]: column["jsonPath"] for column in version["additionalPrinterColumns"]}
    assert {"Phase", "Step", "Retries", "Age"} <= columns.keys()
    for json_path in columns.values():
        node = schema
        for part in json_path.lstrip(".").split("."):
            node = node["properties"][part] if part != "creationTimestamp" else {"type": "string"}
        assert "type" in node, json_path


def test_the_spec_has_the_contracts_fields_and_max_retries() -> None:
    (version,) = crd()["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(spec["required"]) == {"name", "steps"}
    assert set(spec["properties"]) == {"name", "metadata", "steps", "timeoutSeconds", "maxRetries"}
    assert spec["properties"]["maxRetries"]["minimum"] == 0
    step = spec["properties"]["steps"]["items"]
    assert set(step["properties"]) == {
        "id", "name", "image", "script", "continueOnError", "metadata", "cpuRequest", "memoryRequest",
        "cpuLimit", "memoryLimit", "network", "memorySwap", "pidsLimit",
    }  # fmt: skip
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert status["phase"]["enum"] == ["Pending", "Running", "Succeeded", "Failed"]
    assert {"message", "podName", "startTime", "completionTime", "currentStep", "retryCount"} <= status.keys()


def test_the_sample_buildjob_is_accepted() -> None:
    buildjob = sample()
    assert buildjob["spec"]["steps"][0]["memoryLimit"] == "2g"  # the lowercase unit the Go CRD refused
    check(buildjob)


def test_a_buildjob_with_its_status_is_accepted() -> None:
    buildjob = sample() | {
        "status": {
            "phase": "Running",
            "podName": "buildjob-3f1c2a4e",
            "startTime": "2025-01-01T12:00:00Z",
            "currentStep": 2,
            "retryCount": 1,
            "containerStatuses": [
                {"name": "step-1", "stepId": 1, "state": "Succeeded", "logsPublished": True},
                {"name": "step-2", "stepId": 2, "state": "Running", "logsStreamedUntil": "2025-01-01T12:00:05Z"},
            ],
        }
    }
    check(buildjob)


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        pytest.param(lambda spec: spec.__setitem__("steps", []), "should be non-empty", id="no-steps"),
        pytest.param(lambda spec: spec.pop("steps"), "'steps' is a required property", id="steps-missing"),
        pytest.param(lambda spec: spec["steps"][0].__setitem__("id", 0), "less than the minimum of 1", id="step-id-0"),
        pytest.param(
            lambda spec: spec["steps"][0].__setitem__("id", 2**31), "greater than the maximum", id="step-id-int32"
        ),
        pytest.param(lambda spec: spec["steps"][0].__setitem__("image", ""), "should be non-empty", id="empty-image"),
        pytest.param(lambda spec: spec["steps"][0].pop("image"), "'image' is a required property", id="no-image"),
        pytest.param(lambda spec: spec.pop("name"), "'name' is a required property", id="no-name"),
        pytest.param(lambda spec: spec.__setitem__("timeoutSeconds", 0), "less than the minimum of 1", id="timeout-0"),
        pytest.param(
            lambda spec: spec.__setitem__("maxRetries", -1), "less than the minimum of 0", id="retries-negative"
        ),
        pytest.param(lambda spec: spec["steps"][0].__setitem__("memoryLimit", "2Gi"), "does not match", id="memory-Gi"),
        pytest.param(lambda spec: spec["steps"][0].__setitem__("cpuLimit", "two"), "does not match", id="cpu-word"),
        pytest.param(
            lambda spec: spec["steps"][0].__setitem__("continueOnError", "yes"),
            "is not of type 'boolean'",
            id="bool-as-string",
        ),
        pytest.param(
            lambda spec: spec["metadata"].__setitem__("RETRIES", 3), "is not of type 'string'", id="env-not-string"
        ),
        pytest.param(
            lambda spec: spec["steps"][0].__setitem__("stepScript", "echo"), "Additional properties", id="unknown-field"
        ),
    ],
)
def test_an_invalid_buildjob_is_refused(change: Any, complaint: str) -> None:
    buildjob = copy.deepcopy(sample())
    change(buildjob["spec"])
    with pytest.raises(jsonschema.ValidationError, match=re.escape(complaint)):
        check(buildjob)


def test_a_bad_status_is_refused() -> None:
    with pytest.raises(jsonschema.ValidationError, match="is not one of"):
        check(sample() | {"status": {"phase": "Done"}})


MEMORY = ["1G", "2g", "512M", "2m", "+1G", "0M", "2", "2Gi", "1.5G", "-1G", "2T", "2k", "G", "", " 2G", "2G ", "0x1G"]


@pytest.mark.parametrize("memory", MEMORY)
def test_memory_limits_accepted_exactly_as_the_api_accepts_them(memory: str) -> None:
    """The CRD takes the memory strings POST /build takes (hades.core.memory, the Go parser), and no others."""
    try:
        parse_memory(memory)
        api_accepts = True
    except MemoryFormatError:
        api_accepts = False
    for field in ("memoryLimit", "memoryRequest", "memorySwap"):
        buildjob = copy.deepcopy(sample())
        buildjob["spec"]["steps"][1][field] = memory
        errors = list(buildjob_validator().iter_errors(buildjob))
        assert (not errors) == api_accepts, (field, memory, [e.message for e in errors])


@pytest.mark.parametrize(
    ("cpu", "accepted"),
    [(2, True), ("2", True), ("0.5", True), ("500m", True), ("2 cores", False)],
    ids=["int", "string", "fraction", "millicores", "words"],
)
def test_cpu_takes_cores_or_millicores(cpu: int | str, accepted: bool) -> None:
    buildjob = copy.deepcopy(sample())
    buildjob["spec"]["steps"][0]["cpuLimit"] = cpu
    assert buildjob_validator().is_valid(buildjob) == accepted


def test_every_buildjob_example_is_accepted() -> None:
    examples = sorted(Path(ROOT / "examples").glob("buildjob*.yaml"))
    assert SAMPLE in examples
    for path in examples:
        for document in yaml.safe_load_all(path.read_text()):
            check(document)


def test_the_buildjobs_hades_makes_are_accepted() -> None:
    """What the scheduler side writes for a job (``hades.adapters.k8s.buildjob``) fits the CRD, lowercase memory,
    Docker-only fields and ``maxRetries`` included."""
    buildjob = pytest.importorskip("hades.adapters.k8s.buildjob")
    job = {
        "name": "grading",
        "timeout_seconds": 60,
        "metadata": {"REPO": "https://example.org/r.git"},
        "steps": [
            {"id": 1, "image": "alpine", "script": "env", "memory_limit": "2g", "cpu_limit": 2, "metadata": {"A": "1"}},
            {"id": 2, "image": "busybox", "continue_on_error": True, "memory_limit": "1G", "memory_swap": "4g",
             "pids_limit": 10, "network": "none"},
        ],
    }  # fmt: skip
    spec = parse_job_request(json.dumps(job).encode())
    check(buildjob.buildjob_manifest("3f1c2a4e-8d5b-4c7a-9e2f-1a6b8c0d4e21", spec, "hades", max_retries=2))
