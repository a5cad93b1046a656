"""The Helm chart: it lints, renders with its defaults the very objects of the kustomize base, renders
values a user sets (profiles, replicas, image, metrics, a certificate) into objects the real apiserver accepts
(`--dry-run=server`), and refuses a bad value in one message that names it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pysched.testing import LocalControlPlane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "pysched"
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
# What the chart adds to the base's Deployment, helm's way: roll the pods when the profiles change,
# and an explicit pull policy (the value the API server would default to for a pinned tag).
CHART_ONLY = (
    ("spec", "template", "metadata", "annotations"),
    ("spec", "template", "spec", "containers", 0, "imagePullPolicy"),
)


def _run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120, check=False)


def _objects(text: str) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    """Rendered objects by (kind, namespace, name); the profiles file parsed, so YAML spelling differs freely."""
    found = {}
    for obj in yaml.safe_load_all(text):
        if not obj:
            continue
        if obj["kind"] == "ConfigMap" and "profiles.yaml" in obj.get("data", {}):
            obj["data"]["profiles.yaml"] = yaml.safe_load(obj["data"]["profiles.yaml"])
        meta = obj["metadata"]
        if obj["kind"] in CLUSTER_SCOPED:
            meta.pop("namespace", None)  # kustomize stamps its namespace on kinds it does not know
        found[(obj["kind"], meta.get("namespace"), meta["name"])] = obj
    return found


def _drop(obj: dict[str, Any], path: tuple[str | int, ...]) -> None:
    node: Any = obj
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]


def _render(helm: Path, release: str, namespace: str, *sets: str) -> str:
    args: list[str | Path] = [helm, "template", release, CHART, "--namespace", namespace, "--kube-version", "1.36.0"]
    for value in sets:
        args += ["--set", value]
    rendered = _run(*args)
    assert rendered.returncode == 0, rendered.stderr
    return rendered.stdout


def test_the_chart_lints_and_its_defaults_are_the_kustomize_base(helm: Path, control_plane: LocalControlPlane) -> None:
    linted = _run(helm, "lint", CHART, "--strict", "--kube-version", "1.36.0")
    assert linted.returncode == 0, linted.stdout + linted.stderr
    chart = _objects(_render(helm, "pysched", "pysched-system", "namespace.create=true"))
    base_text = _run(control_plane.binary("kubectl"), "kustomize", ROOT / "manifests")
    assert base_text.returncode == 0, base_text.stderr
    base = _objects(base_text.stdout)
    assert sorted(chart) == sorted(base)
    deployment = chart[("Deployment", "pysched-system", "pysched")]
    for path in CHART_ONLY:
        _drop(deployment, path)
    for key, obj in base.items():
        assert chart[key] == obj, key


def test_values_a_user_sets_render_objects_the_apiserver_accepts(
    helm: Path, control_plane: LocalControlPlane, namespace: str
) -> None:
    profiles = "profiles[0].schedulerName=gpu-deadline,profiles[0].plugins.queueSort[0].name=DeadlineLaxity"
    text = _render(
        helm, namespace, namespace,  # a release named after the test's namespace: its cluster-wide names are its own
        "replicas=3", "image.repository=registry.example/pysched", "image.tag=9.9.9", "leaseName=ours",
        profiles, "extraArgs[0]=--log-level=debug", "metrics.service=false", "tls.secretName=sched-tls",
    )  # fmt: skip
    objects = _objects(text)
    deployment = objects[("Deployment", namespace, namespace)]
    assert deployment["spec"]["replicas"] == 3
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/pysched:9.9.9"
    assert "--lease-name=ours" in container["args"] and container["args"][-1] == "--log-level=debug"
    # The Secret's files, mounted whole (a subPath mount would never see a renewal).
    assert {"--tls-cert-file=/etc/pysched-tls/tls.crt", "--tls-private-key-file=/etc/pysched-tls/tls.key"} <= set(
        container["args"]
    )
    (mount,) = (m for m in container["volumeMounts"] if m["name"] == "tls")
    assert mount == {"name": "tls", "mountPath": "/etc/pysched-tls", "readOnly": True}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"] == {"secretName": "sched-tls"}
    config = objects[("ConfigMap", namespace, f"{namespace}-config")]["data"]["profiles.yaml"]
    assert [p["schedulerName"] for p in config["profiles"]] == ["gpu-deadline"]
    policy = objects[("ValidatingAdmissionPolicy", None, f"{namespace}-resize")]["spec"]
    assert policy["variables"][0]["expression"] == "['gpu-deadline']"
    assert f"system:serviceaccount:{namespace}:{namespace}" in policy["matchConditions"][0]["expression"]
    assert not any(kind == "Service" for kind, _, _ in objects)
    role = objects[("Role", namespace, f"{namespace}-leader-election")]
    assert role["rules"][1]["resourceNames"] == ["ours"]

    kubectl = control_plane.binary("kubectl")
    applied = subprocess.run(
        [str(kubectl), f"--kubeconfig={control_plane.kubeconfig_path}", "apply", "--dry-run=server", "-f", "-"],
        input=text, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.count("(server dry run)") == len(objects), applied.stdout


def test_the_service_monitor_verifies_a_certificate_of_the_users_own(helm: Path) -> None:
    def tls_config(*sets: str) -> dict[str, Any]:
        objects = _objects(_render(helm, "sched", "ops", "metrics.serviceMonitor=true", *sets))
        (endpoint,) = objects[("ServiceMonitor", "ops", "sched")]["spec"]["endpoints"]
        config: dict[str, Any] = endpoint["tlsConfig"]
        return config

    assert tls_config() == {"insecureSkipVerify": True}  # the self-signed certificate made at start
    assert tls_config("tls.secretName=sched-tls") == {
        "ca": {"secret": {"name": "sched-tls", "key": "ca.crt"}},
        "serverName": "sched-metrics.ops.svc",
    }
    assert tls_config("tls.secretName=sched-tls", "tls.caKey=") == {"insecureSkipVerify": True}


def test_a_bad_value_is_refused_with_its_name(helm: Path) -> None:
    bad = (
        ("replicas=0", "replicas"),
        ("profiles[0].schedulerName=Bad Name", "schedulerName"),
        ("metrics.serviceMonitorInterval=soon", "serviceMonitorInterval"),
        ("tls.secretName=Not_A_Name", "secretName"),
        ("replica=2", "replica"),  # a misspelt key is not silently ignored
        ("profiles[0].pluginconfig=x", "pluginconfig"),  # in a profile too
        ("profiles[0].schedulerName=a.-b", "schedulerName"),  # DNS-1123 subdomains, label by label
        ("leaseName=a..b", "leaseName"),
    )
    for value, named in bad:
        rendered = _run(helm, "template", "x", CHART, "--set", value)
        assert rendered.returncode != 0, value
        assert named in rendered.stderr and "Traceback" not in rendered.stderr, rendered.stderr
