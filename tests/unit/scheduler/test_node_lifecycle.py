"""Nodes that go and come back, as kube-scheduler's cache follows them."""

from __future__ import annotations

import asyncio

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler


def _world() -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    return clock, cluster, Scheduler(builtin_config(registry).only("default"), cluster, clock, registry)


def test_a_pod_deleted_while_its_node_was_gone_does_not_count_when_the_node_returns() -> None:
    """A node replaced under its name (a new VM, PodGC deleting its pods meanwhile) comes back
    empty: the deleted pod's room was charged to it for good, and nothing fitted there again."""

    async def run() -> tuple[SimulatedCluster, Scheduler]:
        clock, cluster, scheduler = _world()
        cluster.add_node(node_dict("n1", cpu="4", memory="8Gi"))
        await scheduler.start()
        cluster.create_pod(pod_dict("old", cpu="3", memory="1Gi", scheduler_name="default"))
        await scheduler.run_until_idle()
        cluster.delete_node(NodeName("n1"))
        cluster.delete_pod(PodKey("default/old"))
        cluster.add_node(node_dict("n1", cpu="4", memory="8Gi"))
        cluster.create_pod(pod_dict("new", cpu="3", memory="1Gi", scheduler_name="default"))
        clock.advance(1.0)
        await scheduler.run_until_idle()
        await scheduler.stop()
        return cluster, scheduler

    cluster, scheduler = asyncio.run(run())
    assert [p.key for p in scheduler.cache.pods_on(NodeName("n1"))] == [PodKey("default/new")]
    assert cluster.pods[PodKey("default/new")].node_name == "n1"
    scheduler.cache.check_consistency()
