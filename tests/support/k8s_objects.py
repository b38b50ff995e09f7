"""Kubernetes JSON, as the test API server (``tests.support.k8s_api``) reads and answers it: Status bodies, merge
patches, label and field selectors, watch lines, query flags, and whether a Pod's container has started."""

from __future__ import annotations

import copy
import json
from typing import Any


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``Status`` object as the apiserver sends with every error."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def label_matches(labels: dict[str, str], selector: str) -> bool:
    """Equality-based label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, joined by commas."""
    for term in filter(None, (part.strip() for part in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def field_matches(obj: dict[str, Any], selector: str) -> bool:
    """``metadata.name=…`` and ``metadata.namespace=…`` (the field selectors every resource supports)."""
    metadata = obj.get("metadata") or {}
    for term in filter(None, (part.strip() for part in selector.split(","))):
        path, _, value = term.partition("=")
        if metadata.get(path.removeprefix("metadata.")) != value.lstrip("="):
            return False
    return True


def query_flag(value: str | None) -> bool:
    """A boolean query parameter as Go's strconv.ParseBool reads it (the Python client sends ``True``)."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def watch_line(event: dict[str, Any]) -> bytes:
    """One line of a watch stream."""
    return json.dumps(event).encode() + b"\n"


def has_started(pod: dict[str, Any], container: str) -> bool:
    """Whether the Pod's ``container`` is running or has run (so it has a log)."""
    status = pod.get("status") or {}
    for entry in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        if entry.get("name") == container:
            return bool({"running", "terminated"} & set(entry.get("state") or {}))
    return False
