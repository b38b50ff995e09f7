"""The pure builders: quantities with Docker's meaning, Pods validated against the official schemas with
kubernetes-validate, BuildJobs against the chart's CRD schema; Hypothesis over generated job specs."""

from __future__ import annotations

import re
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hades.adapters.k8s.buildjob import BuildJobError, buildjob_manifest
from hades.adapters.k8s.pods import PodSettings, PodSpecError, container_names, escape_expansion, pod_manifest
from hades.adapters.k8s.quantities import MemoryFormatError, bytes_quantity, cpu_quantity, memory_quantity
from hades.core.memory import parse_memory
from hades.core.spec import JobSpec, Priority, Step, validate_job_spec
from tests.deploy.manifests import buildjob_validator

#: The oldest and the newest schema version kubernetes-validate ships that we check against.
KUBERNETES_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())
SETTINGS = PodSettings(namespace="hades-executor", executor_id="exec-1", image_pull_policy="IfNotPresent")
BUILDJOB = buildjob_validator()  # the chart's CRD schema, read once
JOB_ID = "0b6c0f5e-8a63-4c2f-9d55-0f6f3a7c2e11"
#: The Kubernetes quantity grammar (apimachinery resource.Quantity), for the binary and plain forms emitted.
QUANTITY = re.compile(r"[0-9]+(Ki|Mi|Gi|Ti|Pi|Ei)?")


def validate(manifest: dict[str, Any]) -> None:
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(manifest, version, strict=True)


# -- quantities ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "quantity"),
    [
        ("2G", "2Gi"),
        ("2g", "2Gi"),
        ("1G", "1Gi"),
        ("512M", "512Mi"),
        ("512m", "512Mi"),
        ("2048M", "2Gi"),
        ("+1g", "1Gi"),
    ],
)
def test_memory_means_the_same_bytes_as_on_docker(limit: str, quantity: str) -> None:
    assert memory_quantity(limit) == quantity
    unit = {"Gi": 1024**3, "Mi": 1024**2}[quantity[-2:]]
    assert int(quantity[:-2]) * unit == parse_memory(limit)  # Docker's bytes


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        ("2", "invalid memory limit format: 2"),
        ("2T", 'unsupported memory unit "T": must be G (gigabytes) or M (megabytes)'),
        ("123", 'unsupported memory unit "3": must be G (gigabytes) or M (megabytes)'),
        ("-1G", "memory limit cannot be negative: -1"),
        ("xG", 'invalid memory value "x"'),
        ("2Gi", 'invalid memory value "2G"'),
    ],
)
def test_bad_memory_limits_fail_with_the_docker_message(limit: str, message: str) -> None:
    with pytest.raises(MemoryFormatError, match=re.escape(message)):
        memory_quantity(limit)


def test_zero_and_empty_limits_mean_no_limit() -> None:
    assert memory_quantity("") is None and memory_quantity("0M") is None
    assert cpu_quantity(0) is None and cpu_quantity(3) == "3"
    assert bytes_quantity(1536) == "1536" and bytes_quantity(3 * 1024**2) == "3Mi"


# -- Pods ------------------------------------------------------------------------------------------------------


def job_spec(**fields: Any) -> JobSpec:
    steps = fields.pop("steps", (Step(id=1, image="alpine:3.22", script="echo hi"),))
    return JobSpec(name="demo", steps=steps, **fields)


def test_a_pod_has_the_steps_in_order_the_workspace_limits_and_no_privilege_escalation() -> None:
    spec = job_spec(
        metadata={"COURSE": "ds", "hades.tum.de/priority": "3"},
        timeout_seconds=600,
        steps=(
            Step(id=1, name="clone", image="alpine/git", script="git clone x .", cpu_limit=2, memory_limit="2G"),
            Step(id=2, name="build", image="gradle:8", script='echo "$(date) $$ ${COURSE}"', metadata={"COURSE": "x"}),
            Step(id=3, name="report", image="reporter:1"),
        ),
    )

    pod = pod_manifest(JOB_ID, 2, spec, SETTINGS, Priority.MEDIUM)

    validate(pod)
    assert pod["metadata"]["name"] == f"hades-{JOB_ID}-2"
    assert pod["metadata"]["labels"] == {
        "hades/job-id": JOB_ID,
        "hades/attempt": "2",
        "hades.tum.de/priority": "2",
        "app.kubernetes.io/managed-by": "hades-executor",
    }
    assert pod["metadata"]["annotations"] == {"hades/executor-id": "exec-1"}
    body = pod["spec"]
    assert body["restartPolicy"] == "Never" and body["activeDeadlineSeconds"] == 600
    assert [c["name"] for c in body["initContainers"]] == ["step-1", "step-2"]
    assert [c["name"] for c in body["containers"]] == ["step-3"]
    assert body["volumes"] == [{"name": "shared", "emptyDir": {}}]
    clone, build, report = [*body["initContainers"], *body["containers"]]
    for container in (clone, build, report):
        assert container["workingDir"] == "/shared"
        assert container["volumeMounts"] == [{"name": "shared", "mountPath": "/shared"}]
        assert container["securityContext"] == {"allowPrivilegeEscalation": False}
        assert container["imagePullPolicy"] == "IfNotPresent"
    assert clone["resources"] == {"limits": {"cpu": "2", "memory": "2Gi"}}
    assert "resources" not in build
    assert env(clone) == {"COURSE": "ds", "UUID": JOB_ID, "JOB_NAME": "demo"}  # no priority keys, as on Docker
    assert env(build)["COURSE"] == "x"  # the step's metadata wins
    # Kubernetes would expand $(date) and turn $$ into $: every $ is doubled, so the shell gets the script as written
    assert build["command"] == ["/bin/sh", "-c", 'echo "$$(date) $$$$ $${COURSE}"']
    assert "command" not in report and "args" not in report  # no script: the image's own entrypoint


def env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"].replace("$$", "$") for item in container["env"]}


def test_a_tolerated_step_runs_its_script_in_a_wrapper_that_records_the_exit_code() -> None:
    spec = job_spec(steps=(Step(id=1, image="a", script="exit 4", continue_on_error=True), Step(id=2, image="b")))

    (wrapped,) = pod_manifest(JOB_ID, 1, spec, SETTINGS)["spec"]["initContainers"]

    assert env(wrapped)["HADES_STEP_SCRIPT"] == "exit 4"
    assert wrapped["command"] == [
        "/bin/sh",
        "-c",
        '/bin/sh -c "$$HADES_STEP_SCRIPT"; printf \'hades-exit-code=%d\' "$$?" > /dev/termination-log; exit 0',
    ]
    assert wrapped["terminationMessagePath"] == "/dev/termination-log"


def test_one_step_is_the_app_container_and_no_timeout_leaves_the_deadline_unset() -> None:
    pod = pod_manifest(JOB_ID, 1, job_spec(), PodSettings(service_account="builder"))

    validate(pod)
    assert "initContainers" not in pod["spec"] and "activeDeadlineSeconds" not in pod["spec"]
    assert pod["spec"]["serviceAccountName"] == "builder"
    assert pod["spec"]["automountServiceAccountToken"] is False


def test_container_names_stay_unique_when_step_ids_repeat() -> None:
    steps = (Step(id=1), Step(id=2), Step(id=1), Step(id=-3))
    assert container_names(steps) == ["step-1", "step-2", "step-1-3", "step--3"]


def test_a_job_without_steps_has_no_pod() -> None:
    with pytest.raises(PodSpecError):
        pod_manifest(JOB_ID, 1, JobSpec(name="empty"), SETTINGS)


def test_escaping_gives_back_the_text_under_kubernetes_expansion() -> None:
    text = "$(A) $$ $B ${C} $"
    assert kubernetes_expand(escape_expansion(text), {"A": "x", "B": "y"}) == text


def kubernetes_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes's ``$(VAR)`` expansion (third_party/forked/golang/expansion), for the test above."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            if text[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            if text[i + 1] == "(" and ")" in text[i:]:
                end = text.index(")", i)
                name = text[i + 2 : end]
                out.append(env.get(name, text[i : end + 1]))
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


# -- Hypothesis: every valid job gives a valid Pod and a valid BuildJob ------------------------------------------

_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
_metadata = st.dictionaries(_names, st.text(max_size=20), max_size=4)
_steps = st.builds(
    Step,
    id=st.integers(1, 2**31 - 1),
    name=st.text(max_size=10),
    image=st.sampled_from(
        ["alpine:3.22", "ghcr.io/ls1intum/hades/clone:latest", "busybox", "reg:5000/a/b@sha256:" + "a" * 64]
    ),
    script=st.text(max_size=40),
    continue_on_error=st.booleans(),
    metadata=_metadata,
    cpu_limit=st.integers(0, 64),
    memory_limit=st.sampled_from(["", "0M", "512M", "512m", "2G", "2g", "+16G", "3000M"]),
)
_specs = st.builds(
    JobSpec,
    name=st.text(min_size=1, max_size=20),
    metadata=_metadata,
    steps=st.lists(_steps, min_size=1, max_size=5, unique_by=lambda step: step.id).map(tuple),  # a job's ids differ
    timeout_seconds=st.integers(0, 10**9),
    priority=st.integers(-5, 10),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_specs, attempt=st.integers(1, 20))
def test_every_valid_job_gives_a_pod_the_schemas_accept(spec: JobSpec, attempt: int) -> None:
    assert validate_job_spec(spec) is None
    pod = pod_manifest(JOB_ID, attempt, spec, SETTINGS)

    validate(pod)
    containers = [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
    assert [c["name"] for c in containers] == container_names(spec.steps)
    for container, step in zip(containers, spec.steps, strict=True):
        for value in container.get("resources", {}).get("limits", {}).values():
            assert QUANTITY.fullmatch(value)
        assert env(container)["UUID"] == JOB_ID
        if step.memory_limit and parse_memory(step.memory_limit):
            limit = container["resources"]["limits"]["memory"]
            assert int(limit[:-2]) * {"Gi": 1024**3, "Mi": 1024**2}[limit[-2:]] == parse_memory(step.memory_limit)


@settings(max_examples=40, deadline=None)
@given(spec=_specs, retries=st.none() | st.integers(0, 10))
def test_every_valid_job_gives_a_buildjob_the_crd_accepts(spec: JobSpec, retries: int | None) -> None:
    manifest = buildjob_manifest(JOB_ID, spec, "hades", max_retries=retries)

    errors = [error.message for error in BUILDJOB.iter_errors(manifest)]
    assert errors == []
    assert [step["id"] for step in manifest["spec"]["steps"]] == [step.id for step in spec.steps]


# -- BuildJobs -------------------------------------------------------------------------------------------------


def test_a_buildjob_has_the_go_shape_with_the_holes_closed() -> None:
    spec = job_spec(
        metadata={"COURSE": "ds"},
        timeout_seconds=120,
        priority=2,
        steps=(
            Step(id=1, name="build", image="gradle:8", script="gradle test", continue_on_error=True, cpu_limit=2),
            Step(id=2, name="report", image="r:1", memory_limit="2g", metadata={"K": "v"}),
        ),
    )

    manifest = buildjob_manifest(JOB_ID, spec, "hades", max_retries=2)

    assert manifest == {
        "apiVersion": "build.hades.tum.de/v1",
        "kind": "BuildJob",
        "metadata": {
            "name": JOB_ID,
            "namespace": "hades",
            "labels": {"hades/job-id": JOB_ID, "hades/source": "scheduler", "hades.tum.de/priority": "2"},
        },
        "spec": {
            "name": "demo",
            "metadata": {"COURSE": "ds", "hades.tum.de/priority": "2", "hades.tum.de/priorityName": "medium"},
            "timeoutSeconds": 120,
            "maxRetries": 2,
            "steps": [
                {
                    "id": 1,
                    "name": "build",
                    "image": "gradle:8",
                    "continueOnError": True,
                    "script": "gradle test",
                    "cpuLimit": "2",
                },
                {
                    "id": 2,
                    "name": "report",
                    "image": "r:1",
                    "continueOnError": False,
                    "metadata": {"K": "v"},
                    "memoryLimit": "2g",
                },
            ],
        },
    }
    assert list(BUILDJOB.iter_errors(manifest)) == []


@pytest.mark.parametrize(
    ("steps", "message"),
    [((), "at least one step"), ((Step(id=0, image="a"),), "between 1 and"), ((Step(id=1),), "needs an image")],
)
def test_a_job_the_crd_would_refuse_is_refused_with_a_reason(steps: tuple[Step, ...], message: str) -> None:
    with pytest.raises(BuildJobError, match=message):
        buildjob_manifest(JOB_ID, JobSpec(name="x", steps=steps), "hades")
