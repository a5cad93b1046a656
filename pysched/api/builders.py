"""Pod and node manifests for tests, scenarios and benchmarks (API-shaped dicts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pysched.api.labels import HOSTNAME_LABEL, ZONE_LABEL
from pysched.api.objects import NodeInfo, PodInfo, node_from_dict, pod_from_dict
from pysched.api.times import format_rfc3339


def node_dict(
    name: str,
    *,
    cpu: str = "32",
    memory: str = "128Gi",
    pods: int = 110,
    extended: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extended or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name, **(labels or {})}},
        "spec": spec,
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def keep_apart(selector: Mapping[str, Any]) -> dict[str, Any]:
    """`spec.affinity` keeping the pod off any node that runs a pod `selector` matches (required
    anti-affinity by hostname)."""
    term = {"labelSelector": dict(selector), "topologyKey": HOSTNAME_LABEL}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def zone_spread(selector: Mapping[str, Any], max_skew: int = 1) -> list[dict[str, Any]]:
    """`spec.topologySpreadConstraints` spreading the pods `selector` matches over zones
    (DoNotSchedule)."""
    return [
        {
            "maxSkew": max_skew,
            "topologyKey": ZONE_LABEL,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": dict(selector),
        }
    ]


def make_node(name: str, **kwargs: Any) -> NodeInfo:
    return node_from_dict(node_dict(name, **kwargs))


def pod_dict(
    name: str,
    *,
    namespace: str = "default",
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    extended: Mapping[str, str] | None = None,
    scheduler_name: str = "pysched",
    priority: int = 0,
    created: float = 0.0,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    affinity_terms: Sequence[Mapping[str, Any]] | None = None,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    node_name: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extended or {})
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "priority": priority,
        "containers": [{"name": "main", "image": "trainer", "resources": {"requests": requests}}],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if affinity_terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(affinity_terms)}
            }
        }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{namespace}-{name}",
            "creationTimestamp": format_rfc3339(created),
            "annotations": dict(annotations or {}),
            "labels": dict(labels or {}),
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


# Kept for readability in tests: `make_pod_dict` builds the manifest, `make_pod` the record.
make_pod_dict = pod_dict


def make_pod(name: str, **kwargs: Any) -> PodInfo:
    return pod_from_dict(pod_dict(name, **kwargs))
