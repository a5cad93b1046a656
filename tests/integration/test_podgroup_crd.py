"""The scheduler-plugins PodGroup CRD (scheduling.x-k8s.io/v1alpha1) that every test plane installs
from manifests/crds: its fields are stored, its bounds refused, its status is a subresource."""

from __future__ import annotations

from typing import Any

import pytest

from pysched.testing import KubeAPI, KubeAPIError

pytestmark = pytest.mark.integration

API = "scheduling.x-k8s.io/v1alpha1"


def podgroups(namespace: str) -> str:
    return f"/apis/{API}/namespaces/{namespace}/podgroups"


def podgroup(name: str, min_member: int | str, **spec: Any) -> dict[str, Any]:
    spec = {"minMember": min_member, **spec}
    return {"apiVersion": API, "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def test_a_podgroup_keeps_its_spec_and_its_status_is_a_subresource(kube: KubeAPI, namespace: str) -> None:
    body = podgroup("train", 4, minResources={"cpu": "8", "nvidia.com/gpu": 4}, scheduleTimeoutSeconds=60)
    body["status"] = {"phase": "Running"}  # dropped: status is written through /status only
    kube.post(podgroups(namespace), body)
    stored = kube.get(f"{podgroups(namespace)}/train")
    assert stored["spec"] == {
        "minMember": 4,
        "minResources": {"cpu": "8", "nvidia.com/gpu": 4},
        "scheduleTimeoutSeconds": 60,
    }
    assert "phase" not in stored.get("status", {})

    status = {"phase": "Scheduling", "scheduled": 2, "running": 1, "succeeded": 0, "failed": 0}
    status |= {"occupiedBy": f"{namespace}/train", "scheduleStartTime": "2026-01-02T03:04:05Z"}
    stored["status"] = status
    kube.put(f"{podgroups(namespace)}/train/status", stored)
    assert kube.get(f"{podgroups(namespace)}/train")["status"] == status


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (podgroup("negative", -1), "spec.minMember"),
        (podgroup("bad-quantity", 2, minResources={"cpu": "lots"}), "spec.minResources.cpu"),
        (podgroup("not-a-number", "two"), "spec.minMember"),
    ],
)
def test_an_invalid_podgroup_is_refused(kube: KubeAPI, namespace: str, body: dict[str, Any], field: str) -> None:
    with pytest.raises(KubeAPIError) as refused:
        kube.post(podgroups(namespace), body)
    assert refused.value.status == 422
    assert field in str(refused.value)
    assert not kube.exists(f"{podgroups(namespace)}/{body['metadata']['name']}")
