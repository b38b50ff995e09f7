"""Constraints and resources on Kubernetes: node affinity and requests the schemas accept, and refusals that say why."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hades.adapters.k8s.placement import PlacementError, accepts, placement_problem
from hades.adapters.k8s.pods import pod_manifest
from hades.core.constraints import Constraint, Resources, placement_of
from hades.core.spec import JobSpec, Step
from tests.adapters.k8s.test_k8s_manifests import JOB_ID, SETTINGS, validate


def placed(constraints: list[dict[str, str]], resources: dict[str, Any] | None = None, **step: Any) -> JobSpec:
    steps = (Step(id=1, image="alpine:3.22", script="make"), Step(id=2, image="alpine:3.22", script="test", **step))
    return JobSpec(
        name="placed",
        steps=steps,
        constraints=tuple(Constraint(**c) for c in constraints),
        resources=Resources(**resources) if resources is not None else None,
    )


def test_constraints_become_required_node_affinity_on_well_known_labels() -> None:
    spec = placed([{"attribute": "${attr.kernel.name}", "value": "linux"}, {"attribute": "arch", "value": "arm64"}])
    pod = pod_manifest(JOB_ID, 1, spec, SETTINGS)

    validate(pod)
    required = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                ]
            }
        ]
    }


def test_resources_are_requested_by_every_container_and_limits_stay() -> None:
    pod = pod_manifest(JOB_ID, 1, placed([], {"cpu": 0.25, "memory": "512m"}, cpu_limit=1, memory_limit="1g"), SETTINGS)

    validate(pod)
    init, app = pod["spec"]["initContainers"][0], pod["spec"]["containers"][0]
    assert init["resources"] == {"requests": {"cpu": "250m", "memory": "512Mi"}}
    assert app["resources"] == {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "250m", "memory": "512Mi"},
    }
    assert "affinity" not in pod["spec"]


def test_a_job_without_requirements_gets_neither() -> None:
    pod = pod_manifest(JOB_ID, 1, placed([]), SETTINGS)
    assert "affinity" not in pod["spec"]
    assert all("resources" not in c for c in [*pod["spec"]["initContainers"], *pod["spec"]["containers"]])


@pytest.mark.parametrize(
    ("constraints", "resources", "step", "message"),
    [
        ([{"attribute": "os", "operator": "regexp", "value": "lin.*"}], None, {}, "node selectors match a label's"),
        ([{"attribute": "tags", "operator": "set_contains", "value": "a,b"}], None, {}, "(use = or !=)"),
        ([{"attribute": "pool", "value": "a b"}], None, {}, "not a label value"),
        ([{"attribute": "-pool", "value": "gpu"}], None, {}, "not a node label name"),
        ([], {"cpu": 2}, {"cpu_limit": 1}, "resources.cpu 2000m is more than step 2's cpu limit 1"),
        ([], {"memory": "2g"}, {"memory_limit": "1g"}, "resources.memory 2Gi is more than step 2's memory limit 1Gi"),
    ],
)
def test_what_kubernetes_cannot_express_is_refused_with_why(
    constraints: list[dict[str, str]], resources: dict[str, Any] | None, step: dict[str, Any], message: str
) -> None:
    with pytest.raises(PlacementError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pod_manifest(JOB_ID, 1, placed(constraints, resources, **step), SETTINGS)


def test_the_executor_takes_exactly_what_it_can_express() -> None:
    equal = placement_of((Constraint(attribute="os", value="windows"),), None)
    pattern = placement_of((Constraint(attribute="os", operator="regexp", value="win"),), None)
    assert accepts(None) and accepts(equal) and accepts(placement_of((), Resources(cpu=64)))
    assert not accepts(pattern)
    assert placement_problem(pattern) is not None


_values = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?", fullmatch=True)
_constraints = st.lists(
    st.builds(
        Constraint,
        attribute=st.sampled_from(["os", "arch", "pool", "node.size", "gpu_kind"]),
        operator=st.sampled_from(["=", "!=", "=="]),
        value=_values,
    ),
    max_size=5,
)


@settings(max_examples=40, deadline=None)
@given(
    constraints=_constraints,
    cpu=st.sampled_from([0, 0.001, 0.5, 2, 16]),
    memory=st.sampled_from(["", "1m", "512m", "3g"]),
)
def test_every_expressible_placement_gives_a_pod_the_schemas_accept(
    constraints: list[Constraint], cpu: float, memory: str
) -> None:
    spec = JobSpec(
        name="p",
        steps=(Step(id=1, image="busybox", script="true"),),
        constraints=tuple(constraints),
        resources=Resources(cpu=cpu, memory=memory),
    )
    assert accepts(spec.placement)
    validate(pod_manifest(JOB_ID, 1, spec, SETTINGS))
