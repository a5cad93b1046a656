"""DefaultPreemption against the real kube-apiserver: a full node, a higher-priority pod arrives,
the lower one is deleted with a Preempted event, the preemptor is nominated and then binds."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pysched.testing import KubeAPI, wait_for
from pysched.testing.helpers import condition
from pysched.testing.kube import JSON, KubeAPIError
from pysched.testing.scheduler import (
    SchedulerProcess,
    create_pods,
    events,
    namespace_nodes,
    pod_for,
)

pytestmark = pytest.mark.integration


def _pod_or_none(kube: KubeAPI, namespace: str, name: str) -> JSON | None:
    try:
        return kube.get_pod(namespace, name)
    except KubeAPIError as err:
        if err.status == 404:
            return None
        raise


@pytest.fixture
def classes(kube: KubeAPI) -> Iterator[tuple[str, str]]:
    suffix = uuid.uuid4().hex[:8]
    names = (f"pysched-low-{suffix}", f"pysched-high-{suffix}")
    for name, value in zip(names, (100, 1000), strict=True):
        kube.post(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value},
        )
    yield names
    for name in names:
        kube.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")


def test_a_high_priority_pod_preempts_on_a_full_node(
    kube: KubeAPI, namespace: str, classes: tuple[str, str], default_scheduler: SchedulerProcess
) -> None:
    low_class, high_class = classes
    name = f"pysched-{namespace}"
    with namespace_nodes(kube, namespace, 1, cpu="2", memory="4Gi") as (node,):
        low = pod_for("low", name, namespace, "1500m")
        low["spec"]["priorityClassName"] = low_class
        create_pods(kube, namespace, [low])
        wait_for(lambda: kube.get_pod(namespace, "low"), lambda p: bool(p["spec"].get("nodeName")), what="low bound")
        high = pod_for("high", name, namespace, "1500m")
        high["spec"]["priorityClassName"] = high_class
        create_pods(kube, namespace, [high])
        # Deleted at once or terminating (graceful deletion with no kubelet to finish it): the test
        # finishes a graceful deletion itself, as a kubelet would.
        victim = wait_for(
            lambda: _pod_or_none(kube, namespace, "low"),
            lambda p: p is None or bool(p["metadata"].get("deletionTimestamp")),
            timeout=30,
            what="low being deleted",
        )
        if victim is not None:
            target = condition(victim, "DisruptionTarget")
            assert target is not None and target["reason"] == "PreemptionByScheduler", victim["status"]
            nominated = wait_for(
                lambda: kube.get_pod(namespace, "high"),
                lambda p: p["status"].get("nominatedNodeName") == node,
                timeout=30,
                what="high nominated",
            )
            assert not nominated["spec"].get("nodeName")
            kube.delete(f"/api/v1/namespaces/{namespace}/pods/low", {"gracePeriodSeconds": 0})
        bound = wait_for(
            lambda: kube.get_pod(namespace, "high"),
            lambda p: p["spec"].get("nodeName") == node,
            timeout=30,
            what="high bound",
        )
        assert bound["spec"]["priority"] == 1000
        assert bound["status"].get("nominatedNodeName") in (None, node)
        preempted = wait_for(
            lambda: events(kube, namespace, "Preempted"), lambda e: len(e) == 1, timeout=30, what="Preempted event"
        )
        assert preempted[0]["type"] == "Normal"
        assert preempted[0]["regarding"]["name"] == "low"
        assert preempted[0]["note"] == f"Preempted by pod {bound['metadata']['uid']} on node {node}"
