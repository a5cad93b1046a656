"""LiveCluster in-process against the real kube-apiserver: informer deliveries and write results."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from pysched.api.containers import ContainerResize
from pysched.api.ids import JobKey, NodeName, PodUID, pod_key
from pysched.api.objects import NodeInfo, PodInfo
from pysched.api.volumes import Storage
from pysched.backend.live.client import connect
from pysched.backend.live.cluster import LiveCluster, LiveOptions
from pysched.backend.live.kubeclient import STRATEGIC_MERGE_PATCH
from pysched.framework.cluster import PodCondition
from pysched.framework.events import EventKind
from pysched.framework.status import Code
from pysched.testing import KubeAPI, LocalControlPlane
from pysched.testing.helpers import condition, container, eventually, fake_node, make_pod

pytestmark = pytest.mark.integration


class Listener:
    def __init__(self) -> None:
        self.pods: dict[str, PodInfo] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self.node_updates = 0

    def on_node_added(self, node: NodeInfo) -> None:
        self.nodes[node.name] = node

    def on_node_updated(self, old: NodeInfo, new: NodeInfo) -> None:
        self.nodes[new.name] = new
        self.node_updates += 1

    def on_node_deleted(self, node: NodeInfo) -> None:
        self.nodes.pop(node.name, None)

    def on_pod_added(self, pod: PodInfo) -> None:
        self.pods[pod.key] = pod

    def on_pod_updated(self, old: PodInfo, new: PodInfo) -> None:
        self.pods[new.key] = new

    def on_pod_deleted(self, pod: PodInfo) -> None:
        self.pods.pop(pod.key, None)

    def on_invalid_pod(self, raw: Mapping[str, object], problem: str) -> None:
        raise AssertionError(problem)

    def on_storage_changed(self, kind: EventKind, old: Storage | None, new: Storage | None) -> None:
        pass  # these tests watch pods and nodes only

    def on_job_minimum_changed(self, job: JobKey) -> None:
        pass


async def test_live_cluster_reads_and_writes(control_plane: LocalControlPlane, kube: KubeAPI, namespace: str) -> None:
    name = f"live-{namespace}"
    node = await asyncio.to_thread(fake_node, kube, f"{namespace}-n0")
    client = await connect(str(control_plane.kubeconfig_path), qps=100, burst=100)
    backend = LiveCluster(client, LiveOptions(scheduler_names=frozenset({name})))
    listener = Listener()
    try:
        await backend.start(listener)
        assert node in listener.nodes
        await asyncio.to_thread(kube.create_pod, namespace, make_pod("ours", scheduler=name))
        await asyncio.to_thread(kube.create_pod, namespace, make_pod("theirs", scheduler="someone-else"))
        key = f"{namespace}/ours"
        await eventually(lambda: key in listener.pods, "pod delivered")
        assert f"{namespace}/theirs" not in listener.pods  # another scheduler's pending pod is not parsed
        pod = listener.pods[key]

        status = await backend.resize(pod, {"main": ContainerResize({"cpu": "150m"})})
        assert status.ok, status
        await eventually(lambda: listener.pods[key].requests != pod.requests, "resize delivered")
        stale = await backend.bind(pod, NodeName(node))  # the requests changed since `pod` was read
        assert stale.code is Code.ERROR and "resized" in stale.message()
        pod = listener.pods[key]

        await backend.patch_pod_conditions(pod, PodCondition("PodScheduled", "False", "Unschedulable", "0/1 nodes"))
        stored = await asyncio.to_thread(kube.get_pod, namespace, "ours")
        cond = condition(stored, "PodScheduled")
        assert cond is not None and cond["reason"] == "Unschedulable"
        assert container(stored)["resources"]["requests"]["cpu"] == "150m"

        assert (await backend.bind(pod, NodeName(node))).ok
        await eventually(lambda: listener.pods[key].node_name == node, "bound pod delivered")
        again = await backend.bind(pod, NodeName(node))
        # 409: a Status, not an exception, in the API's words (kube-scheduler reports them as they are)
        assert again.code is Code.ERROR and "already assigned" in again.message()
        gone = pod.evolve(name="missing", key=f"{namespace}/missing")
        assert (await backend.bind(gone, NodeName(node))).code is Code.UNSCHEDULABLE  # 404

        await asyncio.to_thread(kube.force_delete_pod, namespace, "ours")
        await eventually(lambda: key not in listener.pods, "deletion delivered")
        assert backend.binds == {"ok": 1, "stale": 1, "409": 1, "404": 1}

        backend.writable = lambda: False  # a follower: no call reaches the API
        assert (await backend.bind(pod, NodeName(node))).code is Code.ERROR
        assert backend.binds["refused"] == 1
    finally:
        await backend.stop()
        await client.close()
        await asyncio.to_thread(kube.delete, f"/api/v1/nodes/{node}")


async def test_node_heartbeats_are_not_node_updates(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    node = await asyncio.to_thread(fake_node, kube, f"{namespace}-hb")
    client = await connect(str(control_plane.kubeconfig_path), qps=100, burst=100)
    backend = LiveCluster(client)
    listener = Listener()
    path = f"/api/v1/nodes/{node}/status"
    try:
        await backend.start(listener)
        beat: dict[str, Any] = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Beat"}]}}
        before = listener.node_updates  # controllers of the plane may have touched the node already
        beaten = await asyncio.to_thread(kube.patch, path, beat, content_type=STRATEGIC_MERGE_PATCH)
        version = beaten["metadata"]["resourceVersion"]
        # The backend has seen the heartbeat (or something later) once its copy is at least that new.
        await eventually(lambda: int(backend.nodes[node].resource_version) >= int(version), "heartbeat seen")
        assert listener.node_updates == before
        labels = {"metadata": {"labels": {"heartbeat-test": "yes"}}}
        await asyncio.to_thread(kube.patch, f"/api/v1/nodes/{node}", labels)
        await eventually(lambda: listener.nodes[node].labels.get("heartbeat-test") == "yes", "label delivered")
        assert listener.node_updates > before
    finally:
        await backend.stop()
        await client.close()
        await asyncio.to_thread(kube.delete, f"/api/v1/nodes/{node}")


async def test_repeated_events_become_one_series(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    client = await connect(str(control_plane.kubeconfig_path), qps=100, burst=100)
    backend = LiveCluster(client, LiveOptions(event_patch_interval=0.2))
    listener = Listener()
    path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    try:
        await backend.start(listener)
        created = await asyncio.to_thread(kube.create_pod, namespace, make_pod("p", scheduler="pysched"))
        pod = PodInfo(
            key=pod_key(namespace, "p"),
            uid=PodUID(created["metadata"]["uid"]),
            namespace=namespace,
            name="p",
            scheduler_name="pysched",
            priority=0,
            created=0.0,
            requests={},
        )
        for _ in range(3):
            await backend.emit_event(pod, "Warning", "FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu.")

        def series_count() -> int:
            items = kube.get(path).get("items", [])
            return int((items[0].get("series") or {}).get("count", 1)) if len(items) == 1 else 0

        for _ in range(100):
            if await asyncio.to_thread(series_count) == 3:
                break
            await asyncio.sleep(0.05)
        assert await asyncio.to_thread(series_count) == 3
        assert backend.events.created == 1
    finally:
        await backend.stop()
        await client.close()
