"""The kubelet emulator against the real kube-apiserver."""

from __future__ import annotations

import pytest

from pysched.testing import KubeAPI, wait_for
from pysched.testing.emulator import RUN_SECONDS_ANNOTATION, KubeletEmulator
from pysched.testing.helpers import condition, container_status, fake_node, make_pod
from pysched.testing.kube import JSON

pytestmark = pytest.mark.integration

NEW = {"requests": {"cpu": "300m", "memory": "96Mi"}, "limits": {"cpu": "400m", "memory": "128Mi"}}


def running_pod(kube: KubeAPI, namespace: str, name: str = "p", annotations: dict[str, str] | None = None) -> JSON:
    node = fake_node(kube, f"{namespace}-{name}-node")
    kube.create_pod(namespace, make_pod(name, annotations=annotations))
    kube.bind_pod(namespace, name, node)
    return wait_for(
        lambda: kube.get_pod(namespace, name),
        lambda p: p.get("status", {}).get("phase") == "Running",
        what=f"{name} Running",
    )


def test_marks_bound_pod_running(kube: KubeAPI, namespace: str, emulator: KubeletEmulator) -> None:
    pod = running_pod(kube, namespace)
    cs = container_status(pod)
    assert cs is not None
    assert cs["ready"] is True
    assert "running" in cs["state"]
    assert cs["resources"] == {
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"cpu": "200m", "memory": "128Mi"},
    }
    assert cs["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
    ready = condition(pod, "Ready")
    assert ready is not None and ready["status"] == "True"


def test_ignores_pods_on_other_nodes(kube: KubeAPI, namespace: str, emulator: KubeletEmulator) -> None:
    # Not a fake node on purpose (no label, no status, no Lease): neither the emulator nor the
    # heartbeat touch it, and the node lifecycle controller would mark it unreachable after its
    # startup grace period (a minute); it is deleted before.
    real = f"{namespace}-real"
    kube.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": real}})
    try:
        kube.create_pod(namespace, make_pod("other"))
        kube.bind_pod(namespace, "other", real)
        # A pod on a fake node, bound after, is handled: once it runs, the other one was seen too.
        running_pod(kube, namespace, "mine")
        assert kube.get_pod(namespace, "other").get("status", {}).get("phase") == "Pending"
    finally:
        kube.delete(f"/api/v1/nodes/{real}")


def test_actuates_resize(kube: KubeAPI, namespace: str, emulator: KubeletEmulator) -> None:
    running_pod(kube, namespace)
    kube.resize_pod(namespace, "p", {"main": NEW})
    pod = wait_for(
        lambda: kube.get_pod(namespace, "p"),
        lambda p: (container_status(p) or {}).get("resources") == NEW,
        what="resize actuated",
    )
    cs = container_status(pod)
    assert cs is not None
    assert cs["allocatedResources"] == {"cpu": "300m", "memory": "96Mi"}
    assert condition(pod, "PodResizePending") is None
    assert condition(pod, "PodResizeInProgress") is None
    assert pod["status"].get("observedGeneration") == pod["metadata"]["generation"]


def test_defers_then_actuates_resize(kube: KubeAPI, namespace: str, emulator: KubeletEmulator) -> None:
    running_pod(kube, namespace)
    emulator.defer_resize(namespace, "p")
    kube.resize_pod(namespace, "p", {"main": NEW})
    pod = wait_for(
        lambda: kube.get_pod(namespace, "p"),
        lambda p: (condition(p, "PodResizePending") or {}).get("reason") == "Deferred",
        what="PodResizePending/Deferred",
    )
    cs = container_status(pod)
    assert cs is not None
    assert cs["resources"]["requests"] == {"cpu": "100m", "memory": "64Mi"}
    assert cs["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}

    emulator.allow_resize(namespace, "p")
    pod = wait_for(
        lambda: kube.get_pod(namespace, "p"),
        lambda p: (container_status(p) or {}).get("resources") == NEW,
        what="deferred resize actuated",
    )
    assert condition(pod, "PodResizePending") is None


def test_marks_resize_infeasible(kube: KubeAPI, namespace: str, emulator: KubeletEmulator) -> None:
    running_pod(kube, namespace)
    emulator.reject_resize(namespace, "p")
    kube.resize_pod(namespace, "p", {"main": NEW})
    pod = wait_for(
        lambda: kube.get_pod(namespace, "p"),
        lambda p: (condition(p, "PodResizePending") or {}).get("reason") == "Infeasible",
        what="PodResizePending/Infeasible",
    )
    assert (container_status(pod) or {})["resources"]["requests"]["cpu"] == "100m"


def test_completes_on_request(kube: KubeAPI, namespace: str, emulator: KubeletEmulator) -> None:
    running_pod(kube, namespace)
    emulator.complete(namespace, "p")
    pod = kube.get_pod(namespace, "p")
    assert pod["status"]["phase"] == "Succeeded"
    cs = container_status(pod)
    assert cs is not None and cs["state"]["terminated"]["exitCode"] == 0


def test_completes_after_annotated_run_time(kube: KubeAPI, namespace: str, emulator: KubeletEmulator) -> None:
    running_pod(kube, namespace, annotations={RUN_SECONDS_ANNOTATION: "0.5"})
    wait_for(
        lambda: kube.get_pod(namespace, "p"),
        lambda p: p["status"].get("phase") == "Succeeded",
        what="pod Succeeded by the workload model",
    )
