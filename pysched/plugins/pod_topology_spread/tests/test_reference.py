"""The plugin's incremental counts and bincounts equal a recount from the full pod list."""

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import make_node, make_pod, pod_dict
from pysched.api.objects import NodeInfo, PodInfo, pod_from_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle
from pysched.plugins.node_affinity.tests.test_node_affinity import _oracle as affinity_oracle
from pysched.plugins.pod_topology_spread import (
    MISSING_LABEL,
    REASON,
    PodTopologySpread,
    PodTopologySpreadArgs,
    reference,
)
from pysched.scheduler.cache import Cache

ZONES = ["a", "b", "c"]
APPS = ["web", "db"]
TAINT = {"key": "t", "value": "x", "effect": "NoSchedule"}

node_spec = st.tuples(
    st.sampled_from([*ZONES, None]),  # zone label (None: missing)
    st.sampled_from(["r1", "r2", None]),  # rack label
    st.booleans(),  # tainted
)
pod_spec = st.tuples(
    st.integers(0, 7),  # node index
    st.sampled_from(APPS),
    st.sampled_from(["default", "other"]),
    st.booleans(),  # terminating
)
constraint = st.fixed_dictionaries(
    {
        "maxSkew": st.integers(1, 3),
        "topologyKey": st.sampled_from(["zone", "rack", "kubernetes.io/hostname"]),
        "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
        "labelSelector": st.sampled_from([{"matchLabels": {"app": "web"}}, {"matchLabels": {"app": "db"}}, {}, None]),
    },
    optional={
        "minDomains": st.integers(1, 4),
        "nodeAffinityPolicy": st.sampled_from(["Honor", "Ignore"]),
        "nodeTaintsPolicy": st.sampled_from(["Honor", "Ignore"]),
        "matchLabelKeys": st.just(["tier"]),
    },
)


def _node(i: int, spec: tuple[str | None, str | None, bool]) -> NodeInfo:
    zone, rack, tainted = spec
    labels = {k: v for k, v in (("zone", zone), ("rack", rack)) if v is not None}
    return make_node(f"n{i}", cpu="64", memory="64Gi", labels=labels, taints=[TAINT] if tainted else [])


def _placed(name: str, node: str, app: str, namespace: str, deleting: bool) -> PodInfo:
    raw: dict[str, Any] = pod_dict(
        name, namespace=namespace, cpu="1", node_name=node, labels={"app": app, "tier": "t1"}
    )
    if deleting:
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return pod_from_dict(raw)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(node_spec, min_size=1, max_size=8),
    st.lists(pod_spec, max_size=24),
    st.lists(constraint, min_size=1, max_size=3),
    st.sampled_from(APPS),
    st.booleans(),
    st.lists(st.integers(0, 7), max_size=4),
    st.integers(0, 24),
)
def test_plugin_equals_a_recount(
    nodes_spec: list[Any],
    pods_spec: list[Any],
    constraints: list[dict[str, Any]],
    app: str,
    zone_affinity: bool,
    infeasible: list[int],
    subscribe_at: int,
) -> None:
    cache = Cache()
    nodes = [_node(i, s) for i, s in enumerate(nodes_spec)]
    for node in nodes:
        cache.add_node(node)
    clock = VirtualClock(0.0)
    handle = Handle(SimulatedCluster(clock), clock, cache.nodes, pods=cache.placed)
    plugin = None
    placed: list[tuple[PodInfo, NodeInfo]] = []
    for i, (index, pod_app, namespace, deleting) in enumerate(pods_spec):
        if i == subscribe_at:
            plugin = PodTopologySpread(PodTopologySpreadArgs(), handle)  # replayed the pods so far
        node = nodes[index % len(nodes)]
        pod = _placed(f"p{i}", node.name, pod_app, namespace, deleting)
        cache.add_pod(pod)
        placed.append((pod, node))
    if plugin is None:
        plugin = PodTopologySpread(PodTopologySpreadArgs(), handle)
    # A pod dropped again: counts must follow the removal too.
    if placed:
        cache.remove_pod(placed[0][0])
        placed = placed[1:]
    affinity = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]
    incoming = make_pod(
        "incoming",
        labels={"app": app, "tier": "t1"},
        affinity_terms=affinity if zone_affinity else None,
        tolerations=(),
    )
    incoming = incoming.evolve(spread=pod_from_dict({**incoming.raw, "spec": {
        **incoming.raw["spec"], "topologySpreadConstraints": constraints}}).spread)  # fmt: skip
    table = cache.nodes
    state = CycleState()

    # Filter
    status = plugin.pre_filter(state, incoming, table)
    expected = reference.filter_reasons(incoming, incoming.spread, nodes, placed, affinity_oracle)
    if status.code.name == "SKIP":
        assert all(v is None for v in expected.values())
    else:
        result = plugin.filter_batch(state, incoming, table)
        for node in nodes:
            row = table.row[node.name]
            verdict = expected[node.name]
            assert bool(result.feasible[row]) == (verdict is None), (node, verdict)
            assert bool(result.reasons[MISSING_LABEL][row]) == (verdict == "missing")
            assert bool(result.reasons[REASON][row]) == (verdict == "skew")

    # Score, over the nodes passing the affinity filter minus a few others
    feasible = np.zeros(table.size, np.bool_)
    kept = []
    for i, node in enumerate(nodes):
        if i in infeasible or (zone_affinity and node.labels.get("zone") not in ("a", "b")):
            continue
        feasible[table.row[node.name]] = True
        kept.append(node)
    status = plugin.pre_score(state, incoming, table, feasible)
    want = reference.scores(incoming, incoming.spread, nodes, kept, placed, affinity_oracle)
    if status.code.name == "SKIP":
        assert not any(not c.hard for c in incoming.spread)
        return
    raw = plugin.score_batch(state, incoming, table, feasible)
    got = raw.copy()
    plugin.normalize_scores(state, incoming, got, feasible)
    assert {n.name: int(got[table.row[n.name]]) for n in kept} == want
