"""NodeAffinity: nodeSelector and required node affinity (matchExpressions / matchFields) filter;
preferred node affinity scores (the weights of the preferences a node meets, normalised). A
profile's `addedAffinity` applies to every pod besides its own, as kube's NodeAffinityArgs."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from pysched.api.features import EVERY_POD, NODE_PREFERENCES, PodFeatures
from pysched.api.objects import PodInfo
from pysched.api.selectors import NODE_NAME_FIELD, Requirement, SelectorTerm, requirement_problem
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import PLACEMENT_EVENTS, EventRegistration
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import affinity_mask, field_mask, term_mask
from pysched.framework.nodetable import I64, MAX_NODE_SCORE, Bools, NodeTable
from pysched.framework.registry import ArgsError, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Status
from pysched.plugins.node_affinity.added import AddedAffinity, parse_added_affinity

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"
ENFORCED_REASON = "node(s) didn't match scheduler-enforced node affinity"
CONFLICT_REASON = "pod affinity terms conflict"


@dataclass(frozen=True, slots=True)
class NodeAffinityArgs:
    added_affinity: dict[str, Any] | None = None

    def validate(self) -> None:
        try:
            parse_added_affinity(self.added_affinity)
        except ValueError as err:
            raise ArgsError("addedAffinity", str(err).removeprefix("addedAffinity").lstrip(".: ") or str(err)) from err


def pinned_names(terms: Sequence[SelectorTerm] | None) -> frozenset[str] | None:
    """The only node names required terms allow, as kube's NodeAffinity PreFilter reads them: in
    each term the `metadata.name In` fields, intersected; over the terms, united. None when some
    term names no node that way (any node may match it), or there are no terms."""
    if not terms:
        return None
    allowed: set[str] = set()
    for term in terms:
        named: set[str] | None = None
        for req in term.match_fields:
            if req.key == NODE_NAME_FIELD and req.operator == "In":
                named = set(req.values) if named is None else named & set(req.values)
        if named is None:
            return None
        allowed |= named
    return frozenset(allowed)


def unmatchable(terms: Sequence[SelectorTerm] | None) -> str:
    """Why no required term can match any node, when each holds a requirement kube's
    labels.NewRequirement refuses (a label value the apiserver let through); else ""."""
    first = ""
    for i, term in enumerate(terms or ()):
        problem = next(filter(None, map(requirement_problem, term.match_expressions)), None)
        if problem is None:
            return ""
        first = first or f"node affinity term {i} can match no node: {problem}"
    return first


def _any_term(terms: Sequence[SelectorTerm], nodes: NodeTable) -> Bools:
    mask = np.zeros(nodes.size, np.bool_)
    for term in terms:
        mask |= term_mask(term, nodes)
    return mask


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    NAME: ClassVar[str] = NAME
    added: AddedAffinity = field(default_factory=AddedAffinity)

    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        return (
            "node selector or required node affinity" if pod.node_selector or pod.required_terms is not None else None
        )

    def mask_key(self, pod: PodInfo) -> Hashable:
        return (pod.node_selector, pod.required_terms)  # the added terms are the profile's, fixed

    def _added_mask(self, nodes: NodeTable) -> Bools | None:
        required = self.added.required
        return None if required is None else _any_term(required, nodes)

    def node_mask(self, pod: PodInfo, nodes: NodeTable) -> Bools:
        mask = affinity_mask(pod, nodes)
        added = self._added_mask(nodes)
        return mask if added is None else mask & added

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        own = affinity_mask(pod, nodes)
        added = self._added_mask(nodes)
        # kube's PreFilter pins a pod whose every term names its nodes to those nodes: the others
        # are never filtered, so the diagnosis tells them apart (the mask excludes them already).
        left_out, refusal = None, unmatchable(pod.required_terms)  # told why, not that no node matched
        pinned = None if refusal else pinned_names(pod.required_terms)
        if pinned is not None and not pinned:
            refusal = CONFLICT_REASON
        elif pinned is not None:
            left_out = field_mask(Requirement(NODE_NAME_FIELD, "NotIn", tuple(sorted(pinned))), nodes)
        if added is None:
            return FilterResult(own, {REASON: ~own}, True, left_out, refusal)
        # kube checks the profile's affinity first: a node failing both is told the enforced reason.
        return FilterResult(own & added, {ENFORCED_REASON: ~added, REASON: added & ~own}, True, left_out, refusal)

    # ----- preferred node affinity
    def acts_on(self) -> PodFeatures:
        # Its PreScore skips a pod without preferences; with added ones every pod has some.
        return EVERY_POD if self.added.preferred else NODE_PREFERENCES

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> Status:
        return SUCCESS if pod.preferred_terms or self.added.preferred else SKIP

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        total = np.zeros(nodes.size, np.int64)
        for weight, term in (*pod.preferred_terms, *self.added.preferred):
            total += weight * term_mask(term, nodes)[: nodes.size]
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: I64, feasible: Bools) -> None:
        """kube's DefaultNormalizeScore: scaled to MaxNodeScore by the highest feasible score."""
        highest = int(scores[feasible].max()) if feasible.any() else 0
        if highest > 0:
            scores[:] = scores * MAX_NODE_SCORE // highest

    def events_to_register(self) -> Sequence[EventRegistration]:
        return PLACEMENT_EVENTS


def factory(args: NodeAffinityArgs, handle: Handle) -> NodeAffinity:
    return NodeAffinity(parse_added_affinity(args.added_affinity))


SPEC = PluginSpec(NAME, NodeAffinityArgs, factory, NodeAffinity)
