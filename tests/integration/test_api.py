"""Binding and in-place resize against the real kube-apiserver."""

from __future__ import annotations

import pytest

from pysched.testing import KubeAPI, KubeAPIError, LocalControlPlane, wait_for
from pysched.testing.emulator import KubeletEmulator
from pysched.testing.helpers import container, container_status, fake_node, make_pod

pytestmark = pytest.mark.integration

NEW_RESOURCES = {
    "requests": {"cpu": "300m", "memory": "96Mi"},
    "limits": {"cpu": "400m", "memory": "128Mi"},
}


def test_version_and_fake_node_ready(kube: KubeAPI, namespace: str) -> None:
    assert kube.get("/version")["gitVersion"] == "v1.36.3"
    node = kube.get(f"/api/v1/nodes/{fake_node(kube, f'{namespace}-n0')}")
    assert node["status"]["allocatable"]["cpu"] == "8"
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert not node["spec"].get("taints")


def test_bind_sets_node_name(kube: KubeAPI, namespace: str) -> None:
    node = fake_node(kube, f"{namespace}-n0")
    pod = kube.create_pod(namespace, make_pod("p"))
    assert not pod["spec"].get("nodeName")

    status = kube.bind_pod(namespace, "p", node, uid=pod["metadata"]["uid"])
    assert status["kind"] == "Status"
    assert status["status"] == "Success"
    assert kube.get_pod(namespace, "p")["spec"]["nodeName"] == node

    # A second bind of an assigned pod is a conflict.
    with pytest.raises(KubeAPIError) as err:
        kube.bind_pod(namespace, "p", node)
    assert err.value.status == 409


def test_bind_with_stale_uid_is_rejected(kube: KubeAPI, namespace: str) -> None:
    node = fake_node(kube, f"{namespace}-n0")
    kube.create_pod(namespace, make_pod("p"))
    with pytest.raises(KubeAPIError) as err:
        kube.bind_pod(namespace, "p", node, uid="00000000-0000-0000-0000-000000000000")
    assert err.value.status == 409
    assert not kube.get_pod(namespace, "p")["spec"].get("nodeName")


def test_resize_pending_pod(kube: KubeAPI, namespace: str) -> None:
    pod = kube.create_pod(namespace, make_pod("p"))
    gen = pod["metadata"]["generation"]

    resized = kube.resize_pod(namespace, "p", {"main": NEW_RESOURCES})
    assert container(resized)["resources"] == NEW_RESOURCES

    stored = kube.get_pod(namespace, "p")
    assert container(stored)["resources"] == NEW_RESOURCES
    assert stored["metadata"]["generation"] > gen
    assert not stored["spec"].get("nodeName")


def test_resize_cannot_change_qos_class(kube: KubeAPI, namespace: str) -> None:
    kube.create_pod(namespace, make_pod("p"))  # Burstable
    guaranteed = {
        "requests": {"cpu": "200m", "memory": "128Mi"},
        "limits": {"cpu": "200m", "memory": "128Mi"},
    }
    with pytest.raises(KubeAPIError) as err:
        kube.resize_pod(namespace, "p", {"main": guaranteed})
    assert err.value.status == 422
    stored = kube.get_pod(namespace, "p")
    assert container(stored)["resources"]["requests"]["cpu"] == "100m"


def test_plain_patch_cannot_change_resources(kube: KubeAPI, namespace: str) -> None:
    kube.create_pod(namespace, make_pod("p"))
    body = {"spec": {"containers": [{"name": "main", "resources": NEW_RESOURCES}]}}
    with pytest.raises(KubeAPIError) as err:
        kube.patch(kube.pod_path(namespace, "p"), body)
    assert err.value.status == 422


def test_resize_running_pod(kube: KubeAPI, namespace: str, control_plane: LocalControlPlane) -> None:
    node = fake_node(kube, f"{namespace}-n0")
    kube.create_pod(namespace, make_pod("p"))
    with KubeletEmulator(kube) as emulator:
        emulator.defer_resize(namespace, "p")  # keep the status as the emulator first wrote it
        kube.bind_pod(namespace, "p", node)
        running = wait_for(
            lambda: kube.get_pod(namespace, "p"),
            lambda p: p.get("status", {}).get("phase") == "Running",
            what="pod Running",
        )
        cs = container_status(running)
        assert cs is not None
        assert cs["resources"]["requests"]["cpu"] == "100m"

        kube.resize_pod(namespace, "p", {"main": NEW_RESOURCES})
        stored = kube.get_pod(namespace, "p")
        # The apiserver stores the desired resources in the spec ...
        assert container(stored)["resources"] == NEW_RESOURCES
        assert stored["spec"]["nodeName"] == node
        # ... while the actual ones (status) are the kubelet's to change.
        cs = container_status(stored)
        assert cs is not None
        assert cs["resources"]["requests"]["cpu"] == "100m"
        assert cs["allocatedResources"]["cpu"] == "100m"
