"""NodePorts and UnsupportedFields against the real kube-apiserver: a taken host port and a pod
using resourceClaims both stay Pending with their events."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pysched.api.podspec import refusal
from pysched.plugins.node_ports import REASON
from pysched.testing import KubeAPI, LocalControlPlane, wait_for
from pysched.testing.scheduler import (
    SchedulerProcess,
    events,
    list_pods,
    namespace_nodes,
    pod_for,
    start_scheduler,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def scheduler(control_plane: LocalControlPlane, namespace: str, tmp_path: Path) -> Iterator[SchedulerProcess]:
    name = f"pysched-{namespace}"
    profile = {
        "schedulerName": name,
        "plugins": {
            "queueSort": [{"name": "PrioritySort"}],
            "preFilter": [{"name": "UnsupportedFields"}, {"name": "NodePorts"}],
            "filter": [{"name": "NodeAffinity"}, {"name": "NodePorts"}, {"name": "NodeResourcesFit"}],
            "score": [{"name": "LeastAllocated", "weight": 1}],
            "bind": [{"name": "DefaultBinder"}],
        },
    }
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump({"profiles": [profile]}))
    proc = start_scheduler(control_plane, name, config=path)
    yield proc
    assert proc.stop() == 0, proc.log()


def _notes(kube: KubeAPI, namespace: str, pod: str) -> list[str]:
    return [e["note"] for e in events(kube, namespace, "FailedScheduling") if e["regarding"]["name"] == pod]


def test_taken_host_port_and_resource_claims_stay_pending(
    kube: KubeAPI, namespace: str, scheduler: SchedulerProcess
) -> None:
    name = f"pysched-{namespace}"
    with namespace_nodes(kube, namespace, 1):
        for pod_name in ("first", "second"):
            pod = pod_for(pod_name, name, namespace, "100m")
            pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
            kube.create_pod(namespace, pod)
            if pod_name == "first":
                wait_for(
                    lambda: list_pods(kube, namespace),
                    lambda items: any(p["spec"].get("nodeName") for p in items),
                    what="the first pod bound",
                )
        claims = pod_for("claims", name, namespace, "100m")
        claims["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
        kube.create_pod(namespace, claims)
        wait_for(
            lambda: (_notes(kube, namespace, "second"), _notes(kube, namespace, "claims")),
            lambda found: bool(found[0]) and bool(found[1]),
            what="FailedScheduling for both pods",
        )
        # Other tests' nodes may share the plane: this namespace's one node is the one that counts.
        second_note = _notes(kube, namespace, "second")[0]
        assert re.search(rf"(: |, )1 {re.escape(REASON)}", second_note), second_note
        claims_note = _notes(kube, namespace, "claims")[0]
        assert claims_note.endswith(f"nodes are available: {refusal('spec.resourceClaims')}."), claims_note
        bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in list_pods(kube, namespace)}
        assert bound["first"] and bound["second"] is None and bound["claims"] is None
