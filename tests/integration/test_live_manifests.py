"""The manifests apply cleanly, and their ServiceAccount can do exactly what pysched needs."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pysched.testing import KubeAPI, LocalControlPlane, NodeSpec, create_fake_nodes, wait_for
from pysched.testing.controlplane import kubeconfig_dict
from pysched.testing.scheduler import TEST_LABEL, events, pod_for, start_scheduler, write_profile

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
NAMESPACE = "pysched-system"


def kubectl(plane: LocalControlPlane, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [str(plane.binary("kubectl")), f"--kubeconfig={kubeconfig or plane.kubeconfig_path}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def installed(control_plane: LocalControlPlane, kube: KubeAPI) -> Iterator[Path]:
    """`kubectl apply -k manifests/` for real; yields a kubeconfig with the ServiceAccount's token."""
    applied = kubectl(control_plane, "apply", "-k", str(MANIFESTS))
    assert applied.returncode == 0, applied.stderr
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    token = kube.post(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/pysched/token", request)["status"]["token"]
    path = control_plane.workdir / "pysched-sa.kubeconfig"
    ca = control_plane.ca_file if control_plane.ca_file.exists() else None
    path.write_text(json.dumps(kubeconfig_dict(control_plane.server, token, ca, name="pysched-sa")))
    yield path
    # Cluster-scoped objects go; the namespace would stay Terminating (no namespace controller runs).
    kubectl(control_plane, "delete", "clusterrole/pysched", "clusterrolebinding/pysched", "--ignore-not-found")


def test_manifests_apply_and_server_dry_run_is_clean(control_plane: LocalControlPlane, installed: Path) -> None:
    again = kubectl(control_plane, "apply", "-k", str(MANIFESTS), "--dry-run=server")
    assert again.returncode == 0, again.stderr
    assert "Deployment" in kubectl(control_plane, "get", "deployment/pysched", "-n", NAMESPACE, "-o", "json").stdout


ALLOWED = [
    ("list", "pods", "--all-namespaces"),
    ("watch", "pods", "--all-namespaces"),
    ("list", "nodes"),
    ("watch", "nodes"),
    ("list", "namespaces"),
    ("list", "jobs.batch", "--all-namespaces"),
    ("watch", "jobs.batch", "--all-namespaces"),
    ("create", "pods", "--subresource=binding", "-n", "default"),
    ("patch", "pods", "--subresource=status", "-n", "default"),
    ("patch", "pods", "--subresource=resize", "-n", "default"),
    ("create", "events.events.k8s.io", "-n", "default"),
    ("patch", "events.events.k8s.io", "-n", "default"),
    ("get", "leases.coordination.k8s.io/pysched", "-n", NAMESPACE),
    ("update", "leases.coordination.k8s.io/pysched", "-n", NAMESPACE),
    ("create", "leases.coordination.k8s.io", "-n", NAMESPACE),
]
DENIED = [
    ("get", "secrets", "-n", "default"),
    ("list", "secrets", "--all-namespaces"),
    ("delete", "pods", "-n", "default"),
    ("create", "pods", "-n", "default"),
    ("update", "pods", "-n", "default"),
    ("update", "nodes"),
    ("patch", "nodes"),
    ("create", "jobs.batch", "-n", "default"),
    ("update", "jobs.batch", "-n", "default"),
    ("delete", "jobs.batch", "-n", "default"),
    ("list", "cronjobs.batch", "--all-namespaces"),
    ("get", "leases.coordination.k8s.io/kube-scheduler", "-n", NAMESPACE),
    ("update", "leases.coordination.k8s.io/other", "-n", NAMESPACE),
    ("update", "leases.coordination.k8s.io/pysched", "-n", "kube-system"),
    ("create", "leases.coordination.k8s.io", "-n", "kube-system"),
]


@pytest.mark.parametrize("check", ALLOWED, ids=lambda c: " ".join(c))
def test_service_account_may(control_plane: LocalControlPlane, installed: Path, check: tuple[str, ...]) -> None:
    result = kubectl(control_plane, "auth", "can-i", *check, kubeconfig=installed)
    assert result.returncode == 0, f"{check}: {result.stdout} {result.stderr}"


@pytest.mark.parametrize("check", DENIED, ids=lambda c: " ".join(c))
def test_service_account_may_not(control_plane: LocalControlPlane, installed: Path, check: tuple[str, ...]) -> None:
    result = kubectl(control_plane, "auth", "can-i", *check, kubeconfig=installed)
    assert result.returncode == 1, f"{check}: {result.stdout} {result.stderr}"


def test_scheduler_runs_with_the_service_account(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, installed: Path, tmp_path: Path
) -> None:
    name = f"pysched-{namespace}"
    names = create_fake_nodes(kube, 2, NodeSpec(cpu="2", labels={TEST_LABEL: namespace}), prefix=f"{namespace}-n")
    proc = start_scheduler(
        control_plane,
        name,
        config=write_profile(tmp_path / "profiles.yaml", name),
        kubeconfig=installed,
        leader_elect=True,
        lease_namespace=NAMESPACE,
        lease_name="pysched",
    )
    try:
        wait_for(proc.is_leader, bool, what="leadership with the ServiceAccount")
        kube.create_pod(namespace, pod_for("fits", name, namespace, "500m"))
        kube.create_pod(namespace, pod_for("too-big", name, namespace, "8"))
        wait_for(lambda: kube.get_pod(namespace, "fits"), lambda p: bool(p["spec"].get("nodeName")), what="bound")
        wait_for(lambda: events(kube, namespace, "Scheduled"), lambda e: len(e) == 1, what="Scheduled event")
        wait_for(lambda: events(kube, namespace, "FailedScheduling"), lambda e: len(e) == 1, what="FailedScheduling")
        wait_for(
            lambda: kube.get_pod(namespace, "too-big"),
            lambda p: any(c["type"] == "PodScheduled" for c in p["status"].get("conditions") or ()),
            what="PodScheduled condition",
        )
        forbidden = {k: v for k, v in proc.metrics().items() if 'code="403"' in k}
        assert not forbidden, forbidden
    finally:
        assert proc.stop() == 0, proc.log()
        for node in names:
            kube.delete(f"/api/v1/nodes/{node}")
