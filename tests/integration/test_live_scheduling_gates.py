"""SchedulingGates against the real kube-apiserver: a gated pod is held untried (the API server
marks it SchedulingGated) while an ungated one binds, and binds once its gate is removed."""

from __future__ import annotations

import pytest

from pysched.backend.live.kubeclient import MERGE_PATCH
from pysched.testing import KubeAPI, wait_for
from pysched.testing.helpers import condition
from pysched.testing.scheduler import SchedulerProcess, events, namespace_nodes, pod_for

pytestmark = pytest.mark.integration


def test_a_gated_pod_waits_for_its_gate_and_then_binds(
    kube: KubeAPI, namespace: str, default_scheduler: SchedulerProcess
) -> None:
    name = f"pysched-{namespace}"
    with namespace_nodes(kube, namespace, 1):
        gated = pod_for("gated", name, namespace, "100m")
        gated["spec"]["schedulingGates"] = [{"name": "example.com/admission"}]
        kube.create_pod(namespace, gated)
        kube.create_pod(namespace, pod_for("free", name, namespace, "100m"))
        wait_for(
            lambda: kube.get(kube.pod_path(namespace, "free")),
            lambda pod: bool(pod["spec"].get("nodeName")),
            timeout=30,
            what="the ungated pod bound",
        )
        held = kube.get(kube.pod_path(namespace, "gated"))
        assert not held["spec"].get("nodeName")
        assert (condition(held, "PodScheduled") or {}).get("reason") == "SchedulingGated"
        assert not [e for e in events(kube, namespace, "FailedScheduling") if e["regarding"]["name"] == "gated"]
        kube.patch(kube.pod_path(namespace, "gated"), {"spec": {"schedulingGates": None}}, content_type=MERGE_PATCH)
        wait_for(
            lambda: kube.get(kube.pod_path(namespace, "gated")),
            lambda pod: bool(pod["spec"].get("nodeName")),
            timeout=30,
            what="the pod bound once its gate was removed",
        )
