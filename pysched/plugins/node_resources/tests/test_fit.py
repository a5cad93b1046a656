import asyncio
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings

from pysched.api.builders import make_node, make_pod, node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.cycle_state import CycleState
from pysched.framework.nodetable import NodeTable
from pysched.plugins.node_resources import fit as fit_module
from pysched.plugins.node_resources.fit import NodeResourcesFit
from pysched.plugins.node_resources.reference import fits, insufficient
from pysched.scheduler.kernel import select_node
from pysched.scheduler.scheduler import Scheduler
from pysched.testing.simulated import default_world
from pysched.testing.strategies import Arrays, node_arrays, pod_request

NAMES = ("cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu")


def test_reasons_name_each_insufficient_resource_like_kube_scheduler() -> None:
    table = NodeTable()
    table.add(make_node("small", cpu="1", memory="1Gi"))
    table.add(make_node("full", cpu="8", memory="8Gi", pods=0))
    table.add(make_node("gpu", cpu="8", memory="8Gi", extended={"nvidia.com/gpu": "1"}))
    pod = make_pod("p", cpu="2", memory="2Gi", extended={"nvidia.com/gpu": "2"})
    result = NodeResourcesFit().filter_batch(CycleState(), pod, table)
    assert not result.feasible.any()
    assert list(result.reasons["Insufficient cpu"]) == [True, False, False]
    assert list(result.reasons["Insufficient memory"]) == [True, False, False]
    assert list(result.reasons["Too many pods"]) == [False, True, False]
    assert list(result.reasons["Insufficient nvidia.com/gpu"]) == [True, True, True]


def test_zero_requests_check_only_the_pod_count() -> None:
    alloc = np.array([[0, 0, 1, 0, 0]], np.int64)
    assert fits(np.zeros(5, np.int64), alloc, np.zeros_like(alloc), NAMES)[0]
    assert not fits(np.zeros(5, np.int64), alloc, np.array([[0, 0, 1, 0, 0]], np.int64), NAMES)[0]


@settings(max_examples=200, deadline=None)
@given(node_arrays(), pod_request())
def test_kernel_fit_matches_reference(nodes: Arrays, request: np.ndarray) -> None:
    n = len(nodes.mask)
    columns = np.array([c for c in np.flatnonzero(request) if c != 2], np.int64)
    out = np.empty(n, np.int64)
    scores = (np.arange(n, dtype=np.int64) * 7) % 5  # with ties
    candidates = np.flatnonzero(nodes.mask).astype(np.int64)
    best, feasible = select_node(
        request, columns, True, nodes.allocatable, nodes.requested, candidates, scores, out, True
    )
    expected = fits(request, nodes.allocatable, nodes.requested, NAMES) & nodes.mask
    np.testing.assert_array_equal(out >= 0, expected)
    np.testing.assert_array_equal(out[expected], scores[expected])
    assert feasible == int(expected.sum())
    if expected.any():
        top = scores[expected].max()
        assert best == int(np.flatnonzero(expected & (scores == top))[0])  # highest score, lowest row on ties
    else:
        assert best == -1
    reasons = insufficient(request, nodes.allocatable, nodes.requested, NAMES)
    assert all(not (rows & expected).any() for rows in reasons.values())


def _world() -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    return default_world(node_dict("a", cpu="4", memory="16Gi"), node_dict("b", cpu="2", memory="16Gi"))


def _refusals(cluster: SimulatedCluster, name: str) -> int:
    return sum(1 for e in cluster.events if e.reason == "FailedScheduling" and e.pod == f"default/{name}")


def _fit(scheduler: Scheduler) -> NodeResourcesFit:
    plugin = scheduler.frameworks["default"].plugins["NodeResourcesFit"]
    assert isinstance(plugin, NodeResourcesFit)
    return plugin


def test_a_pod_a_preemption_might_serve_is_left_to_a_cycle() -> None:
    async def run() -> None:
        _, cluster, scheduler = _world()
        await scheduler.start()
        cluster.create_pod(pod_dict("big", cpu="4", scheduler_name="default", priority=5))
        cluster.create_pod(pod_dict("small", cpu="1", scheduler_name="default", priority=5, created=1.0))
        await scheduler.run_until_idle()
        fit = _fit(scheduler)
        assert fit.still_rejects(make_pod("wants-3", cpu="3", scheduler_name="default", priority=5))
        assert not fit.still_rejects(make_pod("wants-1", cpu="1", scheduler_name="default", priority=5))
        # A pod of higher priority may take room from those placed: its cycle decides.
        assert not fit.still_rejects(make_pod("urgent", cpu="3", scheduler_name="default", priority=9))
        assert not NodeResourcesFit().still_rejects(make_pod("no-handle", cpu="3"))

    asyncio.run(run())


def test_a_refusal_covers_larger_requests_until_the_nodes_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked again and again about pods in a crowd, the check reads the nodes once per state of
    the node table and shape of request: a request at least as large is refused from memory, a
    smaller one is checked, and once the nodes change, nothing is remembered."""
    looked = 0

    def counted(
        request: np.ndarray, allocatable: np.ndarray, requested: np.ndarray, names: Sequence[str]
    ) -> np.ndarray:
        nonlocal looked
        looked += 1
        return fits(request, allocatable, requested, names)

    monkeypatch.setattr(fit_module, "fits", counted)

    async def run() -> None:
        _, cluster, scheduler = _world()
        await scheduler.start()
        cluster.create_pod(pod_dict("big", cpu="4", scheduler_name="default", priority=5))
        cluster.create_pod(pod_dict("small", cpu="1", scheduler_name="default", priority=5, created=1.0))
        await scheduler.run_until_idle()  # 1 CPU left, on b
        fit = _fit(scheduler)
        assert fit.still_rejects(make_pod("two", cpu="2", scheduler_name="default", priority=5)) and looked == 1
        assert fit.still_rejects(make_pod("two-again", cpu="2", scheduler_name="default", priority=5))
        assert fit.still_rejects(make_pod("three", cpu="3", memory="1Gi", scheduler_name="default", priority=5))
        assert looked == 1  # both at least as large as a refused request
        assert not fit.still_rejects(make_pod("one", cpu="1", scheduler_name="default", priority=5))
        assert looked == 2
        cluster.delete_pod(PodKey("default/small"))
        await scheduler.run_until_idle()  # 2 CPUs free on b now
        assert not fit.still_rejects(make_pod("two", cpu="2", scheduler_name="default", priority=5))
        assert looked == 3
        assert fit.still_rejects(make_pod("four", cpu="4", scheduler_name="default", priority=5))
        # A resource no pod asked for before widens the table, not its rows: no refusal of
        # shorter vectors is compared with the new request (that raised, and was an incident).
        scheduler.cache.nodes.ensure_resources({"example.com/foo": 1})
        assert fit.still_rejects(make_pod("five", cpu="5", scheduler_name="default", priority=5))
        assert looked == 5

    asyncio.run(run())


def test_a_pod_the_freed_room_went_to_another_first_is_refused_without_a_cycle() -> None:
    """Room comes back for two waiting pods, the first takes it: the second is refused as a
    cycle would refuse it (no node fits it), without its FailedScheduling being sent again,
    and still binds once room comes back for it."""

    async def run() -> None:
        clock, cluster, scheduler = _world()
        await scheduler.start()
        cluster.create_pod(pod_dict("big", cpu="4", scheduler_name="default"))
        cluster.create_pod(pod_dict("small", cpu="2", scheduler_name="default", created=1.0))
        await scheduler.run_until_idle()
        cluster.create_pod(pod_dict("first", cpu="3", scheduler_name="default", created=2.0))
        cluster.create_pod(pod_dict("second", cpu="3", scheduler_name="default", created=3.0))
        await scheduler.run_until_idle()
        clock.advance(10.0)  # past their backoff
        assert (_refusals(cluster, "first"), _refusals(cluster, "second")) == (1, 1)
        attempts = scheduler.stats.unschedulable
        cluster.delete_pod(PodKey("default/big"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/first")].node_name == "a"
        assert _refusals(cluster, "second") == 1 and scheduler.stats.unschedulable == attempts
        assert _fit(scheduler).still_rejects(cluster.pods[PodKey("default/second")])
        second = scheduler.queue.get(PodKey("default/second"))
        assert second is not None and second.unschedulable_plugins == {"NodeResourcesFit"}
        cluster.delete_pod(PodKey("default/first"))
        clock.advance(10.0)
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/second")].node_name == "a"

    asyncio.run(run())


def test_pods_without_requests_count_the_stand_ins_per_container_on_their_node() -> None:
    """A running pod of four containers without requests counts as 400m and 800Mi for scoring,
    as kube-scheduler counts it: its node is fuller than one running a 150m/300Mi pod, and the
    default profile's LeastAllocated and BalancedAllocation send the next pod to the other."""

    async def run() -> tuple[str | None, list[list[int]]]:
        _, cluster, scheduler = default_world(*(node_dict(name, cpu="4", memory="16Gi") for name in ("a", "b")))
        multi = pod_dict("multi", cpu=None, memory=None, node_name="a", scheduler_name="default")
        multi["spec"]["containers"] = [{"name": f"c{i}", "image": "x"} for i in range(4)]
        cluster.create_pod(multi)
        cluster.create_pod(pod_dict("single", cpu="150m", memory="300Mi", node_name="b", scheduler_name="default"))
        await scheduler.start()
        cluster.create_pod(pod_dict("new", cpu="1", memory="1Gi", scheduler_name="default"))
        await scheduler.run_until_idle()
        scheduler.cache.check_consistency()
        return cluster.pods[PodKey("default/new")].node_name, scheduler.cache.nodes.nonzero_requested[:1].tolist()

    node, nonzero = asyncio.run(run())
    assert node == "b" and nonzero == [[400, 800 * 1024**2]]


def test_a_node_whose_whole_allocatable_is_short_is_not_offered_to_preemption() -> None:
    """kube-scheduler v1.36 refuses a node unresolvably when the request exceeds its allocatable
    (no eviction can make room there): the 4-CPU node is "not helpful" for a 100-CPU pod, while
    the 200-CPU node holding an equal-priority pod has no victims."""

    async def run() -> list[str]:
        _, cluster, scheduler = default_world(
            node_dict("small", cpu="4", memory="8Gi"), node_dict("large", cpu="200", memory="8Gi")
        )
        cluster.create_pod(pod_dict("held", cpu="150", memory="1Gi", node_name="large", scheduler_name="default"))
        await scheduler.start()
        cluster.create_pod(pod_dict("big", cpu="100", memory="1Gi", scheduler_name="default"))
        await scheduler.run_until_idle()
        return [e.note for e in cluster.events if e.pod == "default/big" and e.reason == "FailedScheduling"]

    assert asyncio.run(run()) == [
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
        "1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    ]
