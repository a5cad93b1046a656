"""A plugin raising on one pod is contained to that pod: the pod is parked with an event, the
room it was assumed on comes back, the bug is counted, and every other pod is scheduled."""

import asyncio
from collections.abc import Sequence
from typing import ClassVar

import yaml

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.incidents import REASON
from pysched.framework.interfaces import Handle
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SUCCESS, Status, unschedulable
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.queue import DEFAULT_TIMINGS
from pysched.scheduler.scheduler import Scheduler

PROFILE = """
profiles:
  - schedulerName: t
    plugins:
      queueSort: [{name: PrioritySort}]
      filter: [{name: NodeResourcesFit}]
      permit: [{name: Fragile}]
      bind: [{name: DefaultBinder}]
      reconcile: [{name: Fragile}]
"""


class Fragile:
    """Raises on the pods named `bad-*` at Permit (after the pod was assumed) and in reconcile."""

    NAME: ClassVar[str] = "Fragile"
    reconcile_interval = 10.0

    def __init__(self, args: NoArgs, handle: Handle) -> None:
        self.handle = handle
        self.reconciled: list[str] = []

    def permit(self, state: CycleState, pod: PodInfo, node: NodeName) -> tuple[Status, float]:
        if pod.name.startswith("bad"):
            raise OverflowError("cannot convert float infinity to integer")
        return SUCCESS, 0.0

    async def reconcile(self, pods: Sequence[PodInfo]) -> None:
        for pod in pods:
            try:
                if pod.name == "good-0":
                    raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")
                self.reconciled.append(pod.name)
            except Exception as err:
                self.handle.incidents.report("Fragile reconcile", pod, err)
        if len(pods) > 2:
            raise RuntimeError("a bug outside the per-pod guard")


def _scheduler() -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    registry = default_registry()
    registry.register(PluginSpec("Fragile", NoArgs, Fragile, Fragile))
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    scheduler = Scheduler(parse_config(yaml.safe_load(PROFILE), "t", registry), cluster, clock, registry)
    return clock, cluster, scheduler


def test_a_crash_in_the_scheduling_cycle_parks_the_pod_and_frees_its_room() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _scheduler()
        cluster.add_node(node_dict("a", cpu="2", memory="8Gi"))
        await scheduler.start()
        cluster.create_pod(pod_dict("bad-0", cpu="2", scheduler_name="t", priority=10))
        cluster.create_pod(pod_dict("good-0", cpu="2", scheduler_name="t"))
        await scheduler.run_until_idle()
        # The bad pod went first and crashed after it was assumed on the only node: the good
        # pod still got that room.
        assert cluster.pods[PodKey("default/good-0")].node_name == "a"
        assert cluster.pods[PodKey("default/bad-0")].node_name is None
        assert scheduler.queue.where(PodKey("default/bad-0")) == "parked"
        assert scheduler.incidents.counts["scheduling cycle"] == 1
        assert scheduler.incidents.total == 1
        notes = [e.note for e in cluster.events if e.pod == "default/bad-0" and e.reason == "FailedScheduling"]
        assert len(notes) == 1 and "OverflowError" in notes[0] and "parked" in notes[0]
        condition = cluster.conditions[PodKey("default/bad-0")]["PodScheduled"]
        assert condition.reason == REASON
        scheduler.cache.check_consistency()
        # Cluster events do not retry it (no hot loop), the timeout does, once.
        cluster.add_node(node_dict("b", cpu="2", memory="8Gi"))
        await scheduler.run_until_idle()
        assert scheduler.incidents.counts["scheduling cycle"] == 1
        clock.advance(331.0)
        await scheduler.run_until_idle()
        assert scheduler.incidents.counts["scheduling cycle"] == 2
        assert scheduler.cache.pod_node(PodKey("default/bad-0")) is None
        await scheduler.stop()

    asyncio.run(run())


def test_reconcile_bugs_are_contained_per_pod_and_per_plugin() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _scheduler()
        cluster.add_node(node_dict("a", cpu="8", memory="8Gi"))
        await scheduler.start()
        for i in range(3):
            cluster.create_pod(pod_dict(f"good-{i}", cpu="1", scheduler_name="t"))
        await scheduler.run_until_idle()
        clock.advance(11.0)
        await scheduler.run_until_idle()
        fragile = scheduler.frameworks["t"].reconcile[0]
        assert isinstance(fragile, Fragile)
        assert sorted(fragile.reconciled) == ["good-1", "good-2"]  # good-0's bug did not stop them
        assert scheduler.incidents.counts["Fragile reconcile"] == 2  # the pod's, and the plugin's own
        # good-0 runs: it is told of the bug, and its scheduling is not said to have failed.
        events = [e for e in cluster.events if e.pod == "default/good-0" and e.type == "Warning"]
        assert [e.reason for e in events] == [REASON] and "ValueError" in events[0].note
        condition = cluster.conditions.get(PodKey("default/good-0"), {}).get("PodScheduled")
        assert condition is None or condition.status == "True"
        clock.advance(11.0)
        await scheduler.run_until_idle()  # the loop keeps reconciling after a plugin raised
        assert sorted(fragile.reconciled) == ["good-1", "good-1", "good-2", "good-2"]
        await scheduler.stop()

    asyncio.run(run())


def test_a_raising_informer_handler_is_reported_against_its_pod() -> None:
    async def run() -> None:
        _, cluster, scheduler = _scheduler()
        cluster.add_node(node_dict("a", cpu="8", memory="8Gi"))
        await scheduler.start()
        broken = cluster.create_pod(pod_dict("p", cpu="1", scheduler_name="t"))
        assert broken is not None
        scheduler.on_pod_updated(broken, broken.evolve(node_name=NodeName("a"), requests=None))
        assert scheduler.incidents.counts["PodUpdate"] == 1
        cluster.create_pod(pod_dict("q", cpu="1", scheduler_name="t"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/q")].node_name == "a"
        await scheduler.stop()

    asyncio.run(run())


def test_a_step_count_changed_to_a_superscript_while_the_pod_backs_off_is_only_warned_about() -> None:
    """Once a ValueError in the queue's pop() (DeadlineLaxity's sort key) that killed the loop."""

    async def run() -> None:
        registry = default_registry()
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        scheduler = Scheduler(builtin_config(registry).only("pysched"), cluster, clock, registry)
        cluster.add_node(node_dict("a", cpu="2", memory="8Gi"))
        await scheduler.start()
        notes = {"pysched.io/deadline": "1h", "pysched.io/total-steps": "1000"}
        cluster.create_pod(pod_dict("big", cpu="4", annotations=notes, created=clock.now()))
        await scheduler.run_until_idle()
        assert scheduler.queue.where(PodKey("default/big")) == "unschedulable"
        cluster.set_annotations(PodKey("default/big"), {"pysched.io/total-steps": "\u00b2"})
        cluster.add_node(node_dict("b", cpu="8", memory="8Gi"))
        clock.advance(11.0)
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/big")].node_name == "b"
        assert scheduler.incidents.total == 0
        warned = [e.note for e in cluster.events if e.reason == "InvalidAnnotation"]
        assert warned == ["pysched.io/total-steps: '\u00b2' is not a positive integer such as 10000; ignored"]
        await scheduler.stop()

    asyncio.run(run())


class Stubborn:
    """Rejects every pod at PreFilter; says it still would, but raises while saying so."""

    NAME: ClassVar[str] = "Stubborn"
    LEAVES_WAITING: ClassVar[bool] = True  # asked by the periodic retry too

    def __init__(self, args: NoArgs, handle: Handle) -> None:
        self.asked = 0

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        return unschedulable("never here", plugin=self.NAME)

    def still_rejects(self, pod: PodInfo) -> bool:
        self.asked += 1
        raise KeyError("a bug in the check")


async def _one_pod_rejected_by(plugin: type[Stubborn]) -> tuple[VirtualClock, Scheduler]:
    """A scheduler whose profile has `plugin` at PreFilter, with one pod it has rejected once."""
    registry = default_registry()
    registry.register(PluginSpec(plugin.NAME, NoArgs, plugin, plugin))
    registry.register(PluginSpec("Fragile", NoArgs, Fragile, Fragile))
    profile = PROFILE.replace("      filter:", f"      preFilter: [{{name: {plugin.NAME}}}]\n      filter:")
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    scheduler = Scheduler(parse_config(yaml.safe_load(profile), "t", registry), cluster, clock, registry)
    cluster.add_node(node_dict("a", cpu="2", memory="8Gi"))
    await scheduler.start()
    cluster.create_pod(pod_dict("p", cpu="1", scheduler_name="t"))
    await scheduler.run_until_idle()
    assert scheduler.stats.unschedulable == 1
    return clock, scheduler


def test_a_raising_rejection_check_is_reported_and_the_pod_retried_as_any_other() -> None:
    async def run() -> None:
        clock, scheduler = await _one_pod_rejected_by(Stubborn)
        clock.advance(331.0)
        await scheduler.run_until_idle()
        assert scheduler.incidents.counts["still_rejects"] == 1
        assert scheduler.stats.unschedulable == 2
        await scheduler.stop()

    asyncio.run(run())


class Firm(Stubborn):
    """Says it still would reject, and counts the times it is asked."""

    NAME: ClassVar[str] = "Firm"

    def still_rejects(self, pod: PodInfo) -> bool:
        self.asked += 1
        return True


def test_a_pod_its_rejectors_still_reject_is_asked_about_once_per_retry_period() -> None:
    async def run() -> None:
        clock, scheduler = await _one_pod_rejected_by(Firm)
        for _ in range(120):  # an hour, in steps of the 30 s flush
            clock.advance(30.0)
            await scheduler.run_until_idle()
        firm = scheduler.frameworks["t"].plugins["Firm"]
        assert isinstance(firm, Firm)
        assert 10 <= firm.asked <= 12  # every 5 minutes, not every 30 s once 5 minutes have passed
        assert scheduler.stats.unschedulable == 1
        await scheduler.stop()

    asyncio.run(run())


class AtPopOnly(Firm):
    """Says it still would reject, but may not leave a pod waiting at the periodic retry."""

    NAME: ClassVar[str] = "AtPopOnly"
    LEAVES_WAITING: ClassVar[bool] = False


def test_the_periodic_retry_lets_a_pod_out_and_gives_it_a_whole_cycle_once_its_reasons_are_old() -> None:
    async def run() -> None:
        clock, scheduler = await _one_pod_rejected_by(AtPopOnly)
        diagnosed = clock.now()
        check = scheduler.frameworks["t"].plugins["AtPopOnly"]
        assert isinstance(check, AtPopOnly)
        clock.advance(331.0)
        await scheduler.run_until_idle()
        assert scheduler.queue.incoming[("active", "UnschedulableTimeout")] == 1  # let out, as kube-scheduler
        assert check.asked == 1  # not at the retry (it may not leave pods waiting), at the pop
        assert scheduler.stats.unschedulable == 1  # refused without a cycle: its reasons are fresh
        rediagnose = DEFAULT_TIMINGS.rediagnose_interval
        while scheduler.stats.unschedulable == 1 and clock.now() < diagnosed + 2 * rediagnose:
            clock.advance(30.0)
            await scheduler.run_until_idle()
        assert scheduler.stats.unschedulable == 2  # a whole cycle brought its reasons up to date
        assert diagnosed + rediagnose <= clock.now() <= diagnosed + rediagnose + 330.0
        asked = check.asked
        clock.advance(331.0)
        await scheduler.run_until_idle()
        assert check.asked == asked + 1 and scheduler.stats.unschedulable == 2  # fresh again
        await scheduler.stop()

    asyncio.run(run())
