"""An in-place resize of a running pod through the real apiserver .

The live backend's `resize` writes `pods/{name}/resize` with limits scaled with requests; the
kubelet emulator actuates it (container status resources); meanwhile the scheduler's cache accounts
the pod at the larger of its desired and actuated requests, then at the new size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from pysched.api.containers import cpu_resize
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.backend.live.client import connect
from pysched.backend.live.cluster import LiveCluster, LiveOptions
from pysched.framework.clock import WallClock
from pysched.framework.config import parse_config
from pysched.plugins import default_registry
from pysched.scheduler.scheduler import Scheduler
from pysched.testing import KubeAPI, LocalControlPlane, wait_for
from pysched.testing.emulator import KubeletEmulator
from pysched.testing.helpers import container_status, eventually, fake_node, make_pod
from pysched.testing.kube import JSON

pytestmark = pytest.mark.integration


def cached_cpu(scheduler: Scheduler, node: str) -> int:
    """Millicores the scheduler's cache counts as requested on the node."""
    nodes = scheduler.cache.nodes
    return int(nodes.requested[nodes.row[NodeName(node)], nodes.column["cpu"]])


def cached_pod(scheduler: Scheduler, node: str, key: PodKey) -> PodInfo | None:
    return next((p for p in scheduler.cache.pods_on(NodeName(node)) if p.key == key), None)


def spec_cpu(pod: PodInfo | None) -> str | None:
    if pod is None:
        return None
    cpu: str = pod.raw["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    return cpu


async def pod_until(kube: KubeAPI, namespace: str, predicate: Callable[[JSON], bool], what: str) -> JSON:
    found: JSON = await asyncio.to_thread(wait_for, lambda: kube.get_pod(namespace, "job"), predicate, what=what)
    return found


def actual(pod: JSON) -> JSON:
    resources: JSON = (container_status(pod) or {}).get("resources") or {}
    return resources


async def test_running_pod_resized_through_the_apiserver(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, emulator: KubeletEmulator
) -> None:
    name = f"resize-{namespace}"
    node = await asyncio.to_thread(fake_node, kube, f"{namespace}-n0")
    raw = {
        "profiles": [
            {
                "schedulerName": name,
                "plugins": {
                    "queueSort": [{"name": "PrioritySort"}],
                    "filter": [{"name": "NodeAffinity"}, {"name": "NodeResourcesFit"}],
                    "bind": [{"name": "DefaultBinder"}],
                },
            }
        ]
    }
    registry = default_registry()
    client = await connect(str(control_plane.kubeconfig_path), qps=100, burst=100)
    backend = LiveCluster(client, LiveOptions(scheduler_names=frozenset({name})))
    scheduler = Scheduler(parse_config(raw, "test", registry), backend, WallClock(), registry)
    stop = asyncio.Event()
    key = PodKey(f"{namespace}/job")
    # Guaranteed: requests == limits, which a resize must keep (else the apiserver refuses it).
    pod_raw = make_pod("job", cpu="500m", cpu_limit="500m", memory="64Mi", memory_limit="64Mi", scheduler=name)
    # The control plane is shared: other tests' fake nodes exist too, so pin the pod to ours.
    pod_raw["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            }
        }
    }
    try:
        await scheduler.start()
        loop = asyncio.create_task(scheduler.run(stop, idle_poll=0.05))
        await asyncio.to_thread(kube.create_pod, namespace, pod_raw)
        running = await pod_until(kube, namespace, lambda p: actual(p) != {}, "pod Running")
        assert running["spec"]["nodeName"] == node
        await eventually(lambda: cached_pod(scheduler, node, key) is not None, "bound pod in the cache")
        assert cached_cpu(scheduler, node) == 500

        async def resize(cpu_milli: int, cpu: str) -> None:
            """Resize with actuation held back, check the interim accounting, then let it through."""
            emulator.defer_resize(namespace, "job")
            pod = cached_pod(scheduler, node, key)
            assert pod is not None
            before = cached_cpu(scheduler, node)
            status = await backend.resize(pod, {"main": cpu_resize(pod, "main", cpu_milli)})
            assert status.ok, status
            await eventually(lambda: spec_cpu(cached_pod(scheduler, node, key)) == cpu, "resize delivered")
            stored = await asyncio.to_thread(kube.get_pod, namespace, "job")
            resources = stored["spec"]["containers"][0]["resources"]
            assert resources["requests"]["cpu"] == resources["limits"]["cpu"] == cpu  # still Guaranteed
            assert stored["status"]["qosClass"] == "Guaranteed"
            assert actual(stored)["requests"]["cpu"] != cpu  # deferred: not actuated yet
            assert cached_cpu(scheduler, node) == max(before, cpu_milli)

            emulator.allow_resize(namespace, "job")
            done = await pod_until(
                kube, namespace, lambda p: actual(p).get("requests", {}).get("cpu") == cpu, "actuated"
            )
            assert actual(done)["limits"]["cpu"] == cpu
            assert (container_status(done) or {})["allocatedResources"]["cpu"] == cpu
            await eventually(lambda: cached_cpu(scheduler, node) == cpu_milli, "actuated size accounted")

        await resize(1500, "1500m")  # up: counted at the new size at once
        await resize(200, "200m")  # down: counted at the old size until the kubelet shrank it

        # A resize decided for a pod that was since deleted and recreated under its name (a
        # Kubeflow or StatefulSet-style worker) is not applied to the new one.
        stale = cached_pod(scheduler, node, key)
        assert stale is not None
        await asyncio.to_thread(kube.force_delete_pod, namespace, "job")
        await asyncio.to_thread(kube.create_pod, namespace, pod_raw)
        status = await backend.resize(stale, {"main": cpu_resize(stale, "main", 1000)})
        assert not status.ok and "no longer exists" in status.message(), status
        stored = await asyncio.to_thread(kube.get_pod, namespace, "job")
        assert stored["metadata"]["uid"] != stale.uid
        assert stored["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"
        stop.set()
        await loop
    finally:
        stop.set()
        await scheduler.stop()
        await backend.stop()
        await client.close()
        await asyncio.to_thread(kube.force_delete_pod, namespace, "job")
        await asyncio.to_thread(kube.delete, f"/api/v1/nodes/{node}")
