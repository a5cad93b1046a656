"""API-shaped PVC, PV, StorageClass and CSINode dicts (tests, scenarios)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def pvc_dict(
    name: str,
    *,
    namespace: str = "default",
    storage_class: str | None = "local",
    size: str = "1Gi",
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    volume_name: str = "",
    bound: bool = False,
    selector: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": list(access_modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume_name:
        spec["volumeName"] = volume_name
    if selector is not None:
        spec["selector"] = dict(selector)
    annotations = {"pv.kubernetes.io/bind-completed": "yes"} if bound else {}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": "Bound" if bound else "Pending"},
    }


def pv_dict(
    name: str,
    *,
    storage_class: str = "local",
    size: str = "1Gi",
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    node: str | None = None,
    labels: Mapping[str, str] | None = None,
    claim: tuple[str, str] | None = None,
    csi_driver: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "storageClassName": storage_class,
        "capacity": {"storage": size},
        "accessModes": list(access_modes),
    }
    if node is not None:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
                ]
            }
        }
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1], "uid": f"uid-{claim[0]}-{claim[1]}"}
    if csi_driver:
        spec["csi"] = {"driver": csi_driver, "volumeHandle": name}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
        "status": {"phase": "Bound" if claim is not None else "Available"},
    }


def storage_class_dict(
    name: str,
    *,
    provisioner: str = "kubernetes.io/no-provisioner",
    mode: str = "WaitForFirstConsumer",
    zones: Sequence[str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if zones is not None:
        out["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": list(zones)}]}
        ]
    return out


def csi_node_dict(name: str, limits: Mapping[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [{"name": d, "nodeID": name, "allocatable": {"count": c}} for d, c in limits.items()]},
    }


def csi_driver_dict(name: str, *, storage_capacity: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": {"storageCapacity": storage_capacity},
    }


def storage_capacity_dict(
    name: str,
    storage_class: str,
    *,
    zone: str | None,
    capacity: str | None = None,
    maximum_volume_size: str | None = None,
    namespace: str = "kube-system",
) -> dict[str, Any]:
    """A CSIStorageCapacity for the nodes of one zone (None: no nodeTopology, reachable from none)."""
    out: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": namespace},
        "storageClassName": storage_class,
    }
    if zone is not None:
        out["nodeTopology"] = {"matchLabels": {"topology.kubernetes.io/zone": zone}}
    if capacity is not None:
        out["capacity"] = capacity
    if maximum_volume_size is not None:
        out["maximumVolumeSize"] = maximum_volume_size
    return out


def with_volumes(pod: dict[str, Any], volumes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The pod manifest with `spec.volumes` set."""
    pod["spec"]["volumes"] = [dict(v) for v in volumes]
    return pod


def claim_volume(claim: str, name: str | None = None) -> dict[str, Any]:
    return {"name": name or claim, "persistentVolumeClaim": {"claimName": claim}}
