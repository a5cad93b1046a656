"""Inter-pod affinity as the scheduler reads it: `spec.affinity.podAffinity` / `podAntiAffinity`.

Each `PodAffinityTerm` becomes an `AffinityTerm` (hashable, so equal terms of many pods share one
count): its label selector with `matchLabelKeys` / `mismatchLabelKeys` merged in from the pod's own
labels (unless the apiserver merged them already), the namespaces it names (the pod's own when it
names none and has no namespaceSelector), the namespaceSelector and the topology key. Wrong types
and lists beyond the bounds raise one of `objects.MALFORMED` (the pod gets an invalid-pod event); a
selector or topology key the API would refuse is kept as `PodAffinity.problem`, for the plugin to
reject the pod with, kube's way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pysched.api.labels import label_key_problem, label_value_problem
from pysched.api.limits import PLACED_LIST_LIMIT, clip

MAX_TERMS = 64  # terms per list (required / preferred, affinity / anti-affinity)
MAX_REQUIREMENTS = 64  # matchLabels + matchExpressions of one selector
MAX_VALUES = 256  # values of one expression, namespaces of one term
MAX_WEIGHT = 100  # a preferred term's weight: 1..100, as the API validates

OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


class _Problem(Exception):
    """A term the API would refuse: becomes PodAffinity.problem (never escapes this module)."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None


@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed label selector: `nothing` for an absent one (matches no labels), else every
    requirement must hold (none: matches everything)."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(requirement.matches(labels) for requirement in self.requirements)

    @property
    def everything(self) -> bool:
        return not self.nothing and not self.requirements


NOTHING = Selector(nothing=True)
EVERYTHING = Selector()


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Selector  # NOTHING when the term has none
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str] | None) -> bool:
        """kube's AffinityTerm.Matches: the pod's namespace is named or selected, and its labels match."""
        if namespace not in self.namespaces and not self.namespace_selector.matches(namespace_labels or {}):
            return False
        return self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    problem: str = ""  # non-empty: a term does not parse; the pod cannot be placed

    @property
    def required(self) -> bool:
        return bool(self.required_affinity or self.required_anti_affinity)

    @property
    def preferred(self) -> bool:
        return bool(self.preferred_affinity or self.preferred_anti_affinity)


def _list(value: object, what: str, limit: int = MAX_TERMS) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise TypeError(f"{what} must be a list")
    if len(value) > limit:
        raise ValueError(f"{what} has {len(value)} entries (at most {limit})")
    return list(value)


def _map(value: object, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping")
    return value


def _strings(value: object, what: str, placed: bool = False) -> list[str]:
    items = _list(value, what, PLACED_LIST_LIMIT if placed else MAX_VALUES)
    if not all(isinstance(v, str) for v in items):
        raise TypeError(f"{what} must be a list of strings")
    return items


def parse_selector(raw: object, what: str, placed: bool = False) -> Selector:
    """metav1.LabelSelectorAsSelector: None -> matches nothing, {} -> everything. `placed`: a
    placed pod's, read within PLACED_LIST_LIMIT."""
    if raw is None:
        return NOTHING
    limit = PLACED_LIST_LIMIT if placed else MAX_REQUIREMENTS
    selector = _map(raw, what)
    labels = _map(selector.get("matchLabels"), f"{what}.matchLabels")
    expressions = _list(selector.get("matchExpressions"), f"{what}.matchExpressions", limit)
    if len(labels) + len(expressions) > limit:
        raise ValueError(f"{what} has more than {limit} requirements")
    requirements: list[Requirement] = []
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"{what}.matchLabels must map strings to strings")
        problem = label_key_problem(key) or label_value_problem(value)
        if problem:
            raise _Problem(problem)
        requirements.append(Requirement(key, "In", frozenset((value,))))
    for expression in expressions:
        entry = _map(expression, f"{what}.matchExpressions[]")
        raw_key, operator = entry.get("key"), entry.get("operator")
        if not isinstance(raw_key, str) or not isinstance(operator, str):
            raise TypeError(f"{what}.matchExpressions entries need a string key and operator")
        key = raw_key
        values = _strings(entry.get("values"), f"{what}.matchExpressions[].values", placed)
        if operator not in OPERATORS:
            raise _Problem(f"{clip(operator)} is not a valid label selector operator")
        if operator in ("In", "NotIn") and not values:
            raise _Problem(f"values: for 'in', 'notin' operators, values set can't be empty ({clip(key)})")
        if operator in ("Exists", "DoesNotExist") and values:
            raise _Problem(f"values: values set must be empty for exists and does not exist ({clip(key)})")
        problem = label_key_problem(key) or next(filter(None, map(label_value_problem, values)), None)
        if problem:
            raise _Problem(problem)
        requirements.append(Requirement(key, operator, frozenset(values)))
    return Selector(tuple(sorted(requirements, key=lambda r: (r.key, r.operator, sorted(r.values)))))


def _term(raw: object, namespace: str, labels: Mapping[str, str], what: str, placed: bool) -> AffinityTerm:
    term = _map(raw, what)
    selector = parse_selector(term.get("labelSelector"), f"{what}.labelSelector", placed)
    topology_key = term.get("topologyKey")
    if not isinstance(topology_key, str):
        raise TypeError(f"{what}.topologyKey must be a string")
    problem = label_key_problem(topology_key) if topology_key else "topologyKey: can not be empty"
    if problem:
        raise _Problem(problem)
    # The apiserver merges these keys into the selector when the pod is created (the same key in
    # both is refused then), so a key the selector already holds was merged from the labels of
    # that time and is not merged again from labels changed since; a pod no apiserver merged
    # (simulated) is merged here.
    extra: list[Requirement] = []
    merged_already = {requirement.key for requirement in selector.requirements}
    for field, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        for key in _strings(term.get(field), f"{what}.{field}", placed):
            if key in labels and not selector.nothing and key not in merged_already:
                extra.append(Requirement(key, operator, frozenset((labels[key],))))
    if extra:
        merged = {*selector.requirements, *extra}
        selector = Selector(tuple(sorted(merged, key=lambda r: (r.key, r.operator, sorted(r.values)))))
    names = _strings(term.get("namespaces"), f"{what}.namespaces", placed)
    raw_ns_selector = term.get("namespaceSelector")
    ns_selector = parse_selector(raw_ns_selector, f"{what}.namespaceSelector", placed)
    namespaces = frozenset(names) if names or raw_ns_selector is not None else frozenset((namespace,))
    return AffinityTerm(selector, namespaces, ns_selector, topology_key)


def _weighted(raw: object, namespace: str, labels: Mapping[str, str], what: str, placed: bool) -> WeightedTerm:
    entry = _map(raw, what)
    weight = entry.get("weight")
    if not isinstance(weight, int) or isinstance(weight, bool):
        raise TypeError(f"{what}.weight must be an integer")
    if not 1 <= weight <= MAX_WEIGHT:
        raise _Problem(f"weight: {clip(weight)} must be in the range 1-{MAX_WEIGHT}")
    term = _term(entry.get("podAffinityTerm"), namespace, labels, f"{what}.podAffinityTerm", placed)
    return WeightedTerm(weight, term)


def parse_pod_affinity(
    affinity: object, namespace: str, raw_labels: object, placed: bool = False
) -> PodAffinity | None:
    """The pod's inter-pod affinity, or None when it has none (most pods: one dict lookup).
    `placed`: a placed pod's, its lists read within PLACED_LIST_LIMIT."""
    if not affinity:
        return None
    spec = _map(affinity, "spec.affinity")
    pod_affinity = _map(spec.get("podAffinity"), "spec.affinity.podAffinity")
    anti = _map(spec.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    if not pod_affinity and not anti:
        return None
    labels = raw_labels if isinstance(raw_labels, Mapping) else {}
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    parts: list[tuple[Any, ...]] = []
    problem = ""
    for source, name, kind in ((pod_affinity, "podAffinity", "Affinity"), (anti, "podAntiAffinity", "AntiAffinity")):
        what = f"spec.affinity.{name}"
        limit = PLACED_LIST_LIMIT if placed else MAX_TERMS
        hard = _list(source.get(required), f"{what}.{required}", limit)
        soft = _list(source.get(preferred), f"{what}.{preferred}", limit)
        try:
            parts.append(tuple(_term(t, namespace, labels, f"{what}.{required}[]", placed) for t in hard))
        except _Problem as err:
            parts.append(())
            problem = problem or f"required{kind}Terms: {err}"
        try:
            parts.append(tuple(_weighted(t, namespace, labels, f"{what}.{preferred}[]", placed) for t in soft))
        except _Problem as err:
            parts.append(())
            problem = problem or f"preferred{kind}Terms: {err}"
    hard_affinity, soft_affinity, hard_anti, soft_anti = parts
    return PodAffinity(hard_affinity, hard_anti, soft_affinity, soft_anti, problem)
