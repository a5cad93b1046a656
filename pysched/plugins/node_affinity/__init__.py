"""NodeAffinity: nodeSelector and required node affinity (matchExpressions / matchFields) filter;
preferred node affinity scores (the weights of the preferences a node meets, normalised)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pysched.api.features import NODE_PREFERENCES, PodFeatures
from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import PLACEMENT_EVENTS, EventRegistration
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import affinity_mask, mask_result, term_mask
from pysched.framework.nodetable import I64, MAX_NODE_SCORE, Bools, NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Status

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    NAME: ClassVar[str] = NAME

    def mask_key(self, pod: PodInfo) -> Hashable:
        return (pod.node_selector, pod.required_terms)

    def node_mask(self, pod: PodInfo, nodes: NodeTable) -> Bools:
        return affinity_mask(pod, nodes)

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        return mask_result(self.node_mask(pod, nodes), REASON, unresolvable=True)

    # ----- preferred node affinity
    def acts_on(self) -> PodFeatures:
        return NODE_PREFERENCES  # its PreScore skips a pod without preferences

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> Status:
        return SUCCESS if pod.preferred_terms else SKIP

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        total = np.zeros(nodes.size, np.int64)
        for weight, term in pod.preferred_terms:
            total += weight * term_mask(term, nodes)[: nodes.size]
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: I64, feasible: Bools) -> None:
        """kube's DefaultNormalizeScore: scaled to MaxNodeScore by the highest feasible score."""
        highest = int(scores[feasible].max()) if feasible.any() else 0
        if highest > 0:
            scores[:] = scores * MAX_NODE_SCORE // highest

    def events_to_register(self) -> Sequence[EventRegistration]:
        return PLACEMENT_EVENTS


def factory(args: NoArgs, handle: Handle) -> NodeAffinity:
    return NodeAffinity()


SPEC = PluginSpec(NAME, NoArgs, factory, NodeAffinity)
