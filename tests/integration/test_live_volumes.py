"""The volume plugins against the real kube-apiserver: a missing claim's FailedScheduling
message, and a WaitForFirstConsumer local PV bound through the PV controller."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pysched.api.storage_builders import (
    claim_volume,
    csi_driver_dict,
    pv_dict,
    pvc_dict,
    storage_capacity_dict,
    storage_class_dict,
)
from pysched.testing import KubeAPI, LocalControlPlane, wait_for
from pysched.testing.scheduler import events, namespace_nodes, pod_for, start_scheduler

pytestmark = pytest.mark.integration

VOLUME_PLUGINS = ("VolumeBinding", "VolumeZone", "VolumeRestrictions", "NodeVolumeLimits")


def volume_profile(path: Path, name: str, bind_timeout: float = 60.0) -> Path:
    profile = {
        "schedulerName": name,
        "plugins": {
            "queueSort": [{"name": "PrioritySort"}],
            "preFilter": [{"name": n} for n in VOLUME_PLUGINS],
            "filter": [{"name": "NodeResourcesFit"}, {"name": "NodeAffinity"}] + [{"name": n} for n in VOLUME_PLUGINS],
            "reserve": [{"name": "VolumeBinding"}],
            "preBind": [{"name": "VolumeBinding"}],
            "bind": [{"name": "DefaultBinder"}],
        },
        "pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": bind_timeout}}],
    }
    path.write_text(yaml.safe_dump({"profiles": [profile]}))
    return path


def with_claim(pod: dict[str, object], claim: str) -> dict[str, object]:
    pod["spec"]["volumes"] = [claim_volume(claim)]  # type: ignore[index]
    return pod


def test_a_pod_with_a_missing_claim_stays_pending_with_kubes_message(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, tmp_path: Path
) -> None:
    name = f"pysched-{namespace}"
    with namespace_nodes(kube, namespace, 2):
        proc = start_scheduler(control_plane, name, config=volume_profile(tmp_path / "p.yaml", name))
        try:
            kube.post(f"/api/v1/namespaces/{namespace}/pods", with_claim(pod_for("p", name, namespace, "100m"), "nope"))
            found = wait_for(
                lambda: events(kube, namespace, "FailedScheduling"),
                lambda items: any("persistentvolumeclaim" in (e.get("note") or "") for e in items),
                timeout=30,
                what="FailedScheduling for the missing claim",
            )
            notes = {e.get("note") for e in found}
            assert any(n and n.endswith(': persistentvolumeclaim "nope" not found.') for n in notes), notes
            pod = kube.get(kube.pod_path(namespace, "p"))
            assert not pod["spec"].get("nodeName")
        finally:
            assert proc.stop() == 0, proc.log()


def test_wait_for_first_consumer_local_pv_is_bound_on_its_node(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, tmp_path: Path
) -> None:
    name = f"pysched-{namespace}"
    storage_class = f"local-{namespace}"
    with namespace_nodes(kube, namespace, 3) as nodes:
        target = nodes[1]
        kube.post("/apis/storage.k8s.io/v1/storageclasses", storage_class_dict(storage_class))
        pv = pv_dict(f"pv-{namespace}", storage_class=storage_class, node=target)
        pv["spec"]["local"] = {"path": "/mnt/disk"}
        kube.post("/api/v1/persistentvolumes", pv)
        kube.post(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", pvc_dict("data", namespace=namespace,
                  storage_class=storage_class))  # fmt: skip
        proc = start_scheduler(control_plane, name, config=volume_profile(tmp_path / "p.yaml", name))
        try:
            kube.post(f"/api/v1/namespaces/{namespace}/pods", with_claim(pod_for("p", name, namespace, "100m"), "data"))
            wait_for(
                lambda: kube.get(kube.pod_path(namespace, "p")),
                lambda pod: pod["spec"].get("nodeName") == target,
                timeout=60,
                what="the pod bound to the PV's node",
            )
            claim = wait_for(
                lambda: kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data"),
                lambda c: (c.get("status") or {}).get("phase") == "Bound",
                timeout=60,
                what="the claim Bound",
            )
            assert claim["spec"]["volumeName"] == f"pv-{namespace}"
        finally:
            assert proc.stop() == 0, proc.log()
            kube.delete(f"/api/v1/persistentvolumes/pv-{namespace}")
            kube.delete(f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}")


def test_a_driver_publishing_capacity_provisions_where_the_claim_fits_and_the_node_is_nominated(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, tmp_path: Path
) -> None:
    """CSIDriver.storageCapacity and CSIStorageCapacity from the API: the claim that fits goes
    to the one node the capacity serves (no provisioner runs here, so PreBind waits, and the
    pod's nominatedNodeName says where it goes meanwhile); the claim too big for it is refused."""
    name = f"pysched-{namespace}"
    storage_class, driver = f"fast-{namespace}", f"csi.{namespace}.example.com"
    with namespace_nodes(kube, namespace, 3) as nodes:
        target = nodes[2]
        kube.post("/apis/storage.k8s.io/v1/storageclasses", storage_class_dict(storage_class, provisioner=driver))
        kube.post("/apis/storage.k8s.io/v1/csidrivers", csi_driver_dict(driver))
        capacity = storage_capacity_dict("pool", storage_class, zone=None, capacity="10Gi", namespace=namespace)
        capacity["nodeTopology"] = {"matchLabels": {"kubernetes.io/hostname": target}}
        kube.post(f"/apis/storage.k8s.io/v1/namespaces/{namespace}/csistoragecapacities", capacity)
        for claim, size in (("small", "1Gi"), ("huge", "100Gi")):
            kube.post(
                f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
                pvc_dict(claim, namespace=namespace, storage_class=storage_class, size=size),
            )
        proc = start_scheduler(control_plane, name, config=volume_profile(tmp_path / "p.yaml", name))
        try:
            for pod, claim in (("p", "small"), ("q", "huge")):
                kube.post(
                    f"/api/v1/namespaces/{namespace}/pods", with_claim(pod_for(pod, name, namespace, "100m"), claim)
                )
            wait_for(
                lambda: kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/small"),
                lambda c: c["metadata"].get("annotations", {}).get("volume.kubernetes.io/selected-node") == target,
                timeout=60,
                what="the small claim's selected node",
            )
            pending = kube.get(kube.pod_path(namespace, "p"))
            assert not pending["spec"].get("nodeName") and pending["status"].get("nominatedNodeName") == target
            wait_for(
                lambda: events(kube, namespace, "FailedScheduling"),
                lambda items: any("3 node(s) did not have enough free storage" in (e.get("note") or "") for e in items),
                timeout=30,
                what="FailedScheduling for the claim no capacity holds",
            )
        finally:
            assert proc.stop() == 0, proc.log()
            kube.delete(f"/apis/storage.k8s.io/v1/csidrivers/{driver}")
            kube.delete(f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}")
