"""manifests/training on the real apiserver: a pod's token writes its own progress, in its bounded
form, and nothing else; it reads no pod."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pysched.backend.live.kubeclient import MERGE_PATCH
from pysched.progress import PROGRESS, KubernetesTransport, PodRef, Reporter
from pysched.testing import KubeAPI, KubeAPIError, LocalControlPlane, wait_for
from pysched.testing.controlplane import kubeconfig_dict

pytestmark = pytest.mark.integration

TRAINING = Path(__file__).resolve().parents[2] / "manifests" / "training"
SERVICE_ACCOUNT = "pysched-training"
T0 = 1_796_040_000.0  # 2026-11-30T12:00:00Z


def kubectl(plane: LocalControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(plane.binary("kubectl")), f"--kubeconfig={plane.kubeconfig_path}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def training_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "train"}, "annotations": {"pysched.io/total-steps": "1000"}},
        "spec": {"serviceAccountName": SERVICE_ACCOUNT, "containers": [{"name": "train", "image": "python:3.11"}]},
    }


def pod_token(kube: KubeAPI, namespace: str, pod: dict[str, Any] | None) -> str:
    """A TokenRequest for the training ServiceAccount, bound to `pod` (as kubelet's projected token is)."""
    spec: dict[str, Any] = {"expirationSeconds": 3600}
    if pod is not None:
        meta = pod["metadata"]
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{SERVICE_ACCOUNT}/token"
    token: str = kube.post(path, request)["status"]["token"]
    return token


@pytest.fixture
def training(control_plane: LocalControlPlane, namespace: str, tmp_path: Path) -> Iterator[str]:
    """`kubectl apply -k` of manifests/training with its namespace set to the test's."""
    overlay = tmp_path / "training"
    shutil.copytree(TRAINING, overlay)
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    kustomization["namespace"] = namespace
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    applied = kubectl(control_plane, "apply", "-k", str(overlay))
    assert applied.returncode == 0, applied.stderr
    try:
        yield namespace
    finally:
        kubectl(
            control_plane,
            "delete",
            "validatingadmissionpolicybinding/pysched-progress",
            "validatingadmissionpolicy/pysched-progress",
            "--ignore-not-found",
        )


def as_pod(control_plane: LocalControlPlane, token: str) -> KubeAPI:
    return KubeAPI(
        control_plane.server, token, ca_file=control_plane.ca_file if control_plane.ca_file.exists() else None
    )


def denied(api: KubeAPI, namespace: str, name: str, body: dict[str, Any], status: int = 403, **query: Any) -> str:
    """The message of the refusal (403 unless told) a merge patch gets (fails the test when the
    patch is admitted)."""
    with pytest.raises(KubeAPIError) as err:
        api.patch(api.pod_path(namespace, name), body, content_type=MERGE_PATCH, **query)
    assert err.value.status == status, err.value
    return str(err.value)


def annotate(key: str, value: str | None) -> dict[str, Any]:
    return {"metadata": {"annotations": {key: value}}}


def test_a_pod_token_writes_its_own_progress_and_nothing_else(
    control_plane: LocalControlPlane, kube: KubeAPI, training: str, caplog: pytest.LogCaptureFixture
) -> None:
    ns = training
    pod_a = kube.create_pod(ns, training_pod("a"))
    kube.create_pod(ns, training_pod("b"))
    api = as_pod(control_plane, pod_token(kube, ns, pod_a))

    def policy_denies() -> bool:
        # Dry run: admission runs, nothing is stored, so an early "allowed" changes nothing.
        try:
            api.patch(
                api.pod_path(ns, "a"), {"metadata": {"labels": {"app": "x"}}}, content_type=MERGE_PATCH, dryRun="All"
            )
        except KubeAPIError as err:
            return err.status == 403 and "ValidatingAdmissionPolicy" in err.body
        return False

    wait_for(policy_denies, bool, timeout=30, what="the RBAC and the policy to be in force")

    # Its own progress, through the training helper with a transport on this apiserver.
    from kubernetes import client

    configuration = client.Configuration(host=control_plane.server)
    configuration.api_key = {"authorization": f"Bearer {api.token}"}
    if control_plane.ca_file.exists():
        configuration.ssl_ca_cert = str(control_plane.ca_file)
    else:
        configuration.verify_ssl = False
    transport = KubernetesTransport(client.ApiClient(configuration))
    reporter = Reporter(PodRef(ns, "a"), transport, clock=lambda: T0 + 5)
    assert reporter.report(1200) and reporter.drain(30)
    assert kube.get_pod(ns, "a")["metadata"]["annotations"][PROGRESS] == "1200@2026-11-30T12:00:05Z"
    api.patch(api.pod_path(ns, "a"), annotate(PROGRESS, "1300@2026-11-30T12:01:05Z"), content_type=MERGE_PATCH)

    # Only its bounded form: STEPS@TIME, 1 to 16 digits, 64 characters at most (the apiserver
    # itself would store up to 256 KB of annotations).
    def bad_form(value: str) -> str:
        message = denied(api, ns, "a", annotate(PROGRESS, value), status=422)
        assert "pysched.io/progress must be STEPS@TIME" in message, message
        return message

    huge = "1300@2026-11-30T12:01:05Z" + " " * 200_000
    assert len(bad_form(huge)) < 2_000  # refused with the policy's message, the value not echoed
    bad_form("1" * 5000 + "@2026-11-30T12:01:05Z")
    bad_form("1" * 17 + "@2026-11-30T12:01:05Z")
    bad_form("1300@2026-11-30T12:01:05+01:00")
    bad_form("1300@2026-13-30T12:01:05Z")
    bad_form("1300")
    api.patch(
        api.pod_path(ns, "a"), annotate(PROGRESS, "9" * 16 + "@2026-11-30T12:01:05.250Z"), content_type=MERGE_PATCH
    )
    api.patch(api.pod_path(ns, "a"), annotate(PROGRESS, "1300@2026-11-30T12:01:05Z"), content_type=MERGE_PATCH)

    # Nothing else on its own pod.
    assert "no annotation but pysched.io/progress" in denied(api, ns, "a", annotate("pysched.io/total-steps", "10"))
    assert "no annotation but pysched.io/progress" in denied(api, ns, "a", annotate("pysched.io/total-steps", None))
    assert "no annotation but pysched.io/progress" in denied(api, ns, "a", annotate("other", "x"))
    assert "nothing but its pysched.io/progress" in denied(api, ns, "a", {"metadata": {"labels": {"app": "x"}}})
    assert "nothing but its pysched.io/progress" in denied(api, ns, "a", {"spec": {"activeDeadlineSeconds": 60}})
    both = {"metadata": {"annotations": {PROGRESS: "1@2026-11-30T12:02:00Z"}, "labels": {"app": "x"}}}
    denied(api, ns, "a", both)

    # Not another pod's progress: the helper logs the refusal and carries on.
    assert "only update its own progress, not pod" in denied(api, ns, "b", annotate(PROGRESS, "1@2026-11-30T12:00:00Z"))
    with caplog.at_level(logging.WARNING, logger="pysched_progress"):
        refused = Reporter(PodRef(ns, "b"), transport, clock=lambda: T0)
        assert refused.report(1) and refused.drain(30) and not refused.flush()
    assert "could not write pysched.io/progress=1@2026-11-30T12:00:00Z on pod" in caplog.text

    # A token of the same ServiceAccount that is not bound to a pod writes nothing.
    unbound = as_pod(control_plane, pod_token(kube, ns, None))
    assert "only update its own progress" in denied(unbound, ns, "a", annotate(PROGRESS, "1@2026-11-30T12:00:00Z"))

    a = kube.get_pod(ns, "a")
    assert a["metadata"]["labels"] == {"app": "train"}
    assert a["metadata"]["annotations"] == {"pysched.io/total-steps": "1000", PROGRESS: "1300@2026-11-30T12:01:05Z"}
    assert "activeDeadlineSeconds" not in a["spec"]
    assert PROGRESS not in kube.get_pod(ns, "b")["metadata"].get("annotations", {})
    # Other identities are not affected by the policy.
    kube.patch(kube.pod_path(ns, "b"), {"metadata": {"labels": {"app": "y"}}}, content_type=MERGE_PATCH)


CAN: list[tuple[str, ...]] = [("patch", "pods")]
CANNOT: list[tuple[str, ...]] = [
    ("get", "pods"),
    ("list", "pods"),
    ("watch", "pods"),
    ("get", "pods/a"),
    ("get", "pods", "--subresource=log"),
    ("create", "pods"),
    ("update", "pods"),
    ("delete", "pods"),
    ("create", "pods", "--subresource=exec"),
    ("patch", "pods", "--subresource=status"),
    ("patch", "pods", "--subresource=resize"),
    ("list", "pods", "--all-namespaces"),
    ("patch", "pods", "-n", "default"),
    ("get", "secrets"),
    ("get", "configmaps"),
    ("list", "events"),
]


def test_a_pod_token_reads_no_pod(
    control_plane: LocalControlPlane, kube: KubeAPI, training: str, tmp_path: Path
) -> None:
    """RBAC cannot name the pod's own (generated) name, so the Role grants only `patch`: no pod,
    neighbour or its own, can be read with the token."""
    ns = training
    pod_a = kube.create_pod(ns, training_pod("a"))
    kube.create_pod(ns, training_pod("b"))
    api = as_pod(control_plane, pod_token(kube, ns, pod_a))
    kubeconfig = tmp_path / "training.kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            kubeconfig_dict(
                control_plane.server, api.token, control_plane.ca_file if control_plane.ca_file.exists() else None
            )
        )
    )

    def can_i(*check: str) -> int:
        argv = [str(control_plane.binary("kubectl")), f"--kubeconfig={kubeconfig}", "auth", "can-i", *check]
        if "--all-namespaces" not in check and "-n" not in check:
            argv += ["-n", ns]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False).returncode

    wait_for(lambda: can_i("patch", "pods"), lambda code: code == 0, timeout=30, what="the Role in force")
    for check in CAN:
        assert can_i(*check) == 0, check
    for check in CANNOT:
        assert can_i(*check) == 1, check

    for path in (api.pod_path(ns, "b"), api.pod_path(ns, "a"), f"/api/v1/namespaces/{ns}/pods", "/api/v1/pods"):
        with pytest.raises(KubeAPIError) as err:
            api.get(path)
        assert err.value.status == 403, (path, err.value)
        assert "cannot get" in err.value.body or "cannot list" in err.value.body
    with pytest.raises(KubeAPIError) as err:
        api.get(f"/api/v1/namespaces/{ns}/pods", watch="true")
    assert err.value.status == 403
