"""TaintToleration: NoSchedule/NoExecute taints must be tolerated; PreferNoSchedule lowers the score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

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


def intolerable_preferred(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    relevant = [t for t in tolerations if t.effect in ("", "PreferNoSchedule")]
    return sum(
        1 for taint in taints if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in relevant)
    )


@dataclass(frozen=True, slots=True)
class TaintToleration:
    NAME: ClassVar[str] = NAME

    def mask_key(self, pod: PodInfo) -> tuple[Toleration, ...]:
        return pod.tolerations

    def node_mask(self, pod: PodInfo, nodes: NodeTable) -> Bools:
        return tolerated_mask(pod, nodes)

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        return mask_result(self.node_mask(pod, nodes), REASON, unresolvable=True)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> Status:
        """Skip when no node has a PreferNoSchedule taint the pod does not tolerate: every node
        would score the same, and the pod keeps the kernel's incremental selection."""
        if any(intolerable_preferred(taints, pod.tolerations) for taints in nodes.taint_sets):
            return SUCCESS
        return SKIP

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
    return TaintToleration()


SPEC = PluginSpec(NAME, NoArgs, factory, TaintToleration)
