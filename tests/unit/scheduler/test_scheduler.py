import asyncio
import functools
import logging
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import numpy as np
import pytest
import structlog
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import MIN_RECONCILE_INTERVAL_S, Handle
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler

GPU_TAINT = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _setup(profile: str = "default") -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    return clock, cluster, Scheduler(builtin_config(registry).only(profile), cluster, clock, registry)


def test_binds_reports_and_requeues_when_room_frees(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        clock, cluster, scheduler = _setup()
        cluster.add_node(node_dict("a", cpu="4", memory="8Gi"))
        cluster.add_node(node_dict("g", cpu="4", memory="8Gi", taints=[GPU_TAINT]))
        await scheduler.start()
        for name in ("p1", "p2", "p3"):
            cluster.create_pod(pod_dict(name, cpu="2", memory="1Gi", scheduler_name="default"))
        cluster.create_pod(pod_dict("other", cpu="1", scheduler_name="someone-else"))
        await scheduler.run_until_idle()
        bound = {k: p.node_name for k, p in cluster.pods.items()}
        assert bound == {"default/p1": "a", "default/p2": "a", "default/p3": None, "default/other": None}
        failed = [e for e in cluster.events if e.pod == "default/p3"]
        assert failed[-1].reason == "FailedScheduling"
        assert failed[-1].note == (
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). preemption: 0/2 nodes "
            "are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
        )
        condition = cluster.conditions[PodKey("default/p3")]["PodScheduled"]
        assert (condition.status, condition.reason) == ("False", "Unschedulable")
        assert scheduler.queue.where(PodKey("default/p3")) == "unschedulable"
        scheduled = [e for e in cluster.events if e.reason == "Scheduled"]
        assert scheduled[0].note == "Successfully assigned default/p1 to a"

        cluster.finish_pod(PodKey("default/p1"))  # frees 2 cpu: the parked pod moves
        clock.advance(10.0)
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p3")].node_name == "a"
        scheduler.cache.check_consistency()
        await scheduler.stop()

    loop.run_until_complete(run())


def test_a_cluster_without_nodes_says_so_as_kube_scheduler_does(loop: asyncio.AbstractEventLoop) -> None:
    """No plugin runs (no preemption either); no plugin refused it, so no event is known to help:
    it is tried again after its backoff (nodes may show up without one), and at once when a node
    comes."""

    async def run() -> None:
        clock, cluster, scheduler = _setup()
        await scheduler.start()
        cluster.create_pod(pod_dict("p", cpu="1", scheduler_name="default"))
        await scheduler.run_until_idle()
        failed = [e for e in cluster.events if e.pod == "default/p"]
        assert [(e.reason, e.note) for e in failed] == [("FailedScheduling", "no nodes available to schedule pods")]
        condition = cluster.conditions[PodKey("default/p")]["PodScheduled"]
        assert (condition.status, condition.reason) == ("False", "Unschedulable")
        assert scheduler.queue.where(PodKey("default/p")) == "backoff"
        clock.advance(1.5)  # past its first backoff (1 s)
        await scheduler.run_until_idle()
        assert len([e for e in cluster.events if e.pod == "default/p"]) == 2

        cluster.add_node(node_dict("a", cpu="4", memory="8Gi"))
        clock.advance(10.0)
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name == "a"
        await scheduler.stop()

    loop.run_until_complete(run())


def test_a_long_failure_is_cut_in_the_event_and_whole_in_the_condition(loop: asyncio.AbstractEventLoop) -> None:
    """As kube-scheduler: the note to 1,020 bytes and " ..." (events refuse longer), the
    PodScheduled condition's message whole."""

    async def run() -> None:
        _, cluster, scheduler = _setup()
        cluster.add_node(node_dict("a", cpu="2", memory="8Gi"))
        await scheduler.start()
        devices = {f"example.com/device-with-a-long-name-{i:03d}": "1" for i in range(40)}
        cluster.create_pod(pod_dict("long", extended=devices, scheduler_name="default"))
        await scheduler.run_until_idle()
        note = [e.note for e in cluster.events if e.pod == "default/long"][-1]
        whole = cluster.conditions[PodKey("default/long")]["PodScheduled"].message
        assert len(note.encode()) == 1024 and note.endswith(" ...") and whole.startswith(note[:-4])
        assert whole.count("Insufficient example.com/device-with-a-long-name-") == 40
        await scheduler.stop()

    loop.run_until_complete(run())


def test_bind_conflict_forgets_the_assumption_at_once(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        cluster.add_node(node_dict("a", cpu="4", memory="8Gi"))
        await scheduler.start()
        pod = cluster.create_pod(pod_dict("p", cpu="3", scheduler_name="default"))
        assert pod is not None
        # Someone else binds the pod between our decision and our bind: the API says conflict.
        original = cluster.bind

        async def racing_bind(p, node):  # type: ignore[no-untyped-def]
            cluster.pods[p.key] = cluster.pods[p.key].evolve(uid="recreated")
            return await original(p, node)

        cluster.bind = racing_bind  # type: ignore[method-assign]
        await scheduler.run_until_idle()
        assert scheduler.stats.bind_failures == 1
        assert scheduler.cache.pod_node(pod.key) is None  # forgotten, not waiting for a timer
        assert int(scheduler.cache.nodes.requested[0, 0]) == 0
        # kube's words for a failed bind: the API's conflict, as an error of the Bind plugin
        note = [e.note for e in cluster.events if e.reason == "FailedScheduling"]
        assert len(note) == 1 and note[0].startswith('running Bind plugin "DefaultBinder": ')
        assert cluster.conditions[pod.key]["PodScheduled"].reason == "SchedulerError"
        await scheduler.stop()

    loop.run_until_complete(run())


def test_pod_bound_by_someone_else_during_our_bind_is_neither_retried_nor_reported(
    loop: asyncio.AbstractEventLoop,
) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        cluster.add_node(node_dict("a", cpu="4", memory="8Gi"))
        cluster.add_node(node_dict("b", cpu="4", memory="8Gi"))
        await scheduler.start()
        original = cluster.bind

        async def other_scheduler_first(p, node):  # type: ignore[no-untyped-def]
            other = "b" if node == "a" else "a"
            await original(p, NodeName(other))  # another scheduler wins the race
            return await original(p, node)  # ours now gets the API's conflict

        cluster.bind = other_scheduler_first  # type: ignore[method-assign]
        pod = cluster.create_pod(pod_dict("p", cpu="3", scheduler_name="default"))
        assert pod is not None
        await scheduler.run_until_idle()
        assert scheduler.stats.bind_failures == 1
        winner = cluster.pods[pod.key].node_name
        assert winner is not None and scheduler.cache.pod_node(pod.key) == winner  # counted where it runs
        assert pod.key not in scheduler.queue
        assert not [e for e in cluster.events if e.reason == "FailedScheduling"]
        scheduler.cache.check_consistency()
        await scheduler.stop()

    loop.run_until_complete(run())


def test_invalid_pod_gets_an_event_and_does_not_stop_the_loop(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        cluster.add_node(node_dict("a"))
        await scheduler.start()
        cluster.create_pod(pod_dict("bad", cpu="two", scheduler_name="default"))
        cluster.create_pod(pod_dict("good", cpu="1", scheduler_name="default"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/good")].node_name == "a"
        warning = [e for e in cluster.events if e.pod == "default/bad"]
        assert warning and "'two' is not a Kubernetes quantity" in warning[0].note
        await scheduler.stop()

    loop.run_until_complete(run())


node_spec = st.tuples(
    st.integers(1, 16),
    st.integers(1, 32),
    st.integers(1, 8),
    st.sampled_from([0, 0, 4, 8]),
    st.booleans(),
    st.booleans(),
)
pod_spec = st.tuples(
    st.sampled_from(["0", "100m", "500m", "1", "2", "4", "12"]),
    st.sampled_from(["0", "256Mi", "1Gi", "4Gi", "24Gi"]),
    st.sampled_from([0, 0, 0, 1, 4]),
    st.booleans(),
    st.sampled_from([None, "a", "b"]),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), pod_spec),
        st.tuples(st.just("finish"), st.integers(0, 1000)),
        st.tuples(st.just("node"), node_spec),
    ),
    max_size=60,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(node_spec, min_size=1, max_size=6), ops)
def test_no_overcommit_and_every_pod_that_fits_is_bound(
    nodes: list[tuple[int, int, int, int, bool, bool]], stream: list[tuple[str, object]]
) -> None:
    async def run() -> None:
        clock, cluster, scheduler = _setup()
        count = 0

        def add_node(spec: tuple[int, int, int, int, bool, bool]) -> None:
            nonlocal count
            cpu, mem, pods, gpu, tainted, zone_b = spec
            cluster.add_node(
                node_dict(
                    f"n{count}",
                    cpu=str(cpu),
                    memory=f"{mem}Gi",
                    pods=pods,
                    extended={"nvidia.com/gpu": str(gpu)} if gpu else None,
                    taints=[GPU_TAINT] if tainted else (),
                    labels={"zone": "b" if zone_b else "a"},
                )
            )
            count += 1

        for spec in nodes:
            add_node(spec)
        await scheduler.start()
        for i, (kind, arg) in enumerate(stream):
            if kind == "pod":
                cpu, mem, gpu, tolerate, zone = cast(tuple[str, str, int, bool, str | None], arg)
                cluster.create_pod(
                    pod_dict(
                        f"p{i}",
                        cpu=cpu,
                        memory=mem,
                        scheduler_name="default",
                        extended={"nvidia.com/gpu": str(gpu)} if gpu else None,
                        tolerations=[{"key": "gpu", "operator": "Exists"}] if tolerate else (),
                        node_selector={"zone": zone} if zone else None,
                        created=float(i),
                    )
                )
            elif kind == "finish":
                running = [k for k, p in cluster.pods.items() if p.node_name and not p.terminated]
                if running:
                    cluster.finish_pod(running[int(arg) % len(running)])  # type: ignore[call-overload]
            else:
                add_node(arg)  # type: ignore[arg-type]
            await scheduler.run_until_idle()
            clock.advance(0.5)
        for _ in range(4):  # let every backoff expire
            clock.advance(11.0)
            await scheduler.run_until_idle()

        # 1. No node is overcommitted in any resource, pod count included.
        table = scheduler.cache.nodes
        for name, row in table.row.items():
            on_node = [p for p in cluster.pods.values() if p.node_name == name and not p.terminated]
            for resource, column in table.column.items():
                used = sum(p.requests.get(resource, 0) for p in on_node) if resource != "pods" else len(on_node)
                assert used <= table.allocatable[row, column], (name, resource)
        scheduler.cache.check_consistency()
        # 2. Every pending pod of ours fits nowhere, by every filter's own reference verdict.
        framework = scheduler.frameworks["default"]
        for pod in cluster.pods.values():
            if pod.node_name is None and pod.scheduler_name == "default":
                feasible = np.ones(table.size, np.bool_) & table.present[: table.size]
                for plugin in framework.filters:
                    feasible &= plugin.filter_batch(CycleState(), pod, table).feasible
                assert not feasible.any(), f"{pod.key} fits on {np.flatnonzero(feasible)} but was not bound"
        await scheduler.stop()

    asyncio.run(run())


def test_profiles_with_different_queue_sorts_cannot_share_a_scheduler() -> None:
    from pysched.framework.config import ConfigError

    registry = default_registry()
    mixed = builtin_config(registry).only("default", "edf")
    assert {p.queue_sort for p in mixed.profiles} == {"PrioritySort", "EarliestDeadline"}
    clock = VirtualClock()
    with pytest.raises(ConfigError, match="must share one queueSort plugin"):
        Scheduler(mixed, SimulatedCluster(clock), clock, registry)


@dataclass(slots=True)
class DeletionRecorder:
    NAME: ClassVar[str] = "DeletionRecorder"
    deleted: list[PodKey] = field(default_factory=list)

    def post_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        return None

    def pod_deleted(self, pod: PodInfo) -> None:
        self.deleted.append(pod.key)


TWO_PROFILES = """
profiles:
  - schedulerName: x
    plugins:
      queueSort: [{name: PrioritySort}]
      filter: [{name: NodeResourcesFit}]
      bind: [{name: DefaultBinder}]
      postBind: [{name: DeletionRecorder}]
  - schedulerName: y
    plugins:
      queueSort: [{name: PrioritySort}]
      filter: [{name: NodeResourcesFit}]
      bind: [{name: DefaultBinder}]
"""


def test_plugins_subscribed_to_deletions_hear_of_each_deleted_pod_of_their_profile_once(
    loop: asyncio.AbstractEventLoop,
) -> None:
    recorder = DeletionRecorder()

    def subscribe(args: NoArgs, handle: Handle) -> DeletionRecorder:
        handle.pod_lifecycle.on_deleted(recorder.pod_deleted)
        return recorder

    async def run() -> None:
        registry = default_registry()
        registry.register(PluginSpec("DeletionRecorder", NoArgs, subscribe, DeletionRecorder))
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        scheduler = Scheduler(parse_config(yaml.safe_load(TWO_PROFILES), "t", registry), cluster, clock, registry)
        cluster.add_node(node_dict("a", cpu="3", memory="8Gi"))
        await scheduler.start()
        for name, profile in (("x0", "x"), ("x1", "x"), ("x2", "x"), ("y0", "y"), ("x3", "x"), ("o0", "other")):
            cluster.create_pod(pod_dict(name, cpu="1", memory="1Gi", scheduler_name=profile, created=clock.now()))
            await scheduler.run_until_idle()
        placed = {k: p.node_name for k, p in cluster.pods.items()}
        assert placed == {
            "default/x0": "a",
            "default/x1": "a",
            "default/x2": "a",
            "default/y0": None,
            "default/x3": None,
            "default/o0": None,
        }
        cluster.finish_pod(PodKey("default/x0"))  # the live informer: a terminal update, then the deletion
        assert recorder.deleted == []  # terminating is not deleting
        for key in list(cluster.pods):
            cluster.delete_pod(key)
        await scheduler.run_until_idle()
        assert sorted(recorder.deleted) == ["default/x0", "default/x1", "default/x2", "default/x3"]  # bound and pending
        await scheduler.stop()

    loop.run_until_complete(run())


@dataclass(slots=True)
class Hasty:
    """A reconcile plugin from outside pysched whose interval nothing checked."""

    NAME: ClassVar[str] = "Hasty"
    reconcile_interval: float = 1.0e-300

    async def reconcile(self, pods: object) -> None:
        return None


def test_a_reconcile_interval_below_the_minimum_is_clamped_so_virtual_time_advances() -> None:
    registry = default_registry()
    registry.register(PluginSpec("Hasty", NoArgs, lambda args, handle: Hasty(), Hasty))
    profile = {
        "profiles": [
            {
                "schedulerName": "h",
                "plugins": {
                    "queueSort": [{"name": "PrioritySort"}],
                    "bind": [{"name": "DefaultBinder"}],
                    "reconcile": [{"name": "Hasty"}],
                },
            }
        ]
    }
    clock = VirtualClock(1000.0)
    scheduler = Scheduler(parse_config(profile, "t", registry), SimulatedCluster(clock), clock, registry)
    wakeup = scheduler.next_wakeup()
    assert wakeup is not None and wakeup - clock.now() == pytest.approx(MIN_RECONCILE_INTERVAL_S)


class Counting:
    """A reconcile plugin that counts its calls, at the interval its name says."""

    NAME: ClassVar[str] = "Counting"

    def __init__(self, interval: float) -> None:
        self.reconcile_interval = interval
        self.calls = 0

    async def reconcile(self, pods: object) -> None:
        self.calls += 1


def _counting(interval: float, args: NoArgs, handle: Handle) -> Counting:
    return Counting(interval)


def test_each_reconcile_plugin_runs_at_its_own_interval(loop: asyncio.AbstractEventLoop) -> None:
    """Another profile's (or plugin's) shorter interval does not make a plugin run more often."""
    registry = default_registry()
    for name, interval in (("Often", 10.0), ("Seldom", 600.0)):
        registry.register(PluginSpec(name, NoArgs, functools.partial(_counting, interval), Counting))

    def profile(name: str, plugin: str) -> dict[str, object]:
        return {
            "schedulerName": name,
            "plugins": {
                "queueSort": [{"name": "PrioritySort"}],
                "bind": [{"name": "DefaultBinder"}],
                "reconcile": [{"name": plugin}],
            },
        }

    clock = VirtualClock(1000.0)
    config = parse_config({"profiles": [profile("a", "Seldom"), profile("b", "Often")]}, "t", registry)
    scheduler = Scheduler(config, SimulatedCluster(clock), clock, registry)
    (seldom,), (often,) = scheduler.frameworks["a"].reconcile, scheduler.frameworks["b"].reconcile
    assert isinstance(seldom, Counting) and isinstance(often, Counting)
    for _ in range(120):
        clock.advance(10.0)
        loop.run_until_complete(scheduler.reconcile_if_due())
    assert (often.calls, seldom.calls) == (120, 2)
    assert scheduler.next_reconcile() == clock.now() + 10.0


@pytest.mark.parametrize("log_decisions", [False, True])
def test_only_a_scheduler_built_to_log_decisions_logs_its_cycles(
    loop: asyncio.AbstractEventLoop, log_decisions: bool
) -> None:
    """`pysched run` logs one debug line per cycle; the simulator and embedders, whose structlog may
    print every level, get none."""
    previous = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))

    async def run() -> list[MutableMapping[str, Any]]:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        with structlog.testing.capture_logs() as logs:
            config = builtin_config(registry).only("default")
            scheduler = Scheduler(config, cluster, clock, registry, log_decisions=log_decisions)
            cluster.add_node(node_dict("a", cpu="4", memory="8Gi"))
            await scheduler.start()
            cluster.create_pod(pod_dict("fits", cpu="2", scheduler_name="default"))
            cluster.create_pod(pod_dict("huge", cpu="64", scheduler_name="default"))
            await scheduler.run_until_idle()
            await scheduler.stop()
        return [e for e in logs if e["event"] == "scheduling cycle"]

    try:
        cycles = loop.run_until_complete(run())
    finally:
        structlog.configure(**previous)
    if not log_decisions:
        assert cycles == []
        return
    by_pod = {e["pod"]: e for e in cycles}
    assert by_pod["default/fits"]["result"] == "assumed" and by_pod["default/fits"]["node"] == "a"
    assert by_pod["default/huge"]["result"] == "unschedulable"
    assert "Insufficient cpu" in str(by_pod["default/huge"]["why"])
    assert all(e["log_level"] == "debug" for e in cycles)
