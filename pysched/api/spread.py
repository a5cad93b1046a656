"""Pod topology spread constraints (`spec.topologySpreadConstraints`), read with bounds.

A constraint of the wrong shape (a wrong type, a maxSkew out of range, too many constraints or
selector terms) is malformed: `spread_constraints` raises one of `objects.MALFORMED` and the pod
gets the invalid-pod event. A selector or topology key that is well typed but does not parse as
Kubernetes would parse it is kept with its `problem`, so PodTopologySpread rejects the pod as
unresolvable with that message while other pods go on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pysched.api.labels import label_key_problem, label_value_problem, selector_problem
from pysched.api.limits import clip

MAX_CONSTRAINTS = 16  # per pod (kube sets no number; a real pod has one or two)
MAX_SKEW = 2**31 - 1  # int32, as the API types it
MAX_SELECTOR_TERMS = 64  # matchLabels pairs plus matchExpressions
MAX_SELECTOR_VALUES = 256  # values of one expression
MAX_MATCH_LABEL_KEYS = 32

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"

Expression = tuple[str, str, tuple[str, ...]]  # (key, operator, values)


@dataclass(frozen=True, slots=True)
class SpreadSelector:
    """A parsed label selector; `nothing` is a missing selector, which matches no pod.

    Frozen: its hash and the expressions with value sets are computed once, when it is built,
    so matching and dict lookups (the counts key their arrays by selector) cost no rebuild."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Expression, ...] = ()
    nothing: bool = False
    _hash: int = field(init=False, repr=False, compare=False)
    _checks: tuple[tuple[str, str, frozenset[str]], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.match_labels, self.match_expressions, self.nothing)))
        checks = tuple((k, op, frozenset(v)) for k, op, v in self.match_expressions)
        object.__setattr__(self, "_checks", checks)

    def __hash__(self) -> int:
        return self._hash

    @property
    def empty(self) -> bool:
        """`{}`: matches every pod, yet kube counts no pod for it (only the incoming one)."""
        return not self.nothing and not self.match_labels and not self.match_expressions

    def as_mapping(self) -> dict[str, Any]:
        return {
            "matchLabels": dict(self.match_labels),
            "matchExpressions": [{"key": k, "operator": op, "values": list(v)} for k, op, v in self.match_expressions],
        }

    def matches(self, labels: Mapping[str, str]) -> bool:
        """`labels.selector_matches(self.as_mapping(), labels)` (False for `nothing`), without
        building the mapping."""
        if self.nothing:
            return False
        for key, value in self.match_labels:
            if key not in labels or labels[key] != value:
                return False
        for key, op, values in self._checks:
            present = key in labels
            if op == "In":
                if not (present and labels[key] in values):
                    return False
            elif op == "NotIn":
                if present and labels[key] in values:
                    return False
            elif op == "Exists":
                if not present:
                    return False
            elif op == "DoesNotExist" and present:
                return False
        return True

    def index_terms(self) -> tuple[tuple[str, str | None], ...]:
        """One requirement every matching pod satisfies, as the (key, value) label pairs of which
        a matching pod carries exactly one: a matchLabels pair, else an In expression (one pair
        per value), else an Exists expression as (key, None) for "any value". () when no such
        requirement exists (only NotIn / DoesNotExist, `{}`, `nothing`)."""
        if self.nothing:
            return ()
        if self.match_labels:
            return (self.match_labels[0],)
        ins = [(k, v) for k, op, v in self.match_expressions if op == "In"]
        if ins:
            key, values = min(ins, key=lambda kv: len(kv[1]))
            return tuple((key, value) for value in values)
        for key, op, _ in self.match_expressions:
            if op == "Exists":
                return ((key, None),)
        return ()

    def with_labels(self, pairs: Mapping[str, str]) -> SpreadSelector:
        """matchLabelKeys merged in: the pod's values of those keys become requirements too."""
        if self.nothing or not pairs:
            return self
        merged = sorted({*self.match_labels, *pairs.items()})
        return SpreadSelector(tuple(merged), self.match_expressions)


NOTHING = SpreadSelector(nothing=True)


def parse_selector(raw: object) -> tuple[SpreadSelector, str]:
    """(selector, problem): a selector that does not parse comes back as NOTHING with why.

    Raises TypeError for a value that is not a map and ValueError beyond the size bounds."""
    if raw is None:
        return NOTHING, ""
    if not isinstance(raw, Mapping):
        raise TypeError("labelSelector must be a map")
    labels = raw.get("matchLabels") or {}
    expressions = raw.get("matchExpressions") or []
    if not isinstance(labels, Mapping) or not isinstance(expressions, list | tuple):
        raise TypeError("labelSelector.matchLabels must be a map and matchExpressions a list")
    if len(labels) + len(expressions) > MAX_SELECTOR_TERMS:
        raise ValueError(f"labelSelector has more than {MAX_SELECTOR_TERMS} terms")
    problem = selector_problem(raw)
    if problem is not None:
        return NOTHING, problem
    pairs = []
    for key, value in labels.items():
        problem = label_key_problem(str(key)) or label_value_problem(value)
        if problem is not None:
            return NOTHING, problem
        pairs.append((str(key), value))
    parsed: list[Expression] = []
    for expr in expressions:
        values = expr.get("values") or ()
        if len(values) > MAX_SELECTOR_VALUES:
            raise ValueError(f"labelSelector expression has more than {MAX_SELECTOR_VALUES} values")
        if not all(isinstance(v, str) for v in values):
            raise TypeError("labelSelector expression values must be strings")
        problem = label_key_problem(expr["key"]) or next(filter(None, map(label_value_problem, values)), None)
        if problem is not None:
            return NOTHING, problem
        parsed.append((expr["key"], expr["operator"], tuple(sorted(set(values)))))
    return SpreadSelector(tuple(sorted(pairs)), tuple(sorted(parsed))), ""


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One topologySpreadConstraint with kube's defaults filled in (minDomains 1, affinity Honor,
    taints Ignore). `problem` is set when its selector or topology key does not parse."""

    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule (filter) rather than ScheduleAnyway (score)
    selector: SpreadSelector = NOTHING
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False
    match_label_keys: tuple[str, ...] = ()
    problem: str = ""

    def selector_for(self, pod_labels: Mapping[str, str]) -> SpreadSelector:
        """The selector with matchLabelKeys merged from the incoming pod's labels, except keys it
        holds already: an apiserver that merges them at creation (from the labels of that time)
        has, and labels changed since must not add a second, contradicting requirement."""
        if not self.match_label_keys:
            return self.selector
        held = {key for key, _ in self.selector.match_labels} | {key for key, _, _ in self.selector.match_expressions}
        keys = [k for k in self.match_label_keys if k in pod_labels and k not in held]
        return self.selector.with_labels({k: pod_labels[k] for k in keys})


def _int(raw: Mapping[str, Any], key: str, default: int | None) -> int:
    value = raw.get(key, default)
    if value is None and default is not None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"topologySpreadConstraints {key} must be an integer, not {clip(value)}")
    if not 1 <= value <= MAX_SKEW:
        raise ValueError(f"topologySpreadConstraints {key} {value} is out of range (1..{MAX_SKEW})")
    return value


def _policy(raw: Mapping[str, Any], key: str, default: str) -> bool:
    value = raw.get(key) or default
    if value not in (HONOR, IGNORE):
        raise ValueError(f"topologySpreadConstraints {key} {clip(value)} is not Honor or Ignore")
    return bool(value == HONOR)


def parse_constraint(raw: object) -> SpreadConstraint:
    if not isinstance(raw, Mapping):
        raise TypeError("a topologySpreadConstraints entry must be a map")
    when = raw.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise ValueError(
            f"topologySpreadConstraints whenUnsatisfiable {clip(when)} is not DoNotSchedule or ScheduleAnyway"
        )
    key = raw.get("topologyKey")
    if not isinstance(key, str):
        raise TypeError("topologySpreadConstraints topologyKey must be a string")
    keys = raw.get("matchLabelKeys") or []
    if not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys):
        raise TypeError("topologySpreadConstraints matchLabelKeys must be a list of strings")
    if len(keys) > MAX_MATCH_LABEL_KEYS:
        raise ValueError(f"topologySpreadConstraints has more than {MAX_MATCH_LABEL_KEYS} matchLabelKeys")
    selector, problem = parse_selector(raw.get("labelSelector"))
    problem = problem or label_key_problem(key) or next(filter(None, map(label_key_problem, keys)), None) or ""
    return SpreadConstraint(
        max_skew=_int(raw, "maxSkew", None),
        topology_key=key,
        hard=when == DO_NOT_SCHEDULE,
        selector=selector,
        min_domains=_int(raw, "minDomains", 1),
        honor_affinity=_policy(raw, "nodeAffinityPolicy", HONOR),
        honor_taints=_policy(raw, "nodeTaintsPolicy", IGNORE),
        match_label_keys=tuple(keys),
        problem=problem,
    )


def spread_constraints(raw: object) -> tuple[SpreadConstraint, ...]:
    """`spec.topologySpreadConstraints` parsed (() when absent); raises MALFORMED exceptions."""
    if not raw:
        return ()
    if not isinstance(raw, list | tuple):
        raise TypeError("spec.topologySpreadConstraints must be a list")
    if len(raw) > MAX_CONSTRAINTS:
        raise ValueError(f"spec.topologySpreadConstraints has more than {MAX_CONSTRAINTS} entries")
    return tuple(parse_constraint(c) for c in raw)
