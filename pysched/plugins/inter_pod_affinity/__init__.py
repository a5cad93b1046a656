"""InterPodAffinity: required and preferred pod affinity / anti-affinity, kube-scheduler v1.36's.

PreFilter works out the verdict of every node from counts kept between cycles (`counts.py`), so
Filter only reads it; PreScore does the same for the scores. Pods without pod affinity, in a
cluster whose placed pods carry no term that concerns them, get Skip at both points and keep the
engine's incremental selection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pysched.api.affinity import AffinityTerm, PodAffinity
from pysched.api.features import EVERY_POD, LABELS, POD_AFFINITY, PodFeatures
from pysched.api.objects import NodeInfo, PodInfo
from pysched.framework.cluster import ClusterBackend
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventKind, EventRegistration, QueueingHint
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.nodetable import I32, I64, MAX_NODE_SCORE, Bools, NodeTable
from pysched.framework.registry import PluginSpec, check_range
from pysched.framework.status import SKIP, SUCCESS, Status, unresolvable
from pysched.plugins.inter_pod_affinity.counts import (
    CarriedTerms,
    Clause,
    Matcher,
    Matches,
    RowCounts,
    any_on_labelled,
    domain_sums,
    domains_hit,
    matches_all,
)

NAME = "InterPodAffinity"
AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
_FILTER_KEY = "InterPodAffinity/filter"
_SCORE_KEY = "InterPodAffinity/score"


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    """kube-scheduler's InterPodAffinityArgs."""

    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    def validate(self) -> None:
        check_range(self, "hard_pod_affinity_weight", 0, 100)


@dataclass(frozen=True, slots=True)
class _Scores:
    scores: I64


def _column(nodes: NodeTable, key: str) -> tuple[I32, int]:
    return nodes.label_column(key), len(nodes.label_values.get(key, {}))


@dataclass(frozen=True, slots=True)
class InterPodAffinity:
    NAME: ClassVar[str] = NAME
    # Its PreFilter counts the placed pods into the cycle's state: the engine runs it again
    # without the nominated pods (not placed yet) and in preemption's dry runs (pods taken off).
    COUNTS_PLACED_PODS: ClassVar[bool] = True
    cluster: ClusterBackend
    nodes: NodeTable
    args: InterPodAffinityArgs
    matches: Matches
    carried: CarriedTerms

    # ----- namespaces
    def _ns_labels(self, namespace: str) -> Mapping[str, str]:
        return self.cluster.namespace_labels(namespace) or {}

    def _clause(self, term: AffinityTerm) -> Clause:
        """The incoming pod's term with its namespaceSelector resolved to namespaces, as kube's
        PreFilter merges them (an empty selector: every namespace)."""
        selector = term.namespace_selector
        if selector.everything:
            return Clause(term.selector, None)
        if selector.nothing:
            return Clause(term.selector, term.namespaces)
        chosen = {ns for ns in self.cluster.namespace_names() if selector.matches(self._ns_labels(ns))}
        return Clause(term.selector, term.namespaces | chosen)

    # ----- filtering
    def _existing_blocked(self, pod: PodInfo) -> Bools | None:
        """Rows in a domain of a placed pod whose required anti-affinity term matches `pod`."""
        if not self.carried.required_anti:
            return None
        nodes = self.nodes
        own: Mapping[str, str] | None = None  # read once a term may match
        blocked: Bools | None = None
        for term in self.carried.anti_index.candidates(pod.labels):
            if own is None:
                own = self._ns_labels(pod.namespace)
            if term.matches(pod.namespace, pod.labels, own):
                rows = self.carried.required_anti[term]
                hit = domains_hit(rows, *_column(nodes, term.topology_key))
                if hit.any():
                    blocked = hit if blocked is None else blocked | hit
        return blocked

    def _verdict(self, pod: PodInfo, existing: Bools | None) -> FilterResult:
        nodes = self.nodes
        size = nodes.size
        affinity = pod.pod_affinity
        affinity_ok = np.ones(size, np.bool_)
        anti_ok = np.ones(size, np.bool_)
        if affinity is not None and affinity.required_affinity:
            terms = affinity.required_affinity
            matcher: Matcher = tuple(self._clause(t) for t in terms)
            rows = self.matches.rows(matcher)
            columns = {t.topology_key: _column(nodes, t.topology_key) for t in terms}
            pods_exist = np.ones(size, np.bool_)
            for column, values in columns.values():
                affinity_ok &= column >= 0  # every topology label must be on the node
                pods_exist &= domains_hit(rows, column, values)
            if any_on_labelled(rows, {k: c for k, (c, _) in columns.items()}) or not matches_all(matcher, pod):
                affinity_ok &= pods_exist
        if affinity is not None:
            for term in affinity.required_anti_affinity:
                rows = self.matches.rows((self._clause(term),))
                anti_ok &= ~domains_hit(rows, *_column(nodes, term.topology_key))
        existing_ok = ~existing if existing is not None else np.ones(size, np.bool_)
        present = nodes.present[:size]
        not_affinity = ~affinity_ok
        not_anti = affinity_ok & ~anti_ok
        not_existing = affinity_ok & anti_ok & ~existing_ok
        reasons = {
            reason: where
            for reason, where in (
                (AFFINITY_REASON, not_affinity),
                (ANTI_AFFINITY_REASON, not_anti),
                (EXISTING_ANTI_AFFINITY_REASON, not_existing),
            )
            if where.any()
        }
        feasible = affinity_ok & anti_ok & existing_ok
        # kube: a node failing the pod's own affinity is UnschedulableAndUnresolvable (removing
        # pods cannot add the pods it needs); anti-affinity failures are Unschedulable.
        return FilterResult(feasible, reasons, unresolvable=present & not_affinity)

    def acts_on(self) -> PodFeatures:
        """Pods with terms of their own; while placed pods carry terms (the symmetric rule, and
        their scoring terms unless those are ignored), also every pod those terms may select:
        labelled pods, or every pod once a term requires no label value."""
        carried = self.carried
        anti = bool(carried.required_anti)
        scoring = bool(carried.scoring) and not self.args.ignore_preferred_terms_of_existing_pods
        if not anti and not scoring:
            return POD_AFFINITY
        if (anti and carried.anti_index.unindexed) or (scoring and carried.scoring_index.unindexed):
            return EVERY_POD
        return PodFeatures(POD_AFFINITY | LABELS)

    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        affinity = pod.pod_affinity
        required = affinity is not None and (affinity.required or bool(affinity.problem))
        return "required pod affinity or anti-affinity" if required else None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        affinity = pod.pod_affinity
        if affinity is not None and affinity.problem:
            return unresolvable(f"parsing pod: {affinity.problem}")
        existing = self._existing_blocked(pod)
        if existing is None and (affinity is None or not affinity.required):
            return SKIP
        state.write(_FILTER_KEY, self._verdict(pod, existing))
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        found = state.read(_FILTER_KEY, FilterResult)
        if found is not None and found.feasible.shape[0] == nodes.size:
            return found
        affinity = pod.pod_affinity
        if affinity is not None and affinity.problem:
            rows = np.zeros(nodes.size, np.bool_)
            return FilterResult(rows, {f"parsing pod: {affinity.problem}": ~rows}, unresolvable=True)
        return self._verdict(pod, self._existing_blocked(pod))

    # ----- scoring
    def _raw_scores(self, pod: PodInfo, affinity: PodAffinity | None, with_existing: bool) -> I64:
        nodes = self.nodes
        by_key: dict[str, list[tuple[RowCounts, int]]] = {}
        if affinity is not None and not affinity.problem:
            for sign, weighted in ((1, affinity.preferred_affinity), (-1, affinity.preferred_anti_affinity)):
                for w in weighted:
                    rows = self.matches.rows((self._clause(w.term),))
                    if rows:
                        by_key.setdefault(w.term.topology_key, []).append((rows, sign * w.weight))
        if with_existing:
            own = self._ns_labels(pod.namespace)
            for carried in self.carried.scoring_index.candidates(pod.labels):
                term, weight = carried
                if term.matches(pod.namespace, pod.labels, own):
                    by_key.setdefault(term.topology_key, []).append((self.carried.scoring[carried], weight))
        scores = np.zeros(nodes.size, np.int64)
        for key, contributions in by_key.items():
            scores += domain_sums(contributions, *_column(nodes, key))
        return scores

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> Status:
        affinity = pod.pod_affinity
        own_terms = affinity is not None and affinity.preferred and not affinity.problem
        existing = bool(self.carried.scoring)
        if self.args.ignore_preferred_terms_of_existing_pods and not own_terms:
            return SKIP
        if not own_terms and not existing:
            return SKIP
        scores = self._raw_scores(pod, affinity, existing)
        if not scores.any():
            return SKIP  # every node scores 0 (kube: no topology score, or one that normalises to 0)
        state.write(_SCORE_KEY, _Scores(scores))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        found = state.read(_SCORE_KEY, _Scores)
        if found is not None and found.scores.shape[0] == nodes.size:
            return found.scores
        ignore = self.args.ignore_preferred_terms_of_existing_pods
        affinity = pod.pod_affinity
        own_terms = affinity is not None and affinity.preferred
        return self._raw_scores(pod, affinity, not ignore or bool(own_terms))

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: I64, feasible: Bools) -> None:
        if not feasible.any():
            return
        low, high = int(scores[feasible].min()), int(scores[feasible].max())
        if high == low:
            scores[:] = 0
            return
        scaled = float(MAX_NODE_SCORE) * ((scores - low).astype(np.float64) / float(high - low))
        scores[:] = scaled.astype(np.int64)

    # ----- queueing hints
    def _matches_all(self, terms: Sequence[AffinityTerm], other: PodInfo) -> bool:
        return matches_all(tuple(self._clause(t) for t in terms), other)

    def _after_pod_add(self, pod: PodInfo, event: ClusterEvent) -> QueueingHint:
        added = event.new
        affinity = pod.pod_affinity
        if not isinstance(added, PodInfo) or affinity is None:
            return QueueingHint.SKIP
        if self._matches_all(affinity.required_affinity, added):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _after_pod_update(self, pod: PodInfo, event: ClusterEvent) -> QueueingHint:
        old, new = event.old, event.new
        if not isinstance(old, PodInfo) or not isinstance(new, PodInfo):
            return QueueingHint.SKIP
        affinity = pod.pod_affinity
        if affinity is not None:
            if not self._matches_all(affinity.required_affinity, old) and self._matches_all(
                affinity.required_affinity, new
            ):
                return QueueingHint.QUEUE
            anti = [self._clause(t) for t in affinity.required_anti_affinity]
            if any(c.matches(old) and not c.matches(new) for c in anti):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _after_pod_delete(self, pod: PodInfo, event: ClusterEvent) -> QueueingHint:
        gone = event.old
        if not isinstance(gone, PodInfo):
            return QueueingHint.SKIP
        affinity = pod.pod_affinity
        if affinity is not None and any(self._clause(t).matches(gone) for t in affinity.required_anti_affinity):
            return QueueingHint.QUEUE
        # The deleted pod's own anti-affinity may have been what kept `pod` out (the symmetric rule).
        carried = gone.pod_affinity
        if carried is not None:
            own = self._ns_labels(pod.namespace)
            if any(t.matches(pod.namespace, pod.labels, own) for t in carried.required_anti_affinity):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _after_node_change(self, pod: PodInfo, event: ClusterEvent) -> QueueingHint:
        node = event.new
        affinity = pod.pod_affinity
        if not isinstance(node, NodeInfo):
            return QueueingHint.SKIP
        if affinity is None or not affinity.required:
            return QueueingHint.QUEUE  # rejected by placed pods' anti-affinity: a new domain may help
        old = event.old if isinstance(event.old, NodeInfo) else None
        was = {} if old is None else old.labels
        # kube-scheduler's hint: affinity may be met on a node that gained the term's topology key
        # (or was added with it) or moved to another domain; anti-affinity on any node added (one
        # without the key always passes it), or one that lost the key or moved to another domain.
        for term in affinity.required_affinity:
            key = term.topology_key
            if key in node.labels and (key not in was or was[key] != node.labels[key]):
                return QueueingHint.QUEUE
        for term in affinity.required_anti_affinity:
            key = term.topology_key
            if old is None or (key in was and (key not in node.labels or was[key] != node.labels[key])):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (
            EventRegistration(EventKind.ASSIGNED_POD_ADD, self._after_pod_add),
            EventRegistration(EventKind.ASSIGNED_POD_UPDATE, self._after_pod_update),
            EventRegistration(EventKind.POD_DELETE, self._after_pod_delete),
            EventRegistration(EventKind.NODE_ADD, self._after_node_change),
            EventRegistration(EventKind.NODE_UPDATE, self._after_node_change),
        )


def factory(args: InterPodAffinityArgs, handle: Handle) -> InterPodAffinity:
    matches = Matches(handle.pods)
    carried = CarriedTerms(args.hard_pod_affinity_weight, handle.gates.changed)
    handle.pods.subscribe(carried, POD_AFFINITY)  # only pods with terms carry any
    return InterPodAffinity(handle.cluster, handle.nodes, args, matches, carried)


SPEC = PluginSpec(NAME, InterPodAffinityArgs, factory, InterPodAffinity)
