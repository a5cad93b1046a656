"""kube-controller-manager in the test control plane: Jobs and Deployments make pods pysched binds,
the garbage collector follows owners, the PV controller binds claims, and the heartbeat is what
keeps fake nodes Ready under the node lifecycle controller."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pysched.api.times import parse_time
from pysched.testing import FAKE_NODE_LABEL, KubeAPI, LocalControlPlane, NodeSpec, wait_for
from pysched.testing.emulator import RUN_SECONDS_ANNOTATION, KubeletEmulator
from pysched.testing.heartbeat import lease_path
from pysched.testing.scheduler import (
    SchedulerProcess,
    list_pods,
    namespace_nodes,
    pod_for,
    start_scheduler,
    write_profile,
)

pytestmark = pytest.mark.integration

SCHEDULER = "pysched-kcm"
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"


@pytest.fixture(scope="module")
def scheduler(control_plane: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulerProcess]:
    profile = write_profile(tmp_path_factory.mktemp("kcm") / "profiles.yaml", SCHEDULER)
    proc = start_scheduler(control_plane, SCHEDULER, config=profile)
    yield proc
    assert proc.stop() == 0, proc.log()


@pytest.fixture
def nodes(kube: KubeAPI, namespace: str) -> Iterator[list[str]]:
    with namespace_nodes(kube, namespace, 2) as names:
        yield names


def template(namespace: str, restart: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod template for pysched, on this test's nodes."""
    pod = pod_for("unused", SCHEDULER, namespace, "100m")
    pod["spec"]["restartPolicy"] = restart
    return {"metadata": {"labels": {"app": "kcm"}, "annotations": annotations or {}}, "spec": pod["spec"]}


def create_job(kube: KubeAPI, namespace: str, name: str, pods: int, annotations: dict[str, str] | None = None) -> Any:
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"parallelism": pods, "completions": pods, "template": template(namespace, "Never", annotations)},
    }
    return kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", body)


def job_pods(kube: KubeAPI, namespace: str, job: str) -> list[dict[str, Any]]:
    return [p for p in list_pods(kube, namespace) if p["metadata"].get("labels", {}).get("job-name") == job]


def all_bound(pods: list[dict[str, Any]], count: int) -> bool:
    return len(pods) == count and all(p["spec"].get("nodeName") for p in pods)


def test_job_pods_are_made_bound_and_run_to_completion(
    kube: KubeAPI, namespace: str, nodes: list[str], scheduler: SchedulerProcess, emulator: KubeletEmulator
) -> None:
    create_job(kube, namespace, "train", 3, {RUN_SECONDS_ANNOTATION: "1"})
    pods = wait_for(
        lambda: job_pods(kube, namespace, "train"),
        lambda ps: all_bound(ps, 3),
        timeout=30,
        what="the Job's 3 pods made and bound by pysched",
    )
    assert {p["spec"]["nodeName"] for p in pods} <= set(nodes)
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "Job" for p in pods)
    job = wait_for(
        lambda: kube.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/train"),
        lambda j: j.get("status", {}).get("succeeded") == 3,
        timeout=30,
        what="the Job complete",
    )
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"])


def test_deployment_rolls_out(
    kube: KubeAPI, namespace: str, nodes: list[str], scheduler: SchedulerProcess, emulator: KubeletEmulator
) -> None:
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "kcm"}},
            "template": template(namespace, "Always"),
        },
    }
    kube.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", body)
    deployment = wait_for(
        lambda: kube.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web"),
        lambda d: d.get("status", {}).get("readyReplicas") == 2 and d["status"].get("updatedReplicas") == 2,
        timeout=30,
        what="the Deployment rolled out (2 ready replicas)",
    )
    assert deployment["status"].get("availableReplicas") == 2
    (replica_set,) = kube.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]
    assert replica_set["metadata"]["ownerReferences"][0]["name"] == "web"
    pods = list_pods(kube, namespace)
    assert all_bound(pods, 2) and {p["spec"]["nodeName"] for p in pods} <= set(nodes)


def test_deleting_a_job_collects_its_pods(
    kube: KubeAPI, namespace: str, nodes: list[str], scheduler: SchedulerProcess
) -> None:
    create_job(kube, namespace, "doomed", 2)
    wait_for(lambda: job_pods(kube, namespace, "doomed"), lambda ps: all_bound(ps, 2), timeout=30, what="2 pods bound")
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/doomed"
    kube.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"})
    wait_for(
        lambda: (kube.exists(path), len(list_pods(kube, namespace))),
        lambda state: state == (False, 0),
        timeout=30,
        what="the Job and its pods deleted by the garbage collector",
    )


def test_immediate_claim_binds_a_matching_volume(kube: KubeAPI, namespace: str) -> None:
    name = f"{namespace}-immediate"  # cluster-scoped objects, named for this test
    sc = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "pysched.io/static",  # none runs: claims bind to the volumes made here
        "volumeBindingMode": "Immediate",
    }
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": name,
            "hostPath": {"path": f"/tmp/{name}"},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": name,
            "resources": {"requests": {"storage": "512Mi"}},
        },
    }
    kube.post("/apis/storage.k8s.io/v1/storageclasses", sc)
    kube.post("/api/v1/persistentvolumes", pv)
    try:
        # Available once the PV controller has seen it; a claim made before that would wait for the
        # controller's next resync (15 s) to find the volume
        wait_for(
            lambda: kube.get(f"/api/v1/persistentvolumes/{name}"),
            lambda v: v.get("status", {}).get("phase") == "Available",
            timeout=30,
            what="the volume Available",
        )
        kube.post(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", pvc)
        claim = wait_for(
            lambda: kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data"),
            lambda c: c.get("status", {}).get("phase") == "Bound",
            timeout=30,
            what="the claim Bound",
        )
        assert claim["spec"]["volumeName"] == name
        volume = kube.get(f"/api/v1/persistentvolumes/{name}")
        assert volume["status"]["phase"] == "Bound"
        assert volume["spec"]["claimRef"]["name"] == "data"
    finally:
        kube.delete(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data")
        kube.delete(f"/api/v1/persistentvolumes/{name}")
        kube.delete(f"/apis/storage.k8s.io/v1/storageclasses/{name}")


GRACE_S = 6.0  # the private plane's --node-monitor-grace-period


def node_taints(kube: KubeAPI, name: str) -> set[str]:
    return {t["key"] for t in kube.get(f"/api/v1/nodes/{name}")["spec"].get("taints") or []}


def ready_status(kube: KubeAPI, name: str) -> str:
    conditions = kube.get(f"/api/v1/nodes/{name}")["status"]["conditions"]
    return str(next(c["status"] for c in conditions if c["type"] == "Ready"))


def test_heartbeat_keeps_fake_nodes_ready_past_the_grace_period(control_plane_bin_dir: str, tmp_path: Path) -> None:
    """A private plane with a 6 s grace period checked every second: a node whose Lease nobody
    renews is tainted unreachable after it, while the heartbeat's nodes stay Ready and untainted
    for twice as long."""
    with LocalControlPlane(
        tmp_path / "cp",
        bin_dir=control_plane_bin_dir,
        node_monitor_grace_period=GRACE_S,
        heartbeat_interval=1.0,
        extra_controller_manager_args=["--node-monitor-period=1s"],
    ) as plane:
        kube = plane.api()
        fake = plane.create_nodes(2, prefix="beat-")
        (silent,) = plane.create_nodes(1, NodeSpec(labels={FAKE_NODE_LABEL: "false"}), prefix="silent-")
        created = time.monotonic()
        first = {n: kube.get(lease_path(n))["spec"]["renewTime"] for n in [*fake, silent]}

        wait_for(lambda: node_taints(kube, silent), lambda t: UNREACHABLE in t, timeout=30, what="silent tainted")
        assert time.monotonic() - created >= GRACE_S * 0.9
        assert ready_status(kube, silent) == "Unknown"
        assert kube.get(lease_path(silent))["spec"]["renewTime"] == first[silent]

        # Past two grace periods since their only Lease write at creation, the heartbeat's nodes
        # would have gone the same way without it.
        while time.monotonic() - created < 2 * GRACE_S + 1:
            for name in fake:
                assert not node_taints(kube, name) & {UNREACHABLE, NOT_READY}, name
            time.sleep(0.5)
        for name in fake:
            assert ready_status(kube, name) == "True"
            assert not node_taints(kube, name)
            renewed = kube.get(lease_path(name))["spec"]["renewTime"]
            assert parse_time(renewed) > parse_time(first[name]) + GRACE_S
        assert plane.heartbeat is not None and plane.heartbeat.failures == 0
        plane.check()


def test_fake_node_lease_is_owned_by_its_node(kube: KubeAPI, namespace: str) -> None:
    with namespace_nodes(kube, namespace, 1) as (name,):
        lease = kube.get(lease_path(name))
        node = kube.get(f"/api/v1/nodes/{name}")
        assert lease["spec"]["holderIdentity"] == name and lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]

    wait_for(lambda: kube.exists(lease_path(name)), lambda e: not e, timeout=30, what="the Lease deleted with its node")
