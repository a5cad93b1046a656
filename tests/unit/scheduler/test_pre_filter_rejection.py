"""A pod rejected at PreFilter goes on to PostFilter, as kube-scheduler's FitError does: every
node carries the PreFilter status, preemption tries only those it could lift, and a gang's
siblings held at Permit give their room back (Coscheduling's PostFilter)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest
import yaml

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS
from pysched.api.objects import PodInfo
from pysched.api.times import format_rfc3339
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import SchedulerConfig, parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import EventKind, EventRegistration
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import NoArgs, PluginSpec, Registry
from pysched.framework.status import SUCCESS, Status, unresolvable, unschedulable
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config, builtin_profiles
from pysched.scheduler.scheduler import Scheduler

T0 = 1000.0
BUILTIN = [str(profile["schedulerName"]) for profile in builtin_profiles()]
NOT_HELPFUL = "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."


def _world(config: SchedulerConfig, registry: Registry, cpu: str = "8") -> tuple[SimulatedCluster, Scheduler]:
    clock = VirtualClock(T0)
    cluster = SimulatedCluster(clock)
    cluster.add_node(node_dict("a", cpu=cpu, memory="16Gi"))
    return cluster, Scheduler(config, cluster, clock, registry)


def _builtin(profile: str, cpu: str = "8") -> tuple[SimulatedCluster, Scheduler]:
    registry = default_registry()
    return _world(builtin_config(registry).only(profile), registry, cpu)


def _member(profile: str, index: int, size: int, *, priority: int = 0, cpu: str = "2") -> dict[str, Any]:
    return pod_dict(
        f"g-{index}",
        cpu=cpu,
        scheduler_name=profile,
        priority=priority,
        labels={JOB_LABEL: "g"},
        annotations={MIN_MEMBERS: str(size)},
    )


def _running(name: str, profile: str, *, priority: int, cpu: str, **kw: Any) -> dict[str, Any]:
    raw = pod_dict(name, cpu=cpu, scheduler_name=profile, priority=priority, node_name="a", **kw)
    raw["status"] = {"phase": "Running", "startTime": format_rfc3339(T0 - 100)}
    return raw


def _failures(cluster: SimulatedCluster, pod: str) -> list[str]:
    return [e.note for e in cluster.events if e.pod == f"default/{pod}" and e.reason == "FailedScheduling"]


@pytest.mark.parametrize("profile", BUILTIN)
def test_a_member_rejected_at_prefilter_releases_its_siblings_held_at_permit(profile: str) -> None:
    """g-2 asks for a field pysched refuses (UnsupportedFields, UnschedulableAndUnresolvable at
    PreFilter) once g-0 and g-1 wait at Permit: they give their room back at once rather than
    at their Permit timeout, and the lower-priority pod on the node is no preemption victim."""

    async def run() -> None:
        cluster, scheduler = _builtin(profile)
        await scheduler.start()
        cluster.create_pod(_running("low", profile, priority=0, cpu="2"))
        for i in range(2):
            cluster.create_pod(_member(profile, i, 3, priority=100))
        refused = _member(profile, 2, 3, priority=100, cpu="4")  # with g-0 and g-1, more than is free
        refused["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]
        refused["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]  # a member, not queued yet
        cluster.create_pod(refused)
        await scheduler.run_until_idle()
        assert len(scheduler.waiting_pods) == 2
        cluster.set_scheduling_gates(PodKey("default/g-2"), [])
        await scheduler.run_until_idle()
        assert len(scheduler.waiting_pods) == 0
        assert int(scheduler.cache.nodes.requested[0, 0]) == 2000  # only the running pod
        assert cluster.preempted == [] and all(e.reason != "Preempted" for e in cluster.events)
        assert _failures(cluster, "g-2") == [
            "0/1 nodes are available: pysched does not support spec.resourceClaims; use the default scheduler. "
            + NOT_HELPFUL
        ]
        assert any("the gang is released: g-2 of pysched.io/job default/g cannot be placed" in note
                   for note in _failures(cluster, "g-0"))  # fmt: skip
        scheduler.cache.check_consistency()
        await scheduler.stop()

    asyncio.run(run())


@pytest.mark.parametrize("profile", BUILTIN)
def test_a_gang_refused_at_prefilter_as_unschedulable_evicts_nobody(profile: str) -> None:
    """Coscheduling refuses a member of a job short of pods with Unschedulable and has no Filter:
    a dry run could not see evictions lift that, so preemption takes no node as a candidate
    (scheduler-plugins' Coscheduling says UnschedulableAndUnresolvable for the same reason)."""

    async def run() -> None:
        cluster, scheduler = _builtin(profile, cpu="4")
        await scheduler.start()
        cluster.create_pod(_running("low", profile, priority=0, cpu="4"))
        for i in range(2):
            cluster.create_pod(_member(profile, i, 3, priority=1000, cpu="1"))
        await scheduler.run_until_idle()
        assert cluster.preempted == [] and all(e.reason != "Preempted" for e in cluster.events)
        assert scheduler.nominator.nominated(PodKey("default/g-0")) is None
        assert _failures(cluster, "g-0") == [
            "0/1 nodes are available: pysched.io/job default/g has 2 pods of the 3 it needs; waiting for 1 more. "
            + NOT_HELPFUL
        ]
        await scheduler.stop()

    asyncio.run(run())


_EXCLUSIVE = "example.com/exclusive"
_TALLIED = "test/tallied"


class Exclusive:
    """Refuses a pod labelled exclusive at PreFilter, as Unschedulable, while any pod labelled so
    runs; its Filter refuses the nodes such a pod runs on, so evicting it lifts the refusal (as
    kube's VolumeRestrictions refuses a ReadWriteOncePod claim in use). Labelled `never`: refused
    as UnschedulableAndUnresolvable."""

    NAME: ClassVar[str] = "Exclusive"

    def __init__(self, args: NoArgs, handle: Handle) -> None:
        self._handle = handle

    def _rows(self, nodes: NodeTable) -> np.ndarray:
        taken = np.zeros(nodes.size, np.bool_)
        for pod, row in self._handle.pods:
            if _EXCLUSIVE in pod.labels:
                taken[row] = True
        return taken

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        if pod.labels.get(_EXCLUSIVE) == "never":
            return unresolvable("never placed", plugin=self.NAME)
        if _EXCLUSIVE in pod.labels and self._rows(nodes).any():
            return unschedulable("an exclusive pod runs", plugin=self.NAME)
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        taken = self._rows(nodes) if _EXCLUSIVE in pod.labels else np.zeros(nodes.size, np.bool_)
        return FilterResult(~taken, {"node(s) run an exclusive pod": taken})

    def events_to_register(self) -> Sequence[EventRegistration]:
        return [EventRegistration(EventKind.POD_DELETE)]


class Tally:
    """Its Filter reads what its PreFilter wrote: a dry run after another plugin's Unschedulable
    PreFilter needs the later PreFilter plugins to have run (kube runs them all)."""

    NAME: ClassVar[str] = "Tally"

    def __init__(self, args: NoArgs, handle: Handle) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        state.write(_TALLIED, pod.key)
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        if state.read(_TALLIED, str) != pod.key:
            raise AssertionError("Tally filtered without its PreFilter state")
        return FilterResult(np.ones(nodes.size, np.bool_))

    def events_to_register(self) -> Sequence[EventRegistration]:
        return ()


EXCLUSIVE_PROFILE = """
profiles:
  - schedulerName: x
    plugins:
      queueSort: [{name: PrioritySort}]
      preFilter: [{name: Exclusive}, {name: Tally}]
      filter: [{name: NodeResourcesFit}, {name: Exclusive}, {name: Tally}]
      postFilter: [{name: DefaultPreemption}]
      score: [{name: LeastAllocated}]
      bind: [{name: DefaultBinder}]
"""


def _exclusive_world() -> tuple[SimulatedCluster, Scheduler]:
    registry = default_registry()
    for cls in (Exclusive, Tally):
        registry.register(PluginSpec(cls.NAME, NoArgs, cls, cls))
    return _world(parse_config(yaml.safe_load(EXCLUSIVE_PROFILE), "t", registry), registry)


def test_an_unschedulable_prefilter_verdict_its_filter_can_lift_is_preempted_for() -> None:
    """kube's path for a PreFilter that says Unschedulable: the other PreFilter plugins still
    run, every node is a potential one, and the dry run's Filters find the victim."""

    async def run() -> None:
        cluster, scheduler = _exclusive_world()
        await scheduler.start()
        cluster.create_pod(_running("low", "x", priority=0, cpu="1", labels={_EXCLUSIVE: "yes"}))
        cluster.create_pod(pod_dict("hi", cpu="1", scheduler_name="x", priority=10, labels={_EXCLUSIVE: "yes"}))
        await scheduler.run_until_idle()
        assert cluster.preempted == [PodKey("default/low")]
        assert scheduler.nominator.nominated(PodKey("default/hi")) == "a"
        assert not scheduler.incidents.counts  # Tally's Filter had its state in the dry run
        assert isinstance(scheduler.clock, VirtualClock)
        scheduler.clock.advance(20)
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/hi")].node_name == "a"
        await scheduler.stop()

    asyncio.run(run())


def test_an_unresolvable_prefilter_verdict_is_never_preempted_for() -> None:
    """UnschedulableAndUnresolvable at PreFilter: no node is a candidate, whatever runs there."""

    async def run() -> None:
        cluster, scheduler = _exclusive_world()
        await scheduler.start()
        cluster.create_pod(_running("low", "x", priority=0, cpu="8", labels={_EXCLUSIVE: "yes"}))
        cluster.create_pod(pod_dict("hi", cpu="8", scheduler_name="x", priority=10, labels={_EXCLUSIVE: "never"}))
        await scheduler.run_until_idle()
        assert cluster.preempted == []
        assert scheduler.nominator.nominated(PodKey("default/hi")) is None
        assert _failures(cluster, "hi") == ["0/1 nodes are available: never placed. " + NOT_HELPFUL]
        await scheduler.stop()

    asyncio.run(run())
