"""A resize during the binding cycle never binds stale requests.

PreBind may resize the pending pod (Autoscale sizes a job before it binds), and anyone else may
too. Right before the bind the scheduler re-reads the pod: new requests that still fit the chosen
node are counted there; requests that no longer fit fail the cycle, and the retry places the pod
as it is now.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import ClassVar

import yaml

from pysched.api.builders import node_dict, pod_dict
from pysched.api.containers import cpu_resize
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo, pod_from_dict
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
      score: [{name: MostAllocated}]
      preBind: [{name: GrowOnSmall}]
      bind: [{name: DefaultBinder}]
"""


@dataclass(slots=True)
class GrowOnSmall:
    """Resizes the pending pod to `cpu_milli` whenever it is about to bind to node `small`."""

    NAME: ClassVar[str] = "GrowOnSmall"
    handle: Handle
    cpu_milli: int = 0
    seen: list[tuple[NodeName, int]] = field(default_factory=list)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        self.seen.append((node, pod.requests["cpu"]))
        if node == "small":
            return await self.handle.cluster.resize(pod, {"main": cpu_resize(pod, "main", self.cpu_milli)})
        return SUCCESS


def _run(cpu_milli: int) -> tuple[SimulatedCluster, Scheduler, GrowOnSmall]:
    made: list[GrowOnSmall] = []

    def factory(args: NoArgs, handle: Handle) -> GrowOnSmall:
        made.append(GrowOnSmall(handle, cpu_milli))
        return made[-1]

    registry = default_registry()
    registry.register(PluginSpec("GrowOnSmall", NoArgs, factory, GrowOnSmall))
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    scheduler = Scheduler(parse_config(yaml.safe_load(PROFILE), "t", registry), cluster, clock, registry)
    cluster.add_node(node_dict("small", cpu="4", memory="8Gi"))
    cluster.add_node(node_dict("big", cpu="16", memory="8Gi"))

    async def run() -> None:
        await scheduler.start()
        cluster.create_pod(pod_dict("p", cpu="1", memory="1Gi", scheduler_name="s", created=clock.now()))
        for _ in range(5):  # the retry waits out its backoff on the virtual clock
            await scheduler.run_until_idle()
            clock.advance(2.0)
        await scheduler.stop()

    asyncio.run(run())
    return cluster, scheduler, made[0]


def requested_cpu(scheduler: Scheduler, node: str) -> int:
    nodes = scheduler.cache.nodes
    return int(nodes.requested[nodes.row[NodeName(node)], nodes.column["cpu"]])


def test_a_resize_that_no_longer_fits_the_node_is_placed_again_not_bound_stale() -> None:
    cluster, scheduler, plugin = _run(6000)  # 6 CPUs cannot go on the 4-CPU node picked for 1 CPU
    pod = cluster.pods[PodKey("default/p")]
    assert plugin.seen[0] == ("small", 1000)  # MostAllocated picked the small node for 1 CPU
    assert pod.node_name == "big" and pod.requests["cpu"] == 6000
    assert plugin.seen[-1] == ("big", 6000)  # the retry scheduled what the pod asks for now
    assert requested_cpu(scheduler, "small") == 0 and requested_cpu(scheduler, "big") == 6000
    scheduler.cache.check_consistency()


def test_a_resize_that_still_fits_binds_on_the_same_node_counted_at_the_new_size() -> None:
    cluster, scheduler, plugin = _run(3000)
    pod = cluster.pods[PodKey("default/p")]
    assert pod.node_name == "small" and pod.requests["cpu"] == 3000 and len(plugin.seen) == 1
    assert requested_cpu(scheduler, "small") == 3000 and requested_cpu(scheduler, "big") == 0
    assert not any(e.reason == "FailedScheduling" for e in cluster.events)


@dataclass(slots=True)
class SentNotSeen:
    """A binder whose API call succeeded but whose binding the informer has not delivered yet."""

    NAME: ClassVar[str] = "SentNotSeen"
    handle: Handle

    async def bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        return SUCCESS


def _sent_not_seen() -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    """A one-node cluster whose binder never lets the informer see the binding."""
    registry = default_registry()
    registry.register(PluginSpec("SentNotSeen", NoArgs, lambda args, handle: SentNotSeen(handle), SentNotSeen))
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    profile = PROFILE.replace("      preBind: [{name: GrowOnSmall}]\n", "").replace("DefaultBinder", "SentNotSeen")
    scheduler = Scheduler(parse_config(yaml.safe_load(profile), "t", registry), cluster, clock, registry)
    cluster.add_node(node_dict("big", cpu="16", memory="8Gi"))
    return clock, cluster, scheduler


def test_an_update_racing_ahead_of_the_binding_does_not_schedule_the_pod_twice() -> None:
    """A pending update (a label, a condition) that the informer delivers after the bind was sent
    but before the binding itself: the pod is assumed and out of the queue, and must stay out."""
    clock, cluster, scheduler = _sent_not_seen()
    key = PodKey("default/p")

    async def run() -> None:
        await scheduler.start()
        cluster.create_pod(pod_dict("p", cpu="1", memory="1Gi", scheduler_name="s", created=clock.now()))
        await scheduler.run_until_idle()
        assert scheduler.cache.is_assumed(key) and key not in scheduler.queue
        cluster.set_annotations(key, {"example.com/touched": "yes"})
        clock.advance(2.0)
        await scheduler.run_until_idle()
        assert key not in scheduler.queue
        assert scheduler.incidents.total == 0
        assert scheduler.stats.scheduled == 1
        await scheduler.stop()

    asyncio.run(run())


@dataclass(slots=True)
class WaitsForever:
    """A PreBind that waits for something that never comes (volumes no provisioner binds)."""

    NAME: ClassVar[str] = "WaitsForever"
    handle: Handle
    cancelled: list[str] = field(default_factory=list)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(pod.name)
            raise
        return SUCCESS


def test_stopping_cancels_a_prebind_that_still_waits_after_the_grace() -> None:
    made: list[WaitsForever] = []

    def factory(args: NoArgs, handle: Handle) -> WaitsForever:
        made.append(WaitsForever(handle))
        return made[-1]

    registry = default_registry()
    registry.register(PluginSpec("WaitsForever", NoArgs, factory, WaitsForever))
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    profile = PROFILE.replace("GrowOnSmall", "WaitsForever")
    scheduler = Scheduler(
        parse_config(yaml.safe_load(profile), "t", registry), cluster, clock, registry, stop_grace=0.0
    )
    cluster.add_node(node_dict("big", cpu="16", memory="8Gi"))

    async def run() -> None:
        await scheduler.start()
        cluster.create_pod(pod_dict("p", cpu="1", memory="1Gi", scheduler_name="s", created=clock.now()))
        assert scheduler.schedule_one()
        await asyncio.sleep(0)  # the bind worker enters PreBind
        await scheduler.stop()  # returns: the waiting PreBind is cancelled, not awaited

    asyncio.run(run())
    assert made[0].cancelled == ["p"]
    assert cluster.pods[PodKey("default/p")].node_name is None


def test_a_pod_recreated_under_the_name_of_one_whose_binding_is_unseen_is_queued() -> None:
    """The assumed-pod check is for the same pod: a new pod (another uid) under the name is not
    mistaken for the one bound."""
    _, cluster, scheduler = _sent_not_seen()
    key = PodKey("default/p")

    async def run() -> None:
        await scheduler.start()
        first = cluster.create_pod(pod_dict("p", cpu="1", memory="1Gi", scheduler_name="s", uid="u1"))
        await scheduler.run_until_idle()
        assert first is not None and scheduler.cache.is_assumed(key, first.uid)
        again = pod_from_dict(pod_dict("p", cpu="1", memory="1Gi", scheduler_name="s", uid="u2"))
        scheduler.on_pod_added(again)  # as an informer would deliver a pod it had not seen
        assert scheduler.queue.get(key) is not None
        await scheduler.stop()

    asyncio.run(run())
