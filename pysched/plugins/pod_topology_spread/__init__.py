"""PodTopologySpread: spread matching pods over topology domains (kube-scheduler's plugin).

DoNotSchedule constraints filter (PreFilter measures the domains, Filter compares each node's
domain with the global minimum); ScheduleAnyway constraints score (PreScore picks them, Score
counts, NormalizeScore turns fewer matching pods into higher scores). Pods without constraints
get the profile's default constraints (kube's `System` defaulting: hostname maxSkew 3, zone
maxSkew 5, both ScheduleAnyway), selecting the pods of the Services and the controller the pod
belongs to; a pod none select gets none, so PreFilter and PreScore return Skip for it.

Counts come from `SelectorCounts` (matching pods per node row per selector, kept from the
placement notices); a cycle aggregates them per domain with one bincount per constraint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pysched.api.features import CONTROLLER, LABELS, SPREAD, PodFeatures
from pysched.api.inputs import key_text
from pysched.api.labels import HOSTNAME_LABEL, ZONE_LABEL
from pysched.api.limits import clip
from pysched.api.objects import NodeInfo, PodInfo
from pysched.api.spread import (
    SpreadConstraint,
    SpreadSelector,
    parse_constraint,
    parse_selector,
    spread_constraints,
)
from pysched.framework.cluster import ClusterBackend
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventKind, EventRegistration, QueueingHint
from pysched.framework.interfaces import FilterResult, Handle
from pysched.framework.masks import affinity_mask, tolerated_mask
from pysched.framework.nodetable import I32, I64, MAX_NODE_SCORE, Bools, NodeTable
from pysched.framework.registry import ArgsError, PluginSpec
from pysched.framework.status import SKIP, SUCCESS, Status, unresolvable
from pysched.plugins.pod_topology_spread.counts import SelectorCounts

NAME = "PodTopologySpread"
REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = REASON + " (missing required label)"
HOSTNAME = HOSTNAME_LABEL
ZONE = ZONE_LABEL
SYSTEM = "System"
LIST = "List"

SYSTEM_DEFAULTS = (
    SpreadConstraint(max_skew=3, topology_key=HOSTNAME, hard=False),
    SpreadConstraint(max_skew=5, topology_key=ZONE, hard=False),
)

# A default constraint's fields: a pod's topologySpreadConstraint's but labelSelector and
# matchLabelKeys (its selector is the pod's Services' and controller's, with nothing merged in)
CONSTRAINT_FIELDS = (
    "maxSkew",
    "topologyKey",
    "whenUnsatisfiable",
    "minDomains",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
)

_FILTER_KEY = "PodTopologySpread/filter"
_SCORE_KEY = "PodTopologySpread/score"


@dataclass(frozen=True, slots=True)
class PodTopologySpreadArgs:
    # Constraints for pods that have none, as in KubeSchedulerConfiguration (no labelSelector:
    # it comes from the Services / controllers selecting the pod). Only with defaultingType List.
    default_constraints: tuple[Mapping[str, Any], ...] = ()
    defaulting_type: str = SYSTEM  # System: hostname maxSkew 3 + zone maxSkew 5, ScheduleAnyway

    def validate(self) -> None:
        if self.defaulting_type not in (SYSTEM, LIST):
            raise ArgsError("defaultingType", f"{clip(self.defaulting_type)} is not System or List")
        if self.defaulting_type == SYSTEM and self.default_constraints:
            raise ArgsError("defaultConstraints", "must be empty with defaultingType System")
        for i, constraint in enumerate(self.default_constraints):
            if not isinstance(constraint, Mapping):
                raise ArgsError("defaultConstraints", f"entry {clip(constraint)} is not a map")
            if "labelSelector" in constraint:
                raise ArgsError("defaultConstraints", "a default constraint must not define a labelSelector")
            if "matchLabelKeys" in constraint:  # kube-scheduler replaces the merged selector: ignored there too
                raise ArgsError(
                    f"defaultConstraints[{i}].matchLabelKeys",
                    "a default constraint's selector is the pod's Services' and controller's; no keys are merged in",
                )
            unknown = [key for key in constraint if key not in CONSTRAINT_FIELDS]
            if unknown:  # a misspelt key would be left out silently
                accepted = ", ".join(CONSTRAINT_FIELDS)
                raise ArgsError(
                    f"defaultConstraints[{i}].{key_text(unknown[0])}", f"unknown field (accepted: {accepted})"
                )
        try:
            parsed = spread_constraints(list(self.default_constraints))
        except (TypeError, ValueError) as err:
            raise ArgsError("defaultConstraints", str(err)) from None
        seen: dict[tuple[str, bool], int] = {}
        for i, (raw, parsed_constraint) in enumerate(zip(self.default_constraints, parsed, strict=True)):
            if parsed_constraint.problem:
                raise ArgsError("defaultConstraints", parsed_constraint.problem)
            if raw.get("minDomains") is not None and not parsed_constraint.hard:
                # only the DoNotSchedule filter reads it; the API refuses it on a pod's ScheduleAnyway constraint
                raise ArgsError(
                    f"defaultConstraints[{i}].minDomains", "applies to whenUnsatisfiable DoNotSchedule only"
                )
            pair = (parsed_constraint.topology_key, parsed_constraint.hard)
            if pair in seen:  # kube's validateConstraintNotRepeat
                raise ArgsError(
                    f"defaultConstraints[{i}]",
                    f"repeats the topologyKey and whenUnsatisfiable of defaultConstraints[{seen[pair]}]",
                )
            seen[pair] = i

    def constraints(self) -> tuple[SpreadConstraint, ...]:
        if self.defaulting_type == SYSTEM:
            return SYSTEM_DEFAULTS
        return tuple(parse_constraint(c) for c in self.default_constraints)


@dataclass(frozen=True, slots=True)
class _Hard:
    """One DoNotSchedule constraint as PreFilter measured it."""

    max_skew: int
    column: I32  # the topology label's value id per row, -1 absent
    per_value: I64  # matching pods per value id over the eligible rows; a last 0 slot for -1
    min_match: int  # the global minimum (0 while fewer domains than minDomains)
    self_match: int


@dataclass(frozen=True, slots=True)
class _Soft:
    constraints: tuple[tuple[SpreadConstraint, SpreadSelector], ...]
    require_all: bool  # nodes lacking a topology key are left out of scoring


def _node_ok(nodes: NodeTable, pod: PodInfo, constraint: SpreadConstraint, base: Bools) -> Bools:
    """The rows a constraint counts: `base` with the node inclusion policies applied."""
    eligible = base
    if constraint.honor_affinity and (pod.node_selector or pod.required_terms is not None):
        eligible = eligible & affinity_mask(pod, nodes)
    if constraint.honor_taints:
        eligible = eligible & tolerated_mask(pod, nodes)
    return eligible


def _domain_ids(nodes: NodeTable, key: str) -> tuple[I64, int]:
    """Per row the domain id of `key` with a node lacking the label in the domain of the empty
    value (as kube reads a missing label), and the number of ids."""
    values = nodes.label_values.get(key, {})
    ids = nodes.label_column(key).astype(np.int64)
    empty = values.get("", len(values))
    ids[ids < 0] = empty
    return ids, len(values) + 1


class PodTopologySpread:
    NAME: ClassVar[str] = NAME
    # Its PreFilter counts the placed pods into the cycle's state: the engine runs it again
    # without the nominated pods (not placed yet) and in preemption's dry runs (pods taken off).
    COUNTS_PLACED_PODS: ClassVar[bool] = True

    def __init__(self, args: PodTopologySpreadArgs, handle: Handle) -> None:
        self._cluster: ClusterBackend = handle.cluster
        self._nodes = handle.nodes
        self._defaults = args.constraints()
        self._system = args.defaulting_type == SYSTEM
        self._hard_defaults = tuple(c for c in self._defaults if c.hard)
        self._soft_defaults = tuple(c for c in self._defaults if not c.hard)
        self.counts = SelectorCounts(handle.pods, handle.nodes)

    # ----- constraints of a pod
    def default_selector(self, pod: PodInfo) -> SpreadSelector | None:
        """kube's DefaultSelector: the Services selecting the pod, then its controller's selector."""
        pairs: dict[str, str] = {}
        for selector in self._cluster.service_selectors(pod.namespace):
            if selector and all(pod.labels.get(k) == v for k, v in selector.items()):
                pairs.update(selector)
        expressions: list[tuple[str, str, tuple[str, ...]]] = []
        owner = pod.controller
        if owner is not None and (owner.kind, owner.api_version) in _CONTROLLERS:
            raw = self._cluster.controller_selector(pod.namespace, owner.kind, owner.name)
            if raw is not None:
                if owner.kind == "ReplicationController":
                    pairs.update(raw.get("matchLabels") or {})
                else:
                    try:
                        parsed, problem = parse_selector(raw)
                    except (TypeError, ValueError):
                        parsed, problem = SpreadSelector(), "unreadable"
                    if not problem:
                        expressions += [(k, "In", (v,)) for k, v in parsed.match_labels]
                        expressions += parsed.match_expressions
        if not pairs and not expressions:
            return None
        return SpreadSelector(tuple(sorted(pairs.items())), tuple(sorted(set(expressions))))

    def _defaulted(self, pod: PodInfo, defaults: tuple[SpreadConstraint, ...]) -> tuple[SpreadConstraint, ...]:
        if not defaults:
            return ()
        selector = self.default_selector(pod)
        if selector is None:
            return ()
        return tuple(
            SpreadConstraint(
                c.max_skew, c.topology_key, c.hard, selector, c.min_domains, c.honor_affinity, c.honor_taints
            )
            for c in defaults
        )

    def _constraints(self, pod: PodInfo, *, hard: bool) -> tuple[SpreadConstraint, ...]:
        """The pod's DoNotSchedule (hard) or ScheduleAnyway constraints; the defaults for a pod
        without any."""
        if pod.spread:
            return tuple(c for c in pod.spread if c.hard == hard)
        return self._defaulted(pod, self._hard_defaults if hard else self._soft_defaults)

    def acts_on(self) -> PodFeatures:
        """Pods with constraints of their own; with default constraints, also those a Service or
        a controller may select (selectors are never empty, so a pod with neither labels nor a
        controller gets no default)."""
        if self._hard_defaults or self._soft_defaults:
            return PodFeatures(SPREAD | CONTROLLER | LABELS)
        return SPREAD

    # ----- PreFilter / Filter
    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        hard = any(c.hard or c.problem for c in pod.spread)
        return "DoNotSchedule topology spread constraints" if hard else None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        if not pod.spread and not self._hard_defaults:
            return SKIP
        if pod.spread:
            for index, constraint in enumerate(pod.spread):
                if constraint.problem:
                    return unresolvable(f"invalid topology spread constraint {index}: {constraint.problem}")
        hard = self._constraints(pod, hard=True)
        if not hard:
            return SKIP
        size = nodes.size
        base = nodes.present[:size].copy()
        for constraint in hard:
            base &= nodes.label_column(constraint.topology_key) >= 0
        measured = []
        for constraint in hard:
            selector = constraint.selector_for(pod.labels)
            column = nodes.label_column(constraint.topology_key)
            eligible = _node_ok(nodes, pod, constraint, base)
            slots = len(nodes.label_values.get(constraint.topology_key, {})) + 1
            where = column[eligible]
            counts = self.counts.of(pod.namespace, selector)
            per_value = np.bincount(where, weights=counts[eligible], minlength=slots).astype(np.int64)
            domains = np.bincount(where, minlength=slots) > 0
            found = int(domains.sum())
            min_match = int(per_value[domains].min()) if found >= constraint.min_domains and found else 0
            per_value[-1] = 0
            measured.append(_Hard(constraint.max_skew, column, per_value, min_match, int(selector.matches(pod.labels))))
        state.write(_FILTER_KEY, tuple(measured))
        return SUCCESS

    def filter_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        measured = state.read(_FILTER_KEY, tuple)
        size = nodes.size
        if not measured:
            return FilterResult(np.ones(size, np.bool_))
        decided = np.zeros(size, np.bool_)
        missing = np.zeros(size, np.bool_)
        skewed = np.zeros(size, np.bool_)
        for hard in measured:
            absent = ~decided & (hard.column < 0)
            missing |= absent
            decided |= absent
            over = ~decided & (hard.per_value[hard.column] + hard.self_match - hard.min_match > hard.max_skew)
            skewed |= over
            decided |= over
        # A missing label is unresolvable (kube's UnschedulableAndUnresolvable); a skew is not.
        return FilterResult(~decided, {MISSING_LABEL: missing, REASON: skewed}, unresolvable=missing)

    # ----- PreScore / Score / NormalizeScore
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> Status:
        if not pod.spread and (
            not self._soft_defaults or (pod.controller is None and not self._cluster.service_selectors(pod.namespace))
        ):
            return SKIP  # a plain pod: nothing to spread it by (the common case, kept cheap)
        soft = self._constraints(pod, hard=False)
        if not soft or nodes.count == 0:
            return SKIP
        pairs = tuple((c, c.selector_for(pod.labels)) for c in soft)
        state.write(_SCORE_KEY, _Soft(pairs, bool(pod.spread) or not self._system))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        soft = state.read(_SCORE_KEY, _Soft)
        size = nodes.size
        if soft is None:
            return np.zeros(size, np.int64)
        present = nodes.present[:size]
        with_keys = present.copy()
        if soft.require_all:
            for constraint, _ in soft.constraints:
                with_keys &= nodes.label_column(constraint.topology_key) >= 0
        scored = feasible[:size] & with_keys
        total = np.zeros(size, np.float64)
        for constraint, selector in soft.constraints:
            column = nodes.label_column(constraint.topology_key)
            counts = self.counts.of(pod.namespace, selector)
            if constraint.topology_key == HOSTNAME:
                weight = math.log(int(scored.sum()) + 2)
                per_row = counts
            else:
                ids, slots = _domain_ids(nodes, constraint.topology_key)
                domains = np.bincount(ids[scored], minlength=slots) > 0
                weight = math.log(int(domains.sum()) + 2)
                eligible = _node_ok(nodes, pod, constraint, with_keys)
                per_value = np.bincount(ids[eligible], weights=counts[eligible], minlength=slots)
                per_row = per_value[ids]
            total += np.where(column >= 0, per_row * weight + (constraint.max_skew - 1), 0.0)
        out = np.floor(total + 0.5).astype(np.int64)  # Go's math.Round: half away from zero
        out[~scored] = -1  # left out of NormalizeScore's range, then scored 0
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: I64, feasible: Bools) -> None:
        valid = feasible & (scores >= 0)
        if not valid.any():
            scores[:] = 0
            return
        low, high = int(scores[valid].min()), int(scores[valid].max())
        if high == 0:
            scores[:] = MAX_NODE_SCORE
        else:
            scores[:] = MAX_NODE_SCORE * (high + low - scores) // high
        scores[~valid] = 0

    # ----- EnqueueExtensions
    def events_to_register(self) -> Sequence[EventRegistration]:
        return (
            EventRegistration(EventKind.ASSIGNED_POD_ADD, self._pod_hint),
            EventRegistration(EventKind.ASSIGNED_POD_UPDATE, self._pod_hint),
            EventRegistration(EventKind.POD_DELETE, self._pod_hint),
            EventRegistration(EventKind.NODE_ADD, self._node_hint),
            EventRegistration(EventKind.NODE_UPDATE, self._node_hint),
            EventRegistration(EventKind.NODE_DELETE, self._node_hint),
        )

    def _pod_hint(self, pod: PodInfo, event: ClusterEvent) -> QueueingHint:
        constraints = self._constraints(pod, hard=True)
        for other in (event.old, event.new):
            if not isinstance(other, PodInfo) or other.namespace != pod.namespace:
                continue
            if any(c.selector_for(pod.labels).matches(other.labels) for c in constraints):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _node_hint(self, pod: PodInfo, event: ClusterEvent) -> QueueingHint:
        constraints = self._constraints(pod, hard=True)
        new, old = event.new, event.old
        keys = [c.topology_key for c in constraints]
        if new is None and isinstance(old, NodeInfo):  # deleted: its domain may be one fewer
            return QueueingHint.QUEUE if all(k in old.labels for k in keys) else QueueingHint.SKIP
        if not isinstance(new, NodeInfo):
            return QueueingHint.SKIP
        if not isinstance(old, NodeInfo):
            return QueueingHint.QUEUE if all(k in new.labels for k in keys) else QueueingHint.SKIP
        if any(old.labels.get(k) != new.labels.get(k) for k in keys) or old.taints != new.taints:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


_CONTROLLERS = {
    ("ReplicationController", "v1"),
    ("ReplicaSet", "apps/v1"),
    ("StatefulSet", "apps/v1"),
}


def factory(args: PodTopologySpreadArgs, handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(args, handle)


SPEC = PluginSpec(NAME, PodTopologySpreadArgs, factory, PodTopologySpread)

__all__ = ["MISSING_LABEL", "NAME", "REASON", "SPEC", "PodTopologySpread", "PodTopologySpreadArgs"]
