"""A job's ``constraints`` and ``resources`` as Kubernetes sees them: node affinity and resource requests.

On Kubernetes, Hades does not pick the machine: the cluster's scheduler does. So an executor of kind ``k8s``
takes every job whose placement Kubernetes can express (``accepts``), and the Pod carries it:

- each constraint becomes a ``requiredDuringSchedulingIgnoredDuringExecution`` node-affinity expression on the node
  label of the same name (``os`` and ``arch`` on the well-known ``kubernetes.io/os`` and ``kubernetes.io/arch``):
  ``=`` is ``In [value]``, ``!=`` is ``NotIn [value]`` (which, as in Nomad, a node without the label satisfies);
- ``regexp`` and ``set_contains`` have no node-selector form (a node label holds one value, matched whole), so a
  job using them is refused with a reason rather than run somewhere it did not ask for;
- ``resources`` become every container's ``requests`` (a Pod's request is the largest init container's or the
  sum of its app containers'; with one app container both are the job's), so the Pod only lands on a node with
  that much unreserved — Nomad's reservation, done by the cluster. A step's own limit below the request is
  refused (Kubernetes would reject the Pod).

A Pod no node can take stays ``Pending`` (``Unschedulable``) and its job waits, as a Nomad job blocks; the job's
``timeout_seconds`` still ends it.
"""

from __future__ import annotations

import re
from typing import Any

from hades.adapters.k8s.quantities import bytes_quantity
from hades.core.constraints import Placement

#: Hades label names whose Kubernetes node labels are the well-known ones.
WELL_KNOWN = {"os": "kubernetes.io/os", "arch": "kubernetes.io/arch"}
_OPERATORS = {"=": "In", "!=": "NotIn"}
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


class PlacementError(ValueError):
    """A placement Kubernetes cannot express; the message says what and why."""


def placement_problem(placement: Placement | None) -> str | None:
    """Why Kubernetes cannot place a job with these requirements; None when it can."""
    if placement is None:
        return None
    for constraint in placement.constraints:
        if constraint.attribute not in WELL_KNOWN and not _LABEL_NAME.fullmatch(constraint.attribute):
            return (
                f"constraint on {constraint.attribute!r} cannot run on Kubernetes: not a node label name (at most 63 "
                "letters, digits, '-', '_', '.', alphanumeric at the ends)"
            )
        if constraint.operator not in _OPERATORS:
            return (
                f"constraint {constraint.attribute} {constraint.operator} {constraint.value!r} cannot run on "
                "Kubernetes: node selectors match a label's whole value (use = or !=)"
            )
        if not _LABEL_VALUE.fullmatch(constraint.value):
            return (
                f"constraint {constraint.attribute} {constraint.operator} {constraint.value!r} cannot run on "
                "Kubernetes: not a label value (at most 63 letters, digits, '-', '_', '.', alphanumeric at the ends)"
            )
    return None


def accepts(placement: Placement | None) -> bool:
    """Whether a Kubernetes executor takes jobs with this placement (the cluster decides where they run)."""
    return placement_problem(placement) is None


def node_affinity(placement: Placement | None) -> dict[str, Any] | None:
    """The Pod's ``affinity`` for the constraints; None without constraints. Raises PlacementError."""
    problem = placement_problem(placement)
    if problem is not None:
        raise PlacementError(problem)
    if placement is None or not placement.constraints:
        return None
    expressions = [
        {
            "key": WELL_KNOWN.get(constraint.attribute, constraint.attribute),
            "operator": _OPERATORS[constraint.operator],
            "values": [constraint.value],
        }
        for constraint in placement.constraints
    ]
    terms = {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}


def requests(placement: Placement | None) -> dict[str, str]:
    """The resource requests every container carries: ``cpu`` in millicores, ``memory`` in binary units."""
    if placement is None:
        return {}
    asked: dict[str, str] = {}
    if placement.cpu:
        asked["cpu"] = f"{max(1, round(placement.cpu * 1000))}m"
    memory = bytes_quantity(placement.memory)
    if memory is not None:
        asked["memory"] = memory
    return asked


def with_requests(resources: dict[str, Any], asked: dict[str, str], step_position: int) -> dict[str, Any]:
    """A container's ``resources`` with the job's requests added; PlacementError when a limit is below one."""
    if not asked:
        return resources
    limits = resources.get("limits", {})
    for key, value in asked.items():
        if key in limits and _amount(key, limits[key]) < _amount(key, value):
            raise PlacementError(
                f"resources.{key} {value} is more than step {step_position}'s {key} limit {limits[key]}: "
                "Kubernetes refuses a request above the limit"
            )
    return {**resources, "requests": asked}


def _amount(key: str, quantity: str) -> float:
    """A quantity this module or ``quantities`` wrote, in cores or bytes."""
    if key == "cpu":
        return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    units = {"Gi": 1024**3, "Mi": 1024**2}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity[: -len(suffix)]) * factor
    return int(quantity)
