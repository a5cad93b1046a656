"""TaintToleration: NoSchedule/NoExecute taints must be tolerated; PreferNoSchedule lowers the score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pysched.api.features import EVERY_POD, NO_FEATURES, PodFeatures
from pysched.api.objects import PodInfo, Taint, Toleration
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import PLACEMENT_EVENTS, EventRegistration
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import mask_result, tolerated_mask
from pysched.framework.nodetable import I64, MAX_NODE_SCORE, Bools, NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Status

NAME = "TaintToleration"
# kube-scheduler v1.36 no longer names the taint (its key and value may be private).
REASON = "node(s) had untolerated taint(s)"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
MAX_MEMO = 1024  # pre_score answers kept per node-table state


def intolerable_preferred(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    relevant = [t for t in tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
    return sum(
        1 for taint in taints if taint.effect == PREFER_NO_SCHEDULE and not any(t.tolerates(taint) for t in relevant)
    )


@dataclass(frozen=True, slots=True)
class TaintToleration:
    NAME: ClassVar[str] = NAME
    # pre_score's answer per pod tolerations, for the node-table state in `_memo_state`.
    _memo: dict[tuple[Toleration, ...], bool] = field(default_factory=dict, compare=False, repr=False)
    _memo_state: list[tuple[NodeTable, int, int]] = field(default_factory=list, compare=False, repr=False)
    nodes: NodeTable | None = field(default=None, compare=False, repr=False)  # the profile's, for acts_on

    def mask_key(self, pod: PodInfo) -> tuple[Toleration, ...]:
        return pod.tolerations

    def node_mask(self, pod: PodInfo, nodes: NodeTable) -> Bools:
        return tolerated_mask(pod, nodes)

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        return mask_result(self.node_mask(pod, nodes), REASON, unresolvable=True)

    def acts_on(self) -> PodFeatures:
        """Its score (the only point it is gated at) ranks nodes only while some node has a
        PreferNoSchedule taint; the node table's generation changes with every taint."""
        nodes = self.nodes
        if nodes is None:
            return EVERY_POD
        in_use = np.unique(nodes.taint_set[: nodes.size][nodes.present[: nodes.size]])
        for index in in_use.tolist():  # interned sets of live nodes only: stale ones never reopen it
            if any(taint.effect == PREFER_NO_SCHEDULE for taint in nodes.taint_sets[index]):
                return EVERY_POD
        return NO_FEATURES

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> Status:
        """Skip when no node has a PreferNoSchedule taint the pod does not tolerate: every node
        would score the same, and the pod keeps the kernel's incremental selection. The answer
        is kept per tolerations until the node table's taints may have changed."""
        memo, kept = self._memo, self._memo_state
        generation, sets = nodes.generation, len(nodes.taint_sets)
        if not kept or kept[0][0] is not nodes or kept[0][1:] != (generation, sets) or len(memo) >= MAX_MEMO:
            memo.clear()
            kept[:] = [(nodes, generation, sets)]
        found = memo.get(pod.tolerations)
        if found is None:
            found = any(intolerable_preferred(taints, pod.tolerations) for taints in nodes.taint_sets)
            memo[pod.tolerations] = found
        return SUCCESS if found else SKIP

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        """Raw score: how many PreferNoSchedule taints the pod does not tolerate (normalized, reversed)."""
        counts = np.array([intolerable_preferred(t, pod.tolerations) for t in nodes.taint_sets], np.int64)
        return counts[nodes.taint_set[: nodes.size]]

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: I64, feasible: Bools) -> None:
        highest = int(scores[feasible].max()) if feasible.any() else 0
        if highest == 0:
            scores[:] = MAX_NODE_SCORE
        else:
            scores[:] = MAX_NODE_SCORE - scores * MAX_NODE_SCORE // highest

    def events_to_register(self) -> Sequence[EventRegistration]:
        return PLACEMENT_EVENTS


def factory(args: NoArgs, handle: Handle) -> TaintToleration:
    return TaintToleration(nodes=handle.nodes)


SPEC = PluginSpec(NAME, NoArgs, factory, TaintToleration)
