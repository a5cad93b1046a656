"""PodTopologySpread against the real kube-apiserver: zone spreading and kube's rejection."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from pysched.testing import KubeAPI, NodeSpec, create_fake_nodes, wait_for
from pysched.testing.scheduler import (
    TEST_LABEL,
    SchedulerProcess,
    create_pods,
    events,
    list_pods,
    pod_for,
)

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"
ZONES = ("a", "b", "c")


@pytest.fixture
def zone_nodes(kube: KubeAPI, namespace: str) -> Iterator[dict[str, str]]:
    """Two fake nodes per zone, labelled for this test's pods: node -> zone. Zone a's are far
    larger, so LeastAllocated alone would put every pod there."""
    names: dict[str, str] = {}
    try:
        for zone in ZONES:
            cpu, memory = ("64", "256Gi") if zone == "a" else ("8", "32Gi")
            spec = NodeSpec(cpu=cpu, memory=memory, labels={TEST_LABEL: namespace, ZONE: zone})
            for name in create_fake_nodes(kube, 2, spec, prefix=f"{namespace}-{zone}-"):
                names[name] = zone
        yield names
    finally:
        for name in names:
            kube.delete(f"/api/v1/nodes/{name}")


def _spread_pod(name: str, scheduler: str, namespace: str, app: str, **constraint: Any) -> dict[str, Any]:
    pod = pod_for(name, scheduler, namespace, "100m")
    pod["metadata"]["labels"] = {"app": app}
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}},
            **constraint,
        }
    ]
    return pod


def test_six_replicas_land_two_per_zone_and_an_imbalance_stays_pending(
    kube: KubeAPI, namespace: str, zone_nodes: dict[str, str], default_scheduler: SchedulerProcess
) -> None:
    name = f"pysched-{namespace}"
    create_pods(kube, namespace, [_spread_pod(f"web-{i}", name, namespace, "web") for i in range(6)])
    bound = wait_for(
        lambda: [p for p in list_pods(kube, namespace) if p["metadata"]["name"].startswith("web-")],
        lambda items: len(items) == 6 and all(p["spec"].get("nodeName") for p in items),
        timeout=60,
        what="6 replicas bound",
    )
    assert Counter(zone_nodes[p["spec"]["nodeName"]] for p in bound) == {"a": 2, "b": 2, "c": 2}

    # Two db pods already in zone a (bound by hand); one more allowed only in zone a, counting
    # zones b and c too (nodeAffinityPolicy Ignore): skew 2 + 1 - 0 > 1, it stays Pending.
    in_a = sorted(n for n, z in zone_nodes.items() if z == "a")
    for i in range(2):
        pod = pod_for(f"db-{i}", name, namespace, "100m")
        pod["metadata"]["labels"] = {"app": "db"}
        pod["spec"]["nodeName"] = in_a[i]
        kube.create_pod(namespace, pod)
    late = _spread_pod("db-late", name, namespace, "db", nodeAffinityPolicy="Ignore")
    late["spec"]["nodeSelector"][ZONE] = "a"
    kube.create_pod(namespace, late)
    failed = wait_for(
        lambda: [e for e in events(kube, namespace, "FailedScheduling") if e["regarding"]["name"] == "db-late"],
        lambda found: bool(found),
        timeout=30,
        what="FailedScheduling for db-late",
    )
    note = failed[-1]["note"]
    assert "2 node(s) didn't match pod topology spread constraints" in note, note
    assert "node(s) didn't match Pod's node affinity/selector" in note, note
    pod = kube.get(f"/api/v1/namespaces/{namespace}/pods/db-late")
    assert not pod["spec"].get("nodeName")
