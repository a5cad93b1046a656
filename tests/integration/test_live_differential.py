"""Differential test: pysched and the stock kube-scheduler agree on which pods cannot be placed.

Two identical sets of nodes (capacities, labels, taints, a cordoned node) are told apart by one
label; the same seeded pods (requests, selectors, required affinities, tolerations, init
containers, RuntimeClass overhead, extended resources) go to each scheduler, pinned to its side.
Each pod meets empty nodes, so whether it fits depends on the pod alone.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pysched.backend.live.kubeclient import MERGE_PATCH
from pysched.testing import KubeAPI, KubeAPIError, LocalControlPlane, NodeSpec, create_fake_nodes, wait_for
from pysched.testing.controlplane import ManagedProcess
from pysched.testing.helpers import condition
from pysched.testing.scheduler import create_pods, list_pods, start_scheduler, write_profile

pytestmark = pytest.mark.integration

SIDE = "pysched.io/diff-side"
RUNTIME_CLASS = "pysched-diff-overhead"
SHAPES = 40
NODES: list[tuple[NodeSpec, list[dict[str, str]], bool]] = [
    (NodeSpec(cpu="8", memory="32Gi", labels={"zone": "z1", "disk": "ssd"}), [], False),
    (
        NodeSpec(cpu="8", memory="32Gi", gpu="4", labels={"zone": "z2", "gpu": "true"}),
        [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
        False,
    ),
    (
        NodeSpec(cpu="16", memory="64Gi", labels={"zone": "z1"}),
        [{"key": "maintenance", "value": "", "effect": "NoExecute"}],
        False,
    ),
    (NodeSpec(cpu="16", memory="64Gi", labels={"zone": "z3"}), [], True),  # cordoned
    (NodeSpec(cpu="2", memory="4Gi", labels={"zone": "z3", "disk": "hdd"}), [], False),
]


def random_pod(rng: random.Random, name: str) -> dict[str, Any]:
    cpu = rng.choice(["50m", "100m", "100m", "200m", "3", "12", "20"])
    memory = rng.choice(["64Mi", "128Mi", "256Mi", "3Gi", "48Gi"])
    container: dict[str, Any] = {
        "name": "main",
        "image": "registry.invalid/pause:none",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0, "containers": [container]}
    if rng.random() < 0.15:
        container["resources"]["requests"]["nvidia.com/gpu"] = "1"
        container["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"zone": rng.choice(["z1", "z2", "z3", "z9"])}
    if rng.random() < 0.3:
        expression = rng.choice(
            [
                {"key": "zone", "operator": "In", "values": ["z2", "z3"]},
                {"key": "zone", "operator": "NotIn", "values": ["z1"]},
                {"key": "disk", "operator": "Exists"},
                {"key": "gpu", "operator": "DoesNotExist"},
            ]
        )
        terms = [{"matchExpressions": [expression]}]
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    tolerations = []
    if rng.random() < 0.35:
        tolerations.append({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"})
    if rng.random() < 0.35:
        tolerations.append({"key": "maintenance", "operator": "Exists"})
    if tolerations:
        spec["tolerations"] = tolerations
    if rng.random() < 0.2:
        init_cpu = rng.choice(["1", "9", "17"])
        spec["initContainers"] = [
            {"name": "init", "image": "registry.invalid/pause:none", "resources": {"requests": {"cpu": init_cpu}}}
        ]
    if rng.random() < 0.2:
        spec["runtimeClassName"] = RUNTIME_CLASS
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def sides(kube: KubeAPI, namespace: str) -> Iterator[None]:
    names: list[str] = []
    for side in ("kube", "pysched"):
        for i, (spec, taints, cordoned) in enumerate(NODES):
            labelled = NodeSpec(spec.cpu, spec.memory, spec.pods, spec.gpu, {**spec.labels, SIDE: side})
            name = create_fake_nodes(kube, 1, labelled, prefix=f"{namespace}-{side}-{i}-")[0]
            names.append(name)
            if taints or cordoned:
                patch = {"spec": {"taints": taints or None, "unschedulable": cordoned or None}}
                kube.patch(f"/api/v1/nodes/{name}", patch, content_type=MERGE_PATCH)
    try:
        kube.post(
            "/apis/node.k8s.io/v1/runtimeclasses",
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": RUNTIME_CLASS},
                "handler": "kata",
                "overhead": {"podFixed": {"cpu": "7", "memory": "128Mi"}},
            },
        )
    except KubeAPIError as err:
        if err.status != 409:
            raise
    yield
    for name in names:
        kube.delete(f"/api/v1/nodes/{name}")


def settled(pod: dict[str, Any]) -> bool:
    cond = condition(pod, "PodScheduled")
    return bool(pod["spec"].get("nodeName")) or (cond is not None and cond.get("reason") == "Unschedulable")


def test_same_pods_unschedulable_as_kube_scheduler(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, sides: None, tmp_path: Path
) -> None:
    name = f"pysched-{namespace}"
    rng = random.Random(20261130)
    shapes = [random_pod(rng, f"p{i:03d}") for i in range(SHAPES)]
    kube_scheduler: ManagedProcess = control_plane.start_kube_scheduler()
    ours = start_scheduler(control_plane, name, config=write_profile(tmp_path / "profiles.yaml", name))
    left: dict[str, set[str]] = {"kube": set(), "pysched": set()}
    try:
        for shape in shapes:
            # One shape at a time on empty nodes: fitting depends on the pod alone, not on where
            # earlier pods went (the two schedulers break ties differently).
            pair = []
            for side, scheduler in (("kube", "default-scheduler"), ("pysched", name)):
                pod = {**shape, "metadata": {"name": f"{side}-{shape['metadata']['name']}"}}
                pod["spec"] = {**shape["spec"], "schedulerName": scheduler}
                pod["spec"]["nodeSelector"] = {**shape["spec"].get("nodeSelector", {}), SIDE: side}
                pair.append(pod)
            create_pods(kube, namespace, pair)
            final = wait_for(
                lambda: list_pods(kube, namespace),
                lambda items: len(items) == 2 and all(settled(p) for p in items),
                timeout=30,
                interval=0.05,
                what=f"{shape['metadata']['name']} bound or marked unschedulable by both",
            )
            for pod in final:
                side, _, shape_name = pod["metadata"]["name"].partition("-")
                if not pod["spec"].get("nodeName"):
                    left[side].add(shape_name)
                kube.force_delete_pod(namespace, pod["metadata"]["name"])
            wait_for(lambda: list_pods(kube, namespace), lambda items: not items, what="pods gone")
    finally:
        ours.stop()
        kube_scheduler.stop()
        control_plane.processes.remove(kube_scheduler)
    assert left["kube"] == left["pysched"], {
        "only kube-scheduler left unschedulable": sorted(left["kube"] - left["pysched"]),
        "only pysched left unschedulable": sorted(left["pysched"] - left["kube"]),
    }
    assert 5 < len(left["kube"]) < SHAPES - 5  # the seed exercises both outcomes
