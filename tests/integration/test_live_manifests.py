"""The manifests apply cleanly, their ServiceAccount can do exactly what pysched needs (the resize
policy narrows pods/resize to pysched's own pods), and the scheduler run with its token serves
/metrics over HTTPS to permitted tokens only, logging no token."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pysched.testing import KubeAPI, KubeAPIError, LocalControlPlane, NodeSpec, create_fake_nodes, wait_for
from pysched.testing.controlplane import kubeconfig_dict
from pysched.testing.scheduler import (
    TEST_LABEL,
    SchedulerProcess,
    events,
    parse_metrics,
    pod_for,
    start_scheduler,
    write_profile,
)

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
NAMESPACE = "pysched-system"


def kubectl(plane: LocalControlPlane, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [str(plane.binary("kubectl")), f"--kubeconfig={kubeconfig or plane.kubeconfig_path}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


CLUSTER_SCOPED = (
    "clusterrole/pysched",
    "clusterrolebinding/pysched",
    "clusterrole/pysched-metrics-reader",
    "validatingadmissionpolicy/pysched-resize",
    "validatingadmissionpolicybinding/pysched-resize",
)


def service_account_token(kube: KubeAPI, namespace: str, name: str) -> str:
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    token: str = kube.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", request)["status"]["token"]
    return token


def as_user(plane: LocalControlPlane, token: str) -> KubeAPI:
    return KubeAPI(plane.server, token, ca_file=plane.ca_file if plane.ca_file.exists() else None)


@pytest.fixture(scope="module")
def sa_token(control_plane: LocalControlPlane, kube: KubeAPI) -> Iterator[str]:
    """`kubectl apply -k manifests/` for real; yields a token of pysched's ServiceAccount."""
    applied = kubectl(control_plane, "apply", "-k", str(MANIFESTS))
    assert applied.returncode == 0, applied.stderr
    yield service_account_token(kube, NAMESPACE, "pysched")
    # Cluster-scoped objects go; the namespace would stay Terminating (no namespace controller runs).
    kubectl(control_plane, "delete", *CLUSTER_SCOPED, "--ignore-not-found")


@pytest.fixture(scope="module")
def installed(control_plane: LocalControlPlane, sa_token: str) -> Path:
    """A kubeconfig with the ServiceAccount's token."""
    path = control_plane.workdir / "pysched-sa.kubeconfig"
    ca = control_plane.ca_file if control_plane.ca_file.exists() else None
    path.write_text(json.dumps(kubeconfig_dict(control_plane.server, sa_token, ca, name="pysched-sa")))
    return path


def test_manifests_apply_and_server_dry_run_is_clean(control_plane: LocalControlPlane, installed: Path) -> None:
    again = kubectl(control_plane, "apply", "-k", str(MANIFESTS), "--dry-run=server")
    assert again.returncode == 0, again.stderr
    assert "Deployment" in kubectl(control_plane, "get", "deployment/pysched", "-n", NAMESPACE, "-o", "json").stdout


def test_the_monitoring_overlay_scrapes_the_metrics_service_and_ships_the_dashboard(
    control_plane: LocalControlPlane, installed: Path
) -> None:
    service = json.loads(kubectl(control_plane, "get", "service/pysched-metrics", "-n", NAMESPACE, "-o", "json").stdout)
    rendered = kubectl(control_plane, "kustomize", str(MANIFESTS / "monitoring"))
    assert rendered.returncode == 0, rendered.stderr
    objects = {doc["kind"]: doc for doc in yaml.safe_load_all(rendered.stdout)}
    monitor, dashboard = objects["ServiceMonitor"], objects["ConfigMap"]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == NAMESPACE
    selected = monitor["spec"]["selector"]["matchLabels"]
    assert selected.items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in service["spec"]["ports"]]
    assert service["spec"]["ports"][0]["port"] == 10259 and monitor["spec"]["endpoints"][0]["scheme"] == "https"
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True  # the slack panel's namespace/pod: the job's
    assert json.loads(dashboard["data"]["pysched.json"])["uid"] == "pysched"
    assert dashboard["metadata"]["labels"] == {"grafana_dashboard": "1"}


ALLOWED = [
    ("list", "pods", "--all-namespaces"),
    ("watch", "pods", "--all-namespaces"),
    ("list", "nodes"),
    ("watch", "nodes"),
    ("list", "namespaces"),
    ("list", "jobs.batch", "--all-namespaces"),
    ("watch", "jobs.batch", "--all-namespaces"),
    # Coscheduling: gangs' minimums
    ("list", "podgroups.scheduling.k8s.io", "--all-namespaces"),
    ("watch", "podgroups.scheduling.k8s.io", "--all-namespaces"),
    ("list", "podgroups.scheduling.x-k8s.io", "--all-namespaces"),
    ("watch", "podgroups.scheduling.x-k8s.io", "--all-namespaces"),
    ("create", "pods", "--subresource=binding", "-n", "default"),
    ("patch", "pods", "--subresource=status", "-n", "default"),
    ("patch", "pods", "--subresource=resize", "-n", "default"),
    # preemption: its victims are deleted, PodDisruptionBudgets read
    ("delete", "pods", "-n", "default"),
    ("delete", "pods", "--all-namespaces"),
    ("list", "poddisruptionbudgets.policy", "--all-namespaces"),
    ("watch", "poddisruptionbudgets.policy", "--all-namespaces"),
    ("create", "events.events.k8s.io", "-n", "default"),
    ("patch", "events.events.k8s.io", "-n", "default"),
    ("get", "leases.coordination.k8s.io/pysched", "-n", NAMESPACE),
    ("update", "leases.coordination.k8s.io/pysched", "-n", NAMESPACE),
    ("create", "leases.coordination.k8s.io", "-n", NAMESPACE),
    # delegated authentication and authorization of /metrics
    ("create", "tokenreviews.authentication.k8s.io"),
    ("create", "subjectaccessreviews.authorization.k8s.io"),
]
DENIED = [
    ("get", "secrets", "-n", "default"),
    ("get", "secrets", "-n", NAMESPACE),
    ("get", "secrets", "-n", "kube-system"),
    ("list", "secrets", "--all-namespaces"),
    ("watch", "secrets", "--all-namespaces"),
    ("get", "configmaps", "-n", "default"),
    ("get", "configmaps", "-n", "kube-system"),
    ("list", "configmaps", "--all-namespaces"),
    ("update", "configmaps", "-n", NAMESPACE),
    ("deletecollection", "pods", "-n", "default"),
    ("create", "poddisruptionbudgets.policy", "-n", "default"),
    ("delete", "poddisruptionbudgets.policy", "-n", "default"),
    ("create", "pods", "-n", "default"),
    ("update", "pods", "-n", "default"),
    ("patch", "pods", "-n", "default"),
    ("create", "pods", "--subresource=eviction", "-n", "default"),
    ("create", "pods", "--subresource=exec", "-n", "default"),
    ("update", "nodes"),
    ("patch", "nodes"),
    ("delete", "nodes"),
    ("patch", "nodes", "--subresource=status"),
    ("create", "jobs.batch", "-n", "default"),
    ("update", "jobs.batch", "-n", "default"),
    ("delete", "jobs.batch", "-n", "default"),
    ("list", "cronjobs.batch", "--all-namespaces"),
    ("get", "leases.coordination.k8s.io/kube-scheduler", "-n", NAMESPACE),
    ("update", "leases.coordination.k8s.io/other", "-n", NAMESPACE),
    ("update", "leases.coordination.k8s.io/pysched", "-n", "kube-system"),
    ("create", "leases.coordination.k8s.io", "-n", "kube-system"),
    ("delete", "leases.coordination.k8s.io/pysched", "-n", NAMESPACE),
    ("list", "leases.coordination.k8s.io", "-n", NAMESPACE),
    ("get", "leases.coordination.k8s.io/kube-scheduler", "-n", "kube-system"),
    # no way to more rights
    ("escalate", "clusterroles.rbac.authorization.k8s.io"),
    ("bind", "clusterroles.rbac.authorization.k8s.io"),
    ("escalate", "roles.rbac.authorization.k8s.io", "-n", NAMESPACE),
    ("bind", "roles.rbac.authorization.k8s.io", "-n", NAMESPACE),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
    ("create", "rolebindings.rbac.authorization.k8s.io", "-n", NAMESPACE),
    ("impersonate", "users"),
    ("impersonate", "groups"),
    ("impersonate", "serviceaccounts", "-n", NAMESPACE),
    ("create", "serviceaccounts", "--subresource=token", "-n", NAMESPACE),
    ("get", "/metrics"),
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


def test_pysched_resizes_only_the_pods_it_schedules(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, sa_token: str
) -> None:
    """RBAC grants pods/resize of every pod; resize-policy.yaml refuses pods of other schedulers."""
    kube.create_pod(namespace, pod_for("ours", "pysched", namespace, "500m"))
    kube.create_pod(namespace, pod_for("theirs", "default-scheduler", namespace, "500m"))
    scheduler = as_user(control_plane, sa_token)
    body = {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "600m"}}}]}}

    def resize(name: str) -> tuple[int, str]:
        # Dry run: admission runs in full, nothing is stored.
        try:
            scheduler.patch(kube.pod_path(namespace, name, "resize"), body, dryRun="All")
        except KubeAPIError as err:
            return err.status, err.body
        return 200, ""

    _, message = wait_for(
        lambda: resize("theirs"), lambda answer: answer[0] == 403, timeout=30, what="the resize policy in force"
    )
    assert "ValidatingAdmissionPolicy 'pysched-resize'" in message
    assert f"pysched resizes only the pods it schedules, not {namespace}/theirs" in message
    assert resize("ours") == (200, "")
    # Not a dry run: pysched's own pod is resized for real; the other pod keeps its request.
    scheduler.patch(kube.pod_path(namespace, "ours", "resize"), body)
    assert kube.get_pod(namespace, "ours")["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "600m"
    assert kube.get_pod(namespace, "theirs")["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"
    # Other identities are not matched by the policy.
    kube.patch(kube.pod_path(namespace, "theirs", "resize"), body, dryRun="All")


SCRAPER = "metrics-scraper"
NO_METRICS = "no-metrics"
BOGUS_TOKEN = "pysched-test-bogus-token-0123456789abcdef"


@pytest.fixture(scope="module")
def secure(
    control_plane: LocalControlPlane, kube: KubeAPI, sa_token: str, installed: Path
) -> Iterator[SchedulerProcess]:
    """`pysched run` with pysched's ServiceAccount token at --log-level debug: it makes the token and
    access reviews itself, with the rights of rbac.yaml."""
    for name in (SCRAPER, NO_METRICS):
        kube.post(
            f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        )
    bound = kubectl(
        control_plane,
        "create",
        "clusterrolebinding",
        "pysched-test-metrics",
        "--clusterrole=pysched-metrics-reader",
        f"--serviceaccount={NAMESPACE}:{SCRAPER}",
    )
    assert bound.returncode == 0, bound.stderr
    config = write_profile(control_plane.workdir / "secure-profiles.yaml", "pysched-secure")
    proc = start_scheduler(
        control_plane, "pysched-secure", config=config, kubeconfig=installed, args=["--log-level=debug"]
    )
    try:
        yield proc
    finally:
        proc.stop()
        kubectl(control_plane, "delete", "clusterrolebinding/pysched-test-metrics", "--ignore-not-found")
        for name in (SCRAPER, NO_METRICS):
            kube.delete(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{name}")


def test_metrics_on_the_secure_port_need_a_permitted_token(kube: KubeAPI, secure: SchedulerProcess) -> None:
    # Probe paths answer over HTTPS without a token.
    for path in ("/healthz", "/livez", "/readyz"):
        assert secure.get_secure(path) == (200, "ok"), path
    status, body = secure.get_secure("/metrics")
    assert status == 401 and "scheduler_" not in body
    assert secure.get_secure("/metrics", BOGUS_TOKEN)[0] == 401
    status, body = secure.get_secure("/metrics", service_account_token(kube, NAMESPACE, NO_METRICS))
    assert status == 403 and f"system:serviceaccount:{NAMESPACE}:{NO_METRICS}" in body and "scheduler_" not in body
    # The binding may take a moment to reach the authorizer's cache; a "no" is cached 10 s.
    scraper = service_account_token(kube, NAMESPACE, SCRAPER)
    status, body = wait_for(
        lambda: secure.get_secure("/metrics", scraper), lambda answer: answer[0] == 200, timeout=30, what="200"
    )
    metrics = parse_metrics(body)
    assert (
        metrics['leader_election_master_status{name="pysched"}'] == 1.0
        and 'scheduler_pending_pods{queue="active"}' in metrics
    )
    # The reviews were made with pysched's own token: none was refused by RBAC.
    forbidden = {k: v for k, v in secure.metrics().items() if "rest_client_requests_total" in k and 'code="403"' in k}
    assert not forbidden, forbidden


def test_no_token_or_authorization_header_in_the_debug_log(
    kube: KubeAPI, sa_token: str, secure: SchedulerProcess
) -> None:
    scraper = service_account_token(kube, NAMESPACE, SCRAPER)
    refused = service_account_token(kube, NAMESPACE, NO_METRICS)
    wait_for(lambda: secure.get_secure("/metrics", scraper)[0], lambda code: code == 200, timeout=30, what="200")
    assert secure.get_secure("/metrics", refused)[0] == 403
    assert secure.get_secure("/metrics", BOGUS_TOKEN)[0] == 401
    assert secure.get_secure("/metrics")[0] == 401
    assert secure.stop() == 0
    log = secure.process.log_path.read_text()
    # Debug was on and the refusals were logged: the check below reads the lines that matter.
    debug = [json.loads(line) for line in log.splitlines() if line.startswith("{") and '"level": "debug"' in line]
    assert {(entry["event"], entry["status"]) for entry in debug} >= {("refused", 401), ("refused", 403)}
    for token in (sa_token, scraper, refused, BOGUS_TOKEN):
        assert token not in log
        assert token[:16] not in log  # no prefix of it either
    assert not re.search("authorization|bearer", log, re.IGNORECASE), log
