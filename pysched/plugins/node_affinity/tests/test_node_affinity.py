from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import make_node, make_pod
from pysched.api.objects import NodeInfo, Requirement
from pysched.framework.cycle_state import CycleState
from pysched.framework.nodetable import NodeTable
from pysched.plugins.node_affinity import REASON, NodeAffinity

KEYS = ["zone", "gen", "pool"]
VALUES = ["a", "b", "1", "7", "12", "x1"]


def _oracle_requirement(req: Requirement, node: NodeInfo) -> bool:
    """kube's labels.Selector semantics, one node at a time."""
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
