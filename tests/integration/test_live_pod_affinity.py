"""InterPodAffinity against the real kube-apiserver: two pods that refuse each other's node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pysched.testing import KubeAPI, LocalControlPlane, NodeSpec, create_fake_nodes, wait_for
from pysched.testing.scheduler import TEST_LABEL, events, list_pods, pod_for, start_scheduler, write_profile

pytestmark = pytest.mark.integration


def _apart(name: str, scheduler: str, namespace: str) -> dict[str, Any]:
    pod = pod_for(name, scheduler, namespace, "100m")
    pod["metadata"]["labels"] = {"app": "apart"}
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "apart"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    return pod


def test_required_anti_affinity_pending_then_apart(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, tmp_path: Path
) -> None:
    name = f"pysched-{namespace}"
    spec = NodeSpec(cpu="4", memory="16Gi", labels={TEST_LABEL: namespace})
    nodes = create_fake_nodes(kube, 1, spec, prefix=f"{namespace}-n")
    proc = start_scheduler(control_plane, name, config=write_profile(tmp_path / "profiles.yaml", name))
    try:
        kube.create_pod(namespace, _apart("first", name, namespace))
        wait_for(
            lambda: list_pods(kube, namespace),
            lambda items: any(p["spec"].get("nodeName") for p in items),
            timeout=30,
            what="the first pod bound",
        )
        kube.create_pod(namespace, _apart("second", name, namespace))
        failed = wait_for(
            lambda: [e for e in events(kube, namespace, "FailedScheduling") if e["regarding"]["name"] == "second"],
            lambda found: bool(found),
            timeout=30,
            what="FailedScheduling for the second pod",
        )
        note = failed[-1]["note"]
        assert note.startswith("0/") and "1 node(s) didn't match pod anti-affinity rules" in note, note
        pods = {p["metadata"]["name"]: p for p in list_pods(kube, namespace)}
        assert pods["first"]["spec"]["nodeName"] == nodes[0]
        assert not pods["second"]["spec"].get("nodeName")

        nodes += create_fake_nodes(kube, 1, spec, prefix=f"{namespace}-m")  # a second node: a new domain
        bound = wait_for(
            lambda: list_pods(kube, namespace),
            lambda items: sum(1 for p in items if p["spec"].get("nodeName")) == 2,
            timeout=60,
            what="both pods bound",
        )
        assert {p["spec"]["nodeName"] for p in bound} == set(nodes)
    finally:
        assert proc.stop() == 0, proc.log()
        for node in nodes:
            kube.delete(f"/api/v1/nodes/{node}")
