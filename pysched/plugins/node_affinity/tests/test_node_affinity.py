import asyncio
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import make_node, make_pod, make_pod_dict, node_dict, pod_dict
from pysched.api.features import NODE_PREFERENCES
from pysched.api.ids import PodKey
from pysched.api.objects import NodeInfo, Requirement, pod_from_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.cycle_state import CycleState
from pysched.framework.nodetable import NodeTable
from pysched.framework.status import Code
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.node_affinity import REASON, NodeAffinity, pinned_names
from pysched.scheduler.scheduler import Scheduler

KEYS = ["zone", "gen", "pool"]
VALUES = ["a", "b", "1", "7", "12", "x1"]


def _oracle_requirement(req: Requirement, node: NodeInfo) -> bool:
    """kube's labels.Selector semantics, one node at a time."""
    if (req.operator in ("In", "NotIn")) != bool(req.values) and req.operator not in ("Gt", "Lt"):
        return False  # labels.NewRequirement refuses it: the term matches nothing
    has = req.key in node.labels
    value = node.labels.get(req.key, "")
    if req.operator == "In":
        return has and value in req.values
    if req.operator == "NotIn":
        return not has or value not in req.values
    if req.operator == "Exists":
        return has
    if req.operator == "DoesNotExist":
        return not has
    if req.operator in ("Gt", "Lt"):
        if not has or len(req.values) != 1:
            return False
        try:
            left, right = int(value), int(req.values[0])
        except ValueError:
            return False
        return left > right if req.operator == "Gt" else left < right
    return False


def _oracle(pod: Any, node: NodeInfo) -> bool:
    if any(node.labels.get(k) != v for k, v in pod.node_selector):
        return False
    if pod.required_terms is None:
        return True
    for term in pod.required_terms:
        if not term.match_expressions and not term.match_fields:
            continue
        ok = all(_oracle_requirement(r, node) for r in term.match_expressions)
        for f in term.match_fields:
            ok = (
                ok
                and f.key == "metadata.name"
                and ((node.name in f.values) == (f.operator == "In"))
                and f.operator in ("In", "NotIn")
            )
        if ok:
            return True
    return False


labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
requirement = st.builds(
    lambda k, op, vs: {"key": k, "operator": op, "values": vs},
    st.sampled_from(KEYS),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    st.lists(st.sampled_from(VALUES), max_size=2),
)
name_field = st.builds(
    lambda op, vs: {"key": "metadata.name", "operator": op, "values": vs},
    st.sampled_from(["In", "NotIn"]),
    st.lists(st.sampled_from(["n0", "n1", "n9"]), max_size=2),
)
term = st.builds(
    lambda e, f: {"matchExpressions": e, "matchFields": f},
    st.lists(requirement, max_size=3),
    st.lists(name_field, max_size=1),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(labels, min_size=1, max_size=8),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
    st.none() | st.lists(term, max_size=3),
)
def test_vectorised_mask_matches_per_node_semantics(
    node_labels: list[dict[str, str]], selector: dict[str, str], terms: list[dict[str, Any]] | None
) -> None:
    table = NodeTable()
    nodes = [make_node(f"n{i}", labels=lab) for i, lab in enumerate(node_labels)]
    for node in nodes:
        table.add(node)
    pod = make_pod("p", node_selector=selector, affinity_terms=terms)
    expected = [_oracle(pod, node) for node in nodes]
    assert list(NodeAffinity().node_mask(pod, table)) == expected


def test_filter_reports_kube_scheduler_reason() -> None:
    table = NodeTable()
    table.add(make_node("a", labels={"zone": "a"}))
    table.add(make_node("b", labels={"zone": "b"}))
    result = NodeAffinity().filter_batch(CycleState(), make_pod("p", node_selector={"zone": "b"}), table)
    np.testing.assert_array_equal(result.feasible, [False, True])
    assert result.unresolvable and list(result.reasons[REASON]) == [True, False]


def test_empty_terms_match_nothing() -> None:
    table = NodeTable()
    table.add(make_node("a"))
    assert not NodeAffinity().node_mask(make_pod("p", affinity_terms=[]), table).any()
    assert not NodeAffinity().node_mask(make_pod("p", affinity_terms=[{}]), table).any()


def test_a_requirement_kube_cannot_build_matches_no_node_and_the_pod_is_told_why() -> None:
    """The apiserver checks operators and value counts, not label values; kube-scheduler's
    labels.NewRequirement does, and a term holding such a requirement matches no node."""
    table = NodeTable()
    table.add(make_node("a", labels={"pool": "cpu", "gen": "3"}))
    bad = [
        {"key": "pool", "operator": "NotIn", "values": ["gpu pool"]},
        {"key": "gen", "operator": "Gt", "values": ["-1"]},
        {"key": "gen", "operator": "Lt", "values": ["+9"]},
        {"key": "pool", "operator": "In", "values": ["cpu", "bad/value"]},
        {"key": "bad key!", "operator": "DoesNotExist"},
    ]
    for requirement in bad:
        result = NodeAffinity().filter_batch(
            CycleState(), make_pod("p", affinity_terms=[{"matchExpressions": [requirement]}]), table
        )
        assert not result.feasible.any()
        assert result.pre_filter_refusal.startswith("node affinity term 0 can match no node: label "), requirement
    # Another term kube can build still places the pod.
    good = {"key": "pool", "operator": "In", "values": ["cpu"]}
    pod = make_pod("p", affinity_terms=[{"matchExpressions": [bad[0]]}, {"matchExpressions": [good]}])
    result = NodeAffinity().filter_batch(CycleState(), pod, table)
    assert list(result.feasible) == [True] and result.pre_filter_refusal == ""


def _preferring(terms: list[tuple[int, dict[str, Any]]]) -> Any:
    raw = make_pod_dict("p")
    preferred = [{"weight": weight, "preference": term} for weight, term in terms]
    raw["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    return pod_from_dict(raw)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(labels, min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 100), term), max_size=3),
    st.data(),
)
def test_preferred_score_is_kubes_weight_sum_normalised_over_feasible_nodes(
    node_labels: list[dict[str, str]], terms: list[tuple[int, dict[str, Any]]], data: st.DataObject
) -> None:
    """Each node scores the weights of the preferences it meets (a term of weight 0 or without
    requirements counts for nothing), scaled so the best feasible node gets 100."""
    table = NodeTable()
    nodes = [make_node(f"n{i}", labels=lab) for i, lab in enumerate(node_labels)]
    for node in nodes:
        table.add(node)
    pod = _preferring(terms)
    feasible = np.array(data.draw(st.lists(st.booleans(), min_size=len(nodes), max_size=len(nodes))), np.bool_)
    raw = []
    for node in nodes:
        total = 0
        for weight, preference in terms:
            wrapped = make_pod("q", affinity_terms=[preference])
            if weight and (preference["matchExpressions"] or preference["matchFields"]) and _oracle(wrapped, node):
                total += weight
        raw.append(total)
    highest = max((score for score, ok in zip(raw, feasible, strict=True) if ok), default=0)
    expected = [score * 100 // highest if highest else score for score in raw]
    plugin = NodeAffinity()
    status = plugin.pre_score(CycleState(), pod, table, feasible)
    assert status.code is (Code.SUCCESS if pod.preferred_terms else Code.SKIP)
    assert bool(pod.features & NODE_PREFERENCES) == bool(pod.preferred_terms)
    scores = plugin.score_batch(CycleState(), pod, table, feasible)
    plugin.normalize_scores(CycleState(), pod, scores, feasible)
    assert list(scores) == expected


def test_a_preferred_zone_wins_when_it_fits() -> None:
    async def run() -> None:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        for name, zone in (("a", "z1"), ("b", "z2"), ("c", "z1")):
            cluster.add_node(node_dict(name, labels={"zone": zone}))
        registry = default_registry()
        scheduler = Scheduler(builtin_config(registry).only("default"), cluster, clock, registry)
        await scheduler.start()
        raw = pod_dict("p", scheduler_name="default")
        preference = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}
        preferred = [{"weight": 10, "preference": preference}]
        raw["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
        for index in range(3):
            cluster.create_pod({**raw, "metadata": {**raw["metadata"], "name": f"p{index}", "uid": f"u{index}"}})
        await scheduler.run_until_idle()
        assert {cluster.pods[PodKey(f"default/p{i}")].node_name for i in range(3)} == {"b"}

    asyncio.run(run())


def _named(*names: str, operator: str = "In") -> dict[str, Any]:
    """One term whose `metadata.name` requirements each name one node (the API server allows one
    value per field requirement)."""
    return {"matchFields": [{"key": "metadata.name", "operator": operator, "values": [name]} for name in names]}


def test_a_pod_whose_every_term_names_nodes_is_pinned_to_them() -> None:
    """kube's NodeAffinity PreFilter: a term's `metadata.name In` fields intersect, the terms unite;
    a term that names no node that way (labels only, NotIn) lets every node in."""
    terms = make_pod("p", affinity_terms=[_named("a"), _named("b"), _named("c")]).required_terms
    assert pinned_names(terms) == frozenset({"a", "b", "c"})
    assert pinned_names(make_pod("p", affinity_terms=[_named("b", "b")]).required_terms) == frozenset({"b"})
    labels = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    assert pinned_names(make_pod("p", affinity_terms=[_named("a"), labels]).required_terms) is None
    assert pinned_names(make_pod("p", affinity_terms=[_named("a", operator="NotIn")]).required_terms) is None
    assert pinned_names(make_pod("p", node_selector={"zone": "a"}).required_terms) is None
    assert pinned_names(make_pod("p", affinity_terms=[_named("a", "b")]).required_terms) == frozenset()


def _failure_of(terms: list[dict[str, Any]], nominated: str = "") -> str:
    """The FailedScheduling message of a 4-CPU pod with these required terms, on a tainted node
    `a`, a 6-CPU node `b` with 2 free (an equal-priority pod holds the rest: nothing to preempt,
    but not beyond its allocatable) and a free node `c` (the built-in default profile)."""

    async def run() -> str:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        cluster.add_node(node_dict("a", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))
        cluster.add_node(node_dict("b", cpu="6"))
        cluster.add_node(node_dict("c"))
        cluster.create_pod(pod_dict("held", cpu="4", node_name="b", scheduler_name="default"))
        registry = default_registry()
        scheduler = Scheduler(builtin_config(registry).only("default"), cluster, clock, registry)
        await scheduler.start()
        raw = pod_dict("p", cpu="4", scheduler_name="default", affinity_terms=terms)
        if nominated:
            raw["status"] = {"nominatedNodeName": nominated}
        cluster.create_pod(raw)
        await scheduler.run_until_idle()
        await scheduler.stop()
        assert cluster.pods[PodKey("default/p")].node_name is None
        return [e.note for e in cluster.events if e.reason == "FailedScheduling"][-1]

    return asyncio.run(run())


def test_the_nodes_a_pinned_pod_leaves_out_are_told_as_kube_tells_them() -> None:
    """kube never filters the nodes its PreFilter left out: tainted or not, they are counted as
    "didn't satisfy plugin(s) [NodeAffinity]" (not in the taint's or the affinity's own words),
    and preemption does not look at them."""
    assert _failure_of([_named("b"), _named("gone")]) == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )
    assert _failure_of([_named("a", "b")]).startswith("0/3 nodes are available: pod affinity terms conflict.")
    labels = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]}
    unpinned = _failure_of([_named("b"), labels])  # one term names no node: every node is filtered
    assert unpinned.startswith(
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s)."
    )
    # A nominated node is filtered before the others (kube's evaluateNominatedNode): its own words.
    assert _failure_of([_named("b")], nominated="c").startswith(
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )
