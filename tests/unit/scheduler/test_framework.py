"""Extension points beyond filter and score, driven through the real scheduler loop."""

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import yaml

from pysched.api.builders import make_pod, node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventKind, QueueingHint
from pysched.framework.interfaces import Diagnosis, Handle
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Code, Status, error, unschedulable
from pysched.plugins import default_registry
from pysched.scheduler.queue import BACKOFF
from pysched.scheduler.scheduler import Scheduler


@dataclass
class Recorder:
    """Reserve + Permit + PreBind + PostBind plugin that records calls and can say no or wait."""

    NAME: ClassVar[str] = "Recorder"
    calls: list[str] = field(default_factory=list)
    refuse_reserve: set[str] = field(default_factory=set)
    wait_for: set[str] = field(default_factory=set)
    pre_bind_says: dict[str, Status] = field(default_factory=dict)  # by pod name
    pre_flight_says: dict[str, Status] = field(default_factory=dict)  # by pod name; else Skip
    reserve_says: dict[str, Status] = field(default_factory=dict)  # by pod name, besides refuse_reserve

    def reserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        self.calls.append(f"reserve {pod.name}")
        if pod.name in self.refuse_reserve:
            return unschedulable("no room in the ledger")
        return self.reserve_says.get(pod.name, SUCCESS)

    def unreserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        self.calls.append(f"unreserve {pod.name}")

    def permit(self, state: CycleState, pod: PodInfo, node: NodeName) -> tuple[Status, float]:
        self.calls.append(f"permit {pod.name}")
        return (Status(Code.WAIT), 30.0) if pod.name in self.wait_for else (SUCCESS, 0.0)

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        return self.pre_flight_says.get(pod.name, SKIP)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        self.calls.append(f"prebind {pod.name}")
        return self.pre_bind_says.get(pod.name, SUCCESS)

    def post_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        self.calls.append(f"postbind {pod.name}")


@dataclass
class Veto:
    """PreFilter that rejects pods named veto-*: unresolvable until the pod changes."""

    NAME: ClassVar[str] = "Veto"

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        if pod.name.startswith("veto"):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("vetoed by policy",))
        return SUCCESS

    def events_to_register(self) -> Sequence[Any]:
        return ()


PROFILE = """
profiles:
  - schedulerName: x
    plugins:
      queueSort: [{name: PrioritySort}]
      preFilter: [{name: Veto}]
      filter: [{name: NodeAffinity}, {name: NodeResourcesFit}]
      score: [{name: LeastAllocated}]
      reserve: [{name: Recorder}]
      permit: [{name: Recorder}]
      preBind: [{name: Recorder}]
      bind: [{name: DefaultBinder}]
      postBind: [{name: Recorder}]
"""


def _scheduler(
    recorder: Recorder, *extra: PluginSpec[Any], profile: str = PROFILE
) -> tuple[SimulatedCluster, Scheduler]:
    registry = default_registry()
    registry.register(PluginSpec("Recorder", NoArgs, lambda args, handle: recorder, Recorder))
    registry.register(PluginSpec("Veto", NoArgs, lambda args, handle: Veto(), Veto))
    for spec in extra:
        registry.register(spec)
    clock = VirtualClock(0.0)
    cluster = SimulatedCluster(clock)
    cluster.add_node(node_dict("a", cpu="4", memory="8Gi", labels={"zone": "a"}))
    return cluster, Scheduler(parse_config(yaml.safe_load(profile), "test", registry), cluster, clock, registry)


def test_points_run_in_order_and_a_reserve_refusal_unreserves() -> None:
    recorder = Recorder(refuse_reserve={"q"})

    async def run() -> None:
        cluster, scheduler = _scheduler(recorder)
        await scheduler.start()
        cluster.create_pod(pod_dict("p", cpu="1", scheduler_name="x"))
        await scheduler.run_until_idle()
        assert recorder.calls == ["reserve p", "permit p", "prebind p", "postbind p"]
        recorder.calls.clear()
        cluster.create_pod(pod_dict("q", cpu="1", scheduler_name="x"))
        await scheduler.run_until_idle()
        assert recorder.calls == ["reserve q", "unreserve q"]
        assert cluster.pods[PodKey("default/q")].node_name is None
        assert int(scheduler.cache.nodes.requested[0, 0]) == 1000  # only p is counted
        # kube's words for a Reserve rejection: a fit error over the one node it was meant for
        told = [e.note for e in cluster.events if e.pod == "default/q" and e.reason == "FailedScheduling"]
        assert told == ["0/1 nodes are available: 1 no room in the ledger."]
        await scheduler.stop()

    asyncio.run(run())


def test_permit_wait_holds_the_bind_until_allowed_or_rejected() -> None:
    recorder = Recorder(wait_for={"w", "r"})

    async def run() -> None:
        cluster, scheduler = _scheduler(recorder)
        await scheduler.start()
        cluster.create_pod(pod_dict("w", cpu="1", scheduler_name="x"))
        cluster.create_pod(pod_dict("r", cpu="1", scheduler_name="x"))
        await scheduler.run_until_idle()  # returns: waiting pods hold no bind worker
        assert cluster.pods[PodKey("default/w")].node_name is None
        assert scheduler.cache.is_assumed(PodKey("default/w"))  # holds its room while waiting
        waiting_pods = scheduler.frameworks["x"].handle.waiting_pods
        assert {w.pod.name for w in waiting_pods} == {"w", "r"}
        w, r = waiting_pods.get(PodKey("default/w")), waiting_pods.get(PodKey("default/r"))
        assert w is not None and r is not None and w.pending_plugins == {"Recorder"} and w.node == "a"
        w.allow("Recorder")
        r.reject("Recorder", "gang incomplete")
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/w")].node_name == "a"
        assert cluster.pods[PodKey("default/r")].node_name is None
        assert not scheduler.cache.is_assumed(PodKey("default/r"))
        assert "unreserve r" in recorder.calls
        assert len(waiting_pods) == 0
        await scheduler.stop()

    asyncio.run(run())


def test_permit_timeout_runs_on_the_injected_clock() -> None:
    recorder = Recorder(wait_for={"w"})

    async def run() -> None:
        cluster, scheduler = _scheduler(recorder)
        clock = scheduler.clock
        assert isinstance(clock, VirtualClock)
        await scheduler.start()
        cluster.create_pod(pod_dict("w", cpu="1", scheduler_name="x"))
        await scheduler.run_until_idle()
        assert scheduler.next_wakeup() == 30.0  # the Recorder's wait runs out then
        clock.advance_to(29.0)
        await scheduler.run_until_idle()
        assert scheduler.cache.is_assumed(PodKey("default/w"))  # virtual time, not wall time, counts
        clock.advance_to(30.0)
        await scheduler.run_until_idle()
        assert not scheduler.cache.is_assumed(PodKey("default/w"))
        assert "unreserve w" in recorder.calls
        note = [e.note for e in cluster.events if e.pod == "default/w"][-1]
        # kube's words: a fit error on the node it waited on, not a failed bind
        assert note == "0/1 nodes are available: 1 rejected due to timeout after waiting 30s at plugin Recorder."
        queued = scheduler.queue.get(PodKey("default/w"))
        assert queued is not None  # back in the queue for another attempt
        await scheduler.stop()

    asyncio.run(run())


def test_a_failed_binding_cycle_is_told_in_kubes_words_and_backs_off() -> None:
    """As kube-scheduler's binding cycle: a PreBind rejection in its plugin's own words with reason
    Unschedulable, a PreBind error as `running PreBind plugin "<name>": ...` with reason
    SchedulerError. No rejector is recorded either way, so both back off; neither is parked."""
    recorder = Recorder(
        pre_bind_says={"r": unschedulable("the volume is not attached yet"), "e": error("the API timed out")},
        pre_flight_says={"f": error("no volume binder"), "u": unschedulable("not now")},
        reserve_says={"v": error("the ledger is down")},
    )

    async def run() -> None:
        cluster, scheduler = _scheduler(recorder)
        await scheduler.start()
        for name in ("r", "e", "f", "u", "v"):
            cluster.create_pod(pod_dict(name, cpu="500m", scheduler_name="x"))
        await scheduler.run_until_idle()
        assert scheduler.stats.bind_failures == 4
        told = {e.pod: e.note for e in cluster.events if e.reason == "FailedScheduling"}
        assert told == {
            "default/r": "the volume is not attached yet",
            "default/e": 'running PreBind plugin "Recorder": the API timed out',
            "default/f": 'running PreBindPreFlight "Recorder": no volume binder',
            "default/u": 'PreBindPreFlight Recorder returned "Unschedulable", which is unsupported. '
            "It is supposed to return Success, Skip, or Error status",
            "default/v": 'running Reserve plugin "Recorder": the ledger is down',
        }
        reasons = {n: cluster.conditions[PodKey(f"default/{n}")]["PodScheduled"].reason for n in ("r", "e", "f", "u")}
        assert reasons == {"r": "Unschedulable", "e": "SchedulerError", "f": "SchedulerError", "u": "SchedulerError"}
        assert scheduler.queue.counts()[BACKOFF] == 5 and not scheduler.cache.is_assumed(PodKey("default/r"))
        await scheduler.stop()

    asyncio.run(run())


def test_a_pod_deleted_while_waiting_at_permit_gives_its_room_back() -> None:
    recorder = Recorder(wait_for={"w", "v"})

    async def run() -> None:
        cluster, scheduler = _scheduler(recorder)
        await scheduler.start()
        cluster.create_pod(pod_dict("w", cpu="1", scheduler_name="x"))
        await scheduler.run_until_idle()
        cluster.delete_pod(PodKey("default/w"))
        await scheduler.run_until_idle()
        assert len(scheduler.waiting_pods) == 0
        assert int(scheduler.cache.nodes.requested[0, 0]) == 0
        assert "unreserve w" in recorder.calls
        # A pod that is gone is neither retried nor reported, and no bind failed.
        assert [e.reason for e in cluster.events if e.pod == "default/w"] == []
        assert scheduler.stats.bind_failures == 0 and PodKey("default/w") not in scheduler.queue
        # Stopping gives back the room of the pods still waiting, quietly: the next leader takes them.
        cluster.create_pod(pod_dict("v", cpu="1", scheduler_name="x"))
        await scheduler.run_until_idle()
        assert scheduler.cache.is_assumed(PodKey("default/v"))
        await scheduler.stop()
        assert not scheduler.cache.is_assumed(PodKey("default/v")) and len(scheduler.waiting_pods) == 0
        assert [e.reason for e in cluster.events if e.pod == "default/v"] == []

    asyncio.run(run())


def test_prefilter_rejection_reports_and_parks_the_pod() -> None:
    async def run() -> None:
        cluster, scheduler = _scheduler(Recorder())
        await scheduler.start()
        cluster.create_pod(pod_dict("veto-1", cpu="1", scheduler_name="x"))
        await scheduler.run_until_idle()
        event = [e for e in cluster.events if e.pod == "default/veto-1"][-1]
        assert event.reason == "FailedScheduling" and event.note == "0/1 nodes are available: vetoed by policy."
        queued = scheduler.queue.get(PodKey("default/veto-1"))
        assert queued is not None and queued.unschedulable_plugins == frozenset({"Veto"})
        assert scheduler.queue.on_event(ClusterEvent(EventKind.NODE_ADD)) == 0  # Veto cares for no event
        await scheduler.stop()

    asyncio.run(run())


def test_requeue_asks_only_the_plugins_that_rejected_the_pod() -> None:
    _, scheduler = _scheduler(Recorder())
    framework = scheduler.frameworks["x"]
    pod = make_pod("p", scheduler_name="x")
    by_affinity = frozenset({"NodeAffinity"})
    by_fit = frozenset({"NodeResourcesFit"})
    assert framework.requeue_hint(pod, by_affinity, ClusterEvent(EventKind.POD_DELETE)) is QueueingHint.SKIP
    assert framework.requeue_hint(pod, by_affinity, ClusterEvent(EventKind.NODE_ADD)) is QueueingHint.QUEUE
    assert framework.requeue_hint(pod, by_fit, ClusterEvent(EventKind.POD_DELETE)) is QueueingHint.QUEUE
    assert framework.requeue_hint(pod, by_fit, ClusterEvent(EventKind.POD_RESIZE_DOWN)) is QueueingHint.QUEUE
    assert framework.requeue_hint(pod, frozenset(), ClusterEvent(EventKind.POD_DELETE)) is QueueingHint.QUEUE


def test_handle_gives_plugins_the_cluster_clock_and_nodes() -> None:
    cluster, scheduler = _scheduler(Recorder())
    handle: Handle = scheduler.frameworks["x"].handle
    assert handle.cluster is cluster and handle.nodes is scheduler.cache.nodes
    assert handle.clock is scheduler.clock and handle.waiting_pods is scheduler.waiting_pods


@dataclass
class MakeRoom:
    """PostFilter that records the diagnosis it was given and says it made room."""

    NAME: ClassVar[str] = "MakeRoom"
    seen: list[str] = field(default_factory=list)

    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        self.seen.append(f"{pod.name}: {diagnosis.message()}")
        return SUCCESS


def test_post_filter_runs_only_when_no_node_fits_and_the_pod_stays_unschedulable() -> None:
    room = MakeRoom()

    async def run() -> None:
        with_room = PROFILE.replace("      reserve:", "      postFilter: [{name: MakeRoom}]\n      reserve:")
        spec = PluginSpec("MakeRoom", NoArgs, lambda args, handle: room, MakeRoom)
        cluster, scheduler = _scheduler(Recorder(), spec, profile=with_room)
        await scheduler.start()
        cluster.create_pod(pod_dict("fits", cpu="1", scheduler_name="x"))
        cluster.create_pod(pod_dict("huge", cpu="64", scheduler_name="x"))
        await scheduler.run_until_idle()
        assert room.seen == ["huge: 0/1 nodes are available: 1 Insufficient cpu."]
        assert cluster.pods[PodKey("default/fits")].node_name == "a"
        assert scheduler.queue.where(PodKey("default/huge")) == "unschedulable"
        await scheduler.stop()

    asyncio.run(run())


def test_a_diagnosis_is_worded_as_kubes_fit_error() -> None:
    """kube's FitError: reasons as `<count> <reason>` sorted, a PreFilter's words alone, and a bare
    colon when no node said why (a Reserve or Permit plugin that rejected without a reason)."""
    assert Diagnosis(3, {"b": 1, "a": 2}, frozenset(), False).message() == "0/3 nodes are available: 1 b, 2 a."
    assert Diagnosis(3, {}, frozenset(), True, pre_filter_message="x").message() == "0/3 nodes are available: x."
    assert Diagnosis(1, {}, frozenset(), False).message() == "0/1 nodes are available:"
