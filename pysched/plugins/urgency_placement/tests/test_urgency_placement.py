import asyncio
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.annotations import URGENCY, URGENCY_FORMS, invalid_annotations, urgency_of
from pysched.api.builders import make_node, make_pod, node_dict, pod_dict
from pysched.api.resources import GPU, nonzero_requests
from pysched.api.times import format_rfc3339
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import ConfigError, parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.fused import URGENT_CLASS
from pysched.framework.interfaces import Handle
from pysched.framework.registry import ArgsError, parse_args
from pysched.plugins import default_registry
from pysched.plugins.urgency_placement import UrgencyPlacement, UrgencyPlacementArgs
from pysched.plugins.urgency_placement.reference import urgency_placement
from pysched.scheduler.cache import Cache
from pysched.scheduler.runtime import Framework
from pysched.scheduler.scheduler import Scheduler
from pysched.scheduler.selection import KernelWeights, score_all
from pysched.testing.strategies import Arrays, node_arrays, pod_request

GPU_COLUMN = 4  # the strategies' layout: cpu, memory, pods, ephemeral-storage, gpu

PROFILE = """
profiles:
  - schedulerName: u
    plugins:
      queueSort: [{name: PrioritySort}]
      filter: [{name: NodeResourcesFit}]
      score: [{name: UrgencyPlacement, weight: 1}]
      bind: [{name: DefaultBinder}]
    pluginConfig:
      - name: UrgencyPlacement
        args: {headroomFactor: 8, urgentWithinSeconds: 600}
"""


@settings(max_examples=200, deadline=None)
@given(
    node_arrays(),
    pod_request(),
    st.booleans(),
    st.integers(1, 4),
    st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)),
    st.integers(1, 8),
    st.integers(0, 3),
)
def test_kernel_matches_reference(
    nodes: Arrays,
    request: np.ndarray,
    urgent: bool,
    weight: int,
    terms: tuple[int, int, int],
    factor: int,
    least: int,
) -> None:
    grow, pack, gpu_w = terms
    cpu, mem, gpu = int(request[0]), int(request[1]), int(request[4])
    nz_cpu, nz_mem = nonzero_requests({"cpu": cpu, "memory": mem})
    gpu_column = GPU_COLUMN if gpu else -1
    weights = KernelWeights(
        least_allocated=least,
        urgency_placement=weight,
        grow_headroom_weight=grow,
        pack_weight=pack,
        gpu_fragment_weight=gpu_w,
        headroom_factor=factor,
    )
    shape = np.array([nz_cpu, nz_mem, cpu, mem, gpu, gpu_column, URGENT_CLASS if urgent else 0], np.int64)
    out = np.empty(len(nodes.mask), np.int64)
    score_all(shape, weights.params(), nodes.allocatable, nodes.requested, nodes.nonzero_requested, out)
    only_least = np.empty_like(out)
    score_all(
        shape,
        KernelWeights(least_allocated=least).params(),
        nodes.allocatable,
        nodes.requested,
        nodes.nonzero_requested,
        only_least,
    )
    expected = urgency_placement(
        urgent, nz_cpu, cpu, gpu, gpu_column, nodes.allocatable, nodes.requested, grow, pack, gpu_w, factor
    )
    np.testing.assert_array_equal(out - only_least, weight * expected)


def test_terms_on_hand_made_nodes() -> None:
    # 16 cores: 4 used, pod asks 2 -> 10 free after; 8 GPUs: 6 used, pod asks 1 -> 1 free after.
    alloc = np.array([[16000, 0, 110, 0, 8]], np.int64)
    used = np.array([[4000, 0, 0, 0, 6]], np.int64)
    assert urgency_placement(True, 2000, 2000, 0, -1, alloc, used, headroom_factor=8)[0] == 10 * 100 // 16
    assert urgency_placement(True, 2000, 2000, 0, -1, alloc, used, headroom_factor=2)[0] == 100  # saturated
    assert urgency_placement(False, 2000, 2000, 0, -1, alloc, used)[0] == 2 * 100 // 12
    assert urgency_placement(False, 2000, 2000, 1, 4, alloc, used, pack_weight=0)[0] == 50  # gpu term only
    assert urgency_placement(False, 2000, 2000, 0, -1, alloc, used, pack_weight=0)[0] == 0  # no term applies


def _framework(nodes: list[tuple[str, dict[str, Any], dict[str, str]]]) -> tuple[Framework, VirtualClock, Cache]:
    """A framework over nodes (name, node kwargs, requests already placed on it)."""
    registry = default_registry()
    config = parse_config(yaml.safe_load(PROFILE), "test", registry)
    clock = VirtualClock(1_000_000.0)
    cache = Cache()
    for name, kwargs, used in nodes:
        cache.add_node(make_node(name, **kwargs))
        if used:
            cpu = used.pop("cpu", None)
            pod = make_pod(f"on-{name}", cpu=cpu, memory=None, extended=used, node_name=name)
            cache.add_pod(pod)
    handle = Handle(SimulatedCluster(clock), clock, cache.nodes)
    return Framework(config.profiles[0], registry, handle), clock, cache


def _place(framework: Framework, **pod_kwargs: Any) -> str | None:
    result = framework.find_node(CycleState(), make_pod("p", memory=None, scheduler_name="u", **pod_kwargs))
    return result.node


# Rows in this order, so that ties (which go to the lowest row) cannot make a test pass.
CPU_NODES = [
    ("snug", {"cpu": "16"}, {"cpu": "12"}),  # 4 free: a 4-core pod fits exactly
    ("medium", {"cpu": "32"}, {"cpu": "8"}),  # 24 free
    ("big-hole", {"cpu": "64"}, {"cpu": "16"}),  # 48 free
]


def test_urgent_pod_picks_the_node_with_most_free_cpu() -> None:
    framework, _, _ = _framework([(n, dict(k), dict(u)) for n, k, u in CPU_NODES])
    assert _place(framework, cpu="4", annotations={URGENCY: "urgent"}) == "big-hole"


def test_relaxed_pod_picks_the_best_fit() -> None:
    framework, _, _ = _framework([(n, dict(k), dict(u)) for n, k, u in CPU_NODES])
    assert _place(framework, cpu="4", annotations={URGENCY: "relaxed"}) == "snug"
    assert _place(framework, cpu="4") == "snug"  # no deadline: relaxed


def test_near_deadline_makes_a_pod_urgent_and_the_selection_key_keeps_classes_apart() -> None:
    framework, clock, _ = _framework([(n, dict(k), dict(u)) for n, k, u in CPU_NODES])
    soon = {"pysched.io/deadline": format_rfc3339(clock.now() + 300)}
    later = {"pysched.io/deadline": format_rfc3339(clock.now() + 7200)}
    for _ in range(3):  # repeated keys build selection trees: each class keeps its own
        assert _place(framework, cpu="4", annotations=soon) == "big-hole"
        assert _place(framework, cpu="4", annotations=later) == "snug"


def test_one_gpu_pod_prefers_a_partly_used_gpu_node_over_an_empty_one() -> None:
    framework, _, _ = _framework(
        [
            ("empty-8", {"cpu": "32", "extended": {GPU: "8"}}, {}),
            ("partly-used", {"cpu": "32", "extended": {GPU: "8"}}, {"cpu": "4", GPU: "6"}),
        ]
    )
    for urgency in ("relaxed", "urgent"):
        assert _place(framework, cpu="1", extended={GPU: "1"}, annotations={URGENCY: urgency}) == "partly-used"


def test_score_batch_matches_the_kernel_in_a_framework() -> None:
    framework, _, _ = _framework([(n, dict(k), dict(u)) for n, k, u in CPU_NODES])
    plugin = framework.plugins["UrgencyPlacement"]
    assert isinstance(plugin, UrgencyPlacement)
    nodes = framework.handle.nodes
    for annotations in ({URGENCY: "urgent"}, {}):
        pod = make_pod("p", cpu="4", memory=None, annotations=annotations)
        req = nodes.request_shape(pod.requests)
        shape = (*req.score_shape, *req.gpu_shape, plugin.score_class(pod))
        out = np.empty(nodes.size, np.int64)
        size = nodes.size
        params = framework.algorithm.weights.params()
        score_all(
            np.array(shape, np.int64),
            params,
            nodes.allocatable[:size],
            nodes.requested[:size],
            nodes.nonzero_requested[:size],
            out,
        )
        feasible = np.ones(size, np.bool_)
        np.testing.assert_array_equal(out, plugin.score_batch(CycleState(), pod, nodes, feasible))


def test_args_are_validated() -> None:
    bad = yaml.safe_load(PROFILE)
    bad["profiles"][0]["pluginConfig"][0]["args"] = {"headroomFactor": 0}
    with pytest.raises(ConfigError, match="headroomFactor"):
        parse_config(bad, "test", default_registry())
    assert UrgencyPlacementArgs().headroom_factor == 2


def test_cached_selection_matches_a_full_scan_as_pods_land() -> None:
    """Enough nodes for selection trees; every answer equals the reference's arg-max over the
    nodes that fit, while pods of both classes, with and without GPUs, land one by one."""
    rng = np.random.default_rng(7)
    nodes: list[tuple[str, dict[str, Any], dict[str, str]]] = []
    for i in range(96):
        kwargs: dict[str, Any] = {"cpu": str(int(rng.choice([8, 16, 32, 64])))}
        if i % 4 == 3:
            kwargs["extended"] = {GPU: "8"}
        nodes.append((f"n{i:02d}", kwargs, {}))
    framework, _, cache = _framework(nodes)
    plugin = framework.plugins["UrgencyPlacement"]
    assert isinstance(plugin, UrgencyPlacement)
    table = cache.nodes
    gpu_column = table.column[GPU]
    for k in range(400):
        cpu = int(rng.choice([1, 2, 4]))
        gpu = int(rng.choice([0, 0, 0, 1, 2]))
        pod = make_pod(
            f"p{k}",
            cpu=str(cpu),
            memory=None,
            extended={GPU: str(gpu)} if gpu else None,
            annotations={URGENCY: str(rng.choice(["urgent", "relaxed"]))},
            scheduler_name="u",
        )
        result = framework.find_node(CycleState(), pod)
        size = table.size
        free = table.allocatable[:size] - table.requested[:size]
        fits = (free[:, 0] >= cpu * 1000) & (free[:, 2] >= 1) & (free[:, gpu_column] >= gpu)
        scores = plugin.score_batch(CycleState(), pod, table, fits)
        expected = int(np.argmax(np.where(fits, scores, -1))) if fits.any() else None
        assert (None if result.node is None else table.row[result.node]) == expected
        if result.node is not None:
            cache.assume(pod, result.node, result.request)
    assert framework.algorithm.selection.trees  # the incremental trees answered, not only scans


ADMITTED = """
profiles:
  - schedulerName: d
    plugins:
      queueSort: [{name: DeadlineLaxity}]
      preEnqueue: [{name: DeadlineLaxity}]
      filter: [{name: NodeResourcesFit}]
      score: [{name: UrgencyPlacement, weight: 1}]
      bind: [{name: DefaultBinder}]
    pluginConfig:
      - name: UrgencyPlacement
        args: {urgentWithinSeconds: 600}
"""


def test_urgency_is_parsed_with_the_rest_of_the_contract() -> None:
    assert urgency_of(make_pod("p", annotations={URGENCY: " urgent\n"})) == "urgent"
    assert urgency_of(make_pod("p", annotations={URGENCY: "relaxed"})) == "relaxed"
    for value in ("hurry", "Urgent", ""):
        pod = make_pod("p", annotations={URGENCY: value})
        assert urgency_of(pod) is None
        assert invalid_annotations(pod) == [(URGENCY, value, URGENCY_FORMS)]
    assert urgency_of(make_pod("p")) is None and invalid_annotations(make_pod("p")) == []


def test_a_malformed_urgency_gets_one_event_and_is_scored_as_if_absent() -> None:
    async def run() -> None:
        clock = VirtualClock(1_000_000.0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        scheduler = Scheduler(parse_config(yaml.safe_load(ADMITTED), "test", registry), cluster, clock, registry)
        cluster.add_node(node_dict("snug", cpu="4", memory="8Gi"))  # relaxed pods pack here
        cluster.add_node(node_dict("roomy", cpu="64", memory="8Gi"))  # urgent pods grow here
        await scheduler.start()
        soon = {URGENCY: "hurry", "pysched.io/deadline": format_rfc3339(clock.now() + 300)}
        # Absent, the key would leave `soon` urgent (its deadline is near) and `later` relaxed.
        cluster.create_pod(
            pod_dict("later", cpu="4", scheduler_name="d", created=clock.now(), annotations={URGENCY: "hurry"})
        )
        cluster.create_pod(pod_dict("soon", cpu="4", scheduler_name="d", created=clock.now(), annotations=soon))
        await scheduler.run_until_idle()
        await scheduler.stop()
        assert {k: p.node_name for k, p in cluster.pods.items()} == {"default/later": "snug", "default/soon": "roomy"}
        invalid = [e for e in cluster.events if e.reason == "InvalidAnnotation"]
        assert sorted(e.pod for e in invalid) == ["default/later", "default/soon"]  # one each
        for event in invalid:
            assert event.type == "Warning"
            assert f"{URGENCY}: 'hurry'" in event.note and URGENCY_FORMS in event.note

    asyncio.run(run())


def test_urgent_within_seconds_is_bounded() -> None:
    for value in (-1, 10**12):
        with pytest.raises(ArgsError, match="urgentWithinSeconds"):
            parse_args(UrgencyPlacementArgs, {"urgentWithinSeconds": value})
    with pytest.raises(ArgsError, match="expected a finite int below"):
        parse_args(UrgencyPlacementArgs, {"urgentWithinSeconds": 10**30})
    assert parse_args(UrgencyPlacementArgs, {"urgentWithinSeconds": 0}).urgent_within_seconds == 0
