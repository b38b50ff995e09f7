"""Rendering the Helm chart and checking Kubernetes manifests, for the tests of ``helm/hades``.

The chart is rendered by Helm itself: ``helm-python-sdk`` ships Helm's Go SDK (v4) as a native library, so
``render`` is what ``helm template`` does and ``lint`` is ``helm lint``, with no ``helm`` binary and no download.
Manifests are checked with ``kubernetes-validate`` (the official OpenAPI schemas, strict: unknown fields fail);
a BuildJob, which those schemas do not know, against the CRD's own ``openAPIV3Schema`` with ``jsonschema``.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "hades"
CRD_FILE = CHART / "crds" / "buildjobs.build.hades.tum.de.yaml"
RELEASE = "hades"
NAMESPACE = "hades-ci"  # not the release name, so a template that mixes them up shows
#: The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion) and the newest the schemas know.
KUBE_VERSIONS = ("1.25.0", latest_version())

Manifest = dict[str, Any]


def require_helm() -> ModuleType:
    """Helm's SDK (``helm_python``); skip without it on a laptop, fail under ``CI=true``."""
    try:
        import helm_python
    except ImportError:
        message = "helm-python-sdk is not installed (pip install helm-python-sdk)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {message}; the chart tests must not be skipped in CI", pytrace=False)
        pytest.skip(message)
    return helm_python


def render(values: dict[str, Any]) -> list[Manifest]:
    """Every document the chart renders with ``values`` (``helm template``; NOTES.txt and empty documents left out)."""
    return copy.deepcopy(_render(json.dumps(values, sort_keys=True)))


@functools.cache
def _render(values_json: str) -> list[Manifest]:
    helm = require_helm()
    with helm.Chart.load(str(CHART)) as chart:
        files = chart.render(json.loads(values_json), name=RELEASE, namespace=NAMESPACE, is_install=True)
    documents: list[Manifest] = []
    for path, text in sorted(files.items()):
        if path.endswith("NOTES.txt"):
            continue
        documents.extend(document for document in yaml.safe_load_all(text) if document)
    return documents


def notes(values: dict[str, Any]) -> str:
    """The NOTES.txt the chart prints after an install with ``values``."""
    helm = require_helm()
    with helm.Chart.load(str(CHART)) as chart:
        files = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return str(next(text for path, text in files.items() if path.endswith("NOTES.txt")))


def validate(manifest: Manifest, kube_version: str) -> None:
    """Raise ``kubernetes_validate.ValidationError`` unless the manifest fits Kubernetes' schema, strictly."""
    kubernetes_validate.validate(manifest, kube_version, strict=True)


def find(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    """The one manifest of that kind and name."""
    found = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: found {len(found)} in {names(manifests)}"
    return found[0]


def names(manifests: list[Manifest]) -> list[str]:
    """``Kind/name`` of each manifest, for assertions and messages."""
    return sorted(f"{m['kind']}/{m['metadata']['name']}" for m in manifests)


def pod_specs(manifests: list[Manifest]) -> dict[str, Manifest]:
    """The pod template's spec of every workload, by ``Kind/name``."""
    return {
        f"{m['kind']}/{m['metadata']['name']}": m["spec"]["template"]["spec"]
        for m in manifests
        if m["kind"] in ("Deployment", "StatefulSet", "Job", "DaemonSet")
    }


def env(container: Manifest) -> dict[str, Any]:
    """A container's env by name: the plain value, or the ``valueFrom`` mapping."""
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env", [])}


# -- the BuildJob CRD -------------------------------------------------------------------------------------------


def crd() -> Manifest:
    """The BuildJob CustomResourceDefinition, as the chart ships it."""
    loaded: Manifest = yaml.safe_load(CRD_FILE.read_text())
    return loaded


def buildjob_validator() -> jsonschema.protocols.Validator:
    """A validator for a BuildJob against the CRD's ``openAPIV3Schema``, as the API server with
    ``--validate=strict`` applies it: declared fields only, int-or-string fields as integers or strings.
    """
    (version,) = crd()["spec"]["versions"]
    schema = _as_json_schema(version["schema"]["openAPIV3Schema"])
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)


def _as_json_schema(node: Any) -> Any:
    """OpenAPI v3 (the Kubernetes structural subset) as JSON Schema: the two extensions this CRD uses made explicit."""
    if isinstance(node, list):
        return [_as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    schema = {key: _as_json_schema(value) for key, value in node.items() if not key.startswith("x-kubernetes-")}
    if node.get("x-kubernetes-int-or-string"):
        schema["type"] = ["integer", "string"]  # a pattern applies to the string form only, in both
    if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        schema.setdefault("additionalProperties", False)  # strict field validation: unknown fields are refused
    return schema
