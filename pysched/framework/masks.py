"""Helpers for filters whose verdict is a per-node mask (labels, taints, flags).

The node-affinity and taint masks live here because more than one plugin reads them: NodeAffinity
and TaintToleration filter by them, PodTopologySpread's node inclusion policies count by them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pysched.api.objects import PodInfo, Requirement, SelectorTerm, Taint, Toleration
from pysched.api.selectors import NODE_NAME_FIELD, go_int, requirement_problem
from pysched.framework.interfaces import FilterResult
from pysched.framework.nodetable import Bools, NodeTable

FILTER_EFFECTS = ("NoSchedule", "NoExecute")  # the taint effects a pod must tolerate to land


def mask_result(mask: Bools, reason: str, *, unresolvable: bool) -> FilterResult:
    return FilterResult(mask, {reason: ~mask}, unresolvable)


def _label_ids(nodes: NodeTable, key: str, values: Sequence[str]) -> list[int]:
    return [nodes.label_value_id(key, v) for v in values]


def requirement_mask(req: Requirement, nodes: NodeTable) -> Bools:
    """Rows whose labels satisfy one matchExpressions requirement (k8s labels.Selector semantics)."""
    if requirement_problem(req) is not None:
        return np.zeros(nodes.size, np.bool_)
    column = nodes.label_column(req.key)
    if req.operator == "In":
        return np.isin(column, _label_ids(nodes, req.key, req.values))
    if req.operator == "NotIn":
        return ~np.isin(column, _label_ids(nodes, req.key, req.values))
    if req.operator == "Exists":
        return column >= 0
    if req.operator == "DoesNotExist":
        return column < 0
    if req.operator in ("Gt", "Lt"):
        bound = go_int(req.values[0]) if len(req.values) == 1 else None
        if bound is None:
            return np.zeros(nodes.size, np.bool_)
        # One comparison per distinct label value, then a lookup per node.
        ids = nodes.label_values.get(req.key, {})
        passing = np.zeros(len(ids) + 1, np.bool_)  # the extra slot is "label absent" (-1)
        for value, value_id in ids.items():
            number = go_int(value)
            if number is not None:
                passing[value_id] = number > bound if req.operator == "Gt" else number < bound
        return passing[column]
    return np.zeros(nodes.size, np.bool_)  # not reached: requirement_problem refuses other operators


def field_mask(req: Requirement, nodes: NodeTable) -> Bools:
    """matchFields supports only metadata.name with In / NotIn."""
    if req.key != NODE_NAME_FIELD or req.operator not in ("In", "NotIn"):
        return np.zeros(nodes.size, np.bool_)
    hit = np.zeros(nodes.size, np.bool_)
    for name in req.values:
        row = nodes.row.get(name)  # type: ignore[call-overload]
        if row is not None:
            hit[row] = True
    return hit if req.operator == "In" else ~hit


def term_mask(term: SelectorTerm, nodes: NodeTable) -> Bools:
    if not term.match_expressions and not term.match_fields:
        return np.zeros(nodes.size, np.bool_)  # an empty term matches no node
    mask = np.ones(nodes.size, np.bool_)
    for req in term.match_expressions:
        mask &= requirement_mask(req, nodes)
    for req in term.match_fields:
        mask &= field_mask(req, nodes)
    return mask


def affinity_mask(pod: PodInfo, nodes: NodeTable) -> Bools:
    """Rows matching the pod's nodeSelector and required node affinity (kube's RequiredNodeAffinity)."""
    mask = np.ones(nodes.size, np.bool_)
    for key, value in pod.node_selector:
        mask &= nodes.label_column(key) == nodes.label_value_id(key, value)
    if pod.required_terms is not None:
        any_term = np.zeros(nodes.size, np.bool_)
        for term in pod.required_terms:
            any_term |= term_mask(term, nodes)
        mask &= any_term
    return mask


def first_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    for taint in taints:
        if taint.effect in FILTER_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def tolerated_mask(pod: PodInfo, nodes: NodeTable) -> Bools:
    """Rows whose NoSchedule / NoExecute taints the pod tolerates (one check per taint set)."""
    ok = np.array([first_untolerated(taints, pod.tolerations) is None for taints in nodes.taint_sets], np.bool_)
    return ok[nodes.taint_set[: nodes.size]]
