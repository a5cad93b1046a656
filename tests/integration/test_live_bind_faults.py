"""Binds that meet a fault leave no assumption behind.

The scheduler runs in-process on the live backend; its client holds chosen pods' binding POSTs
until the test has made the fault happen: the pod deleted during its bind, bound by another
scheduler during its bind, or a bind slower than everything else. Afterwards every node's
requested resources in the scheduler's cache equal what the API's pods request, and pods sized
to fill exactly what is left all bind while one more is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from pysched.api.ids import NodeName
from pysched.api.resources import CPU, pod_requests
from pysched.backend.live.client import connect
from pysched.backend.live.cluster import LiveCluster, LiveOptions
from pysched.backend.live.kubeclient import JSON, ApiResponse, KubeClient
from pysched.framework.clock import WallClock
from pysched.framework.config import parse_config
from pysched.plugins import default_registry
from pysched.scheduler.scheduler import Scheduler
from pysched.testing import KubeAPI, LocalControlPlane
from pysched.testing.helpers import eventually
from pysched.testing.scheduler import namespace_nodes, pod_for

pytestmark = pytest.mark.integration

NODE_CPUS = 4


class HeldBinds:
    """A KubeClient whose binding POSTs for the pods named in `held` wait until released."""

    def __init__(self, inner: KubeClient, held: set[str]) -> None:
        self.inner = inner
        self.arrived = {name: asyncio.Event() for name in held}
        self.release = {name: asyncio.Event() for name in held}

    async def request(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
        if method == "POST" and path.endswith("/binding"):
            name = path.rsplit("/", 2)[-2]
            if name in self.release:
                self.arrived[name].set()
                await self.release[name].wait()
        return await self.inner.request(method, path, **kwargs)

    def watch(self, path: str, query: Mapping[str, str], inactivity: float) -> AsyncIterator[JSON]:
        return self.inner.watch(path, query, inactivity)

    async def close(self) -> None:
        await self.inner.close()


def profile(name: str) -> dict[str, Any]:
    return {
        "profiles": [
            {
                "schedulerName": name,
                "plugins": {
                    "queueSort": [{"name": "PrioritySort"}],
                    "filter": [{"name": "NodeAffinity"}, {"name": "NodeResourcesFit"}],
                    "score": [{"name": "LeastAllocated", "weight": 1}],
                    "bind": [{"name": "DefaultBinder"}],
                },
            }
        ]
    }


def api_requested(kube: KubeAPI, namespace: str, nodes: list[str]) -> dict[str, int]:
    """Millicores the API's pods request on each node."""
    used = dict.fromkeys(nodes, 0)
    for pod in kube.get("/api/v1/pods")["items"]:
        node = pod["spec"].get("nodeName")
        if node in used and pod["status"].get("phase") not in ("Succeeded", "Failed"):
            used[node] += pod_requests(pod).get(CPU, 0)
    return used


async def test_deleted_stolen_and_slow_binds_leave_the_cache_equal_to_the_api(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    name = f"faults-{namespace}"
    with namespace_nodes(kube, namespace, 2, cpu=str(NODE_CPUS)) as nodes:  # created before the scheduler starts
        client = await connect(str(control_plane.kubeconfig_path), qps=100, burst=100)
        held = HeldBinds(client, {"deleted", "stolen", "slow"})
        backend = LiveCluster(held, LiveOptions(scheduler_names=frozenset({name})))
        registry = default_registry()
        scheduler = Scheduler(parse_config(profile(name), "test", registry), backend, WallClock(), registry)
        stop = asyncio.Event()
        try:
            await scheduler.start()
            loop = asyncio.create_task(scheduler.run(stop, idle_poll=0.05))
            for pod_name in ("deleted", "stolen", "slow", "plain"):
                await asyncio.to_thread(kube.create_pod, namespace, pod_for(pod_name, name, namespace, "1"))
            for event in held.arrived.values():
                await asyncio.wait_for(event.wait(), 30)

            # The faults, while the three binds are in flight (assumed in the cache).
            await asyncio.to_thread(kube.force_delete_pod, namespace, "deleted")
            await asyncio.to_thread(kube.bind_pod, namespace, "stolen", nodes[1])  # another scheduler won
            held.release["deleted"].set()
            held.release["stolen"].set()
            await eventually(lambda: backend.binds["404"] + backend.binds["409"] == 2, "both binds refused")
            held.release["slow"].set()
            await eventually(lambda: backend.binds["ok"] == 2, "the slow and the plain pod bound")

            # The cache is the API: per node, then by filling exactly what is left.
            table = scheduler.cache.nodes

            def cache_requested() -> dict[str, int]:
                return {
                    n: table.allocatable_and_free(NodeName(n), CPU)[0] - table.allocatable_and_free(NodeName(n), CPU)[1]
                    for n in nodes
                }

            expected = await asyncio.to_thread(api_requested, kube, namespace, nodes)
            await eventually(lambda: cache_requested() == expected, f"cache {cache_requested()} == API {expected}")
            assert sum(expected.values()) == 3000  # stolen, slow, plain
            free = (2 * NODE_CPUS * 1000 - sum(expected.values())) // 1000
            for i in range(free + 1):
                await asyncio.to_thread(kube.create_pod, namespace, pod_for(f"fill-{i}", name, namespace, "1"))
            await eventually(lambda: backend.binds["ok"] == 2 + free, f"{free} filling pods bound")
            await eventually(lambda: scheduler.stats.unschedulable >= 1, "the extra pod refused")
            assert backend.binds["ok"] == 2 + free
            assert await asyncio.to_thread(api_requested, kube, namespace, nodes) == dict.fromkeys(
                nodes, NODE_CPUS * 1000
            )
            scheduler.cache.check_consistency()
            stop.set()
            await loop
        finally:
            stop.set()
            await scheduler.stop()
            await backend.stop()
            await client.close()
