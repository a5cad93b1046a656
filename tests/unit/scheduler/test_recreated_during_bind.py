"""A pod deleted and recreated under its name while its bind is in flight: the old bind's failure
undoes the old pod's assumption only. The new pod keeps its room in the cache and its own place
in the binding pipeline (kube-scheduler's cache keys pods by uid)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import ClassVar

import yaml

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey, PodUID
from pysched.api.objects import PodInfo
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SUCCESS, Status
from pysched.plugins import default_registry
from pysched.scheduler.scheduler import Scheduler

PROFILE = """
profiles:
  - schedulerName: s
    plugins:
      queueSort: [{name: PrioritySort}]
      filter: [{name: NodeResourcesFit}]
      preBind: [{name: HeldBinds}]
      bind: [{name: DefaultBinder}]
"""


@dataclass(slots=True)
class HeldBinds:
    """Holds the binding cycle of a pod whose uid it has an event for (a slow API)."""

    NAME: ClassVar[str] = "HeldBinds"
    handle: Handle
    held: dict[str, asyncio.Event] = field(default_factory=dict)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        gate = self.held.get(pod.uid)
        if gate is not None:
            await gate.wait()
        return SUCCESS


def test_the_old_binds_failure_leaves_the_recreated_pods_assumption_alone() -> None:
    made: list[HeldBinds] = []

    def factory(args: NoArgs, handle: Handle) -> HeldBinds:
        made.append(HeldBinds(handle))
        return made[-1]

    registry = default_registry()
    registry.register(PluginSpec("HeldBinds", NoArgs, factory, HeldBinds))
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    scheduler = Scheduler(parse_config(yaml.safe_load(PROFILE), "t", registry), cluster, clock, registry)
    cluster.add_node(node_dict("n", cpu="2", memory="8Gi"))
    key = PodKey("default/p")

    async def settle() -> None:
        for _ in range(20):
            while scheduler.schedule_one():
                pass
            await asyncio.sleep(0)

    async def run() -> None:
        await scheduler.start()
        (plugin,) = made
        old_gate, new_gate = plugin.held["first"], plugin.held["second"] = asyncio.Event(), asyncio.Event()
        cluster.create_pod(pod_dict("p", cpu="1", memory="1Gi", scheduler_name="s", created=clock.now(), uid="first"))
        await settle()  # the old p is assumed on n, its bind held
        cluster.delete_pod(key)
        cluster.create_pod(pod_dict("p", cpu="1", memory="1Gi", scheduler_name="s", created=clock.now(), uid="second"))
        await settle()  # the new p is assumed on n, its bind held too
        assert scheduler.cache.is_assumed(key, PodUID("second"))
        old_gate.set()
        await settle()  # the old p's bind fails: that pod no longer exists
        assert scheduler.cache.is_assumed(key, PodUID("second")), "the new pod's room was given away"
        assert scheduler.queue.where(key) == "in-flight"  # not queued again beside its own bind
        cluster.create_pod(pod_dict("fill", cpu="2", memory="1Gi", scheduler_name="s", created=clock.now()))
        await settle()
        new_gate.set()
        clock.advance(30.0)
        await scheduler.run_until_idle()
        await scheduler.stop()

    asyncio.run(run())
    assert cluster.pods[key].node_name == "n" and cluster.pods[key].uid == "second"
    assert cluster.pods[PodKey("default/fill")].node_name is None  # 1 + 2 CPUs do not fit on 2
    scheduler.cache.check_consistency()
