"""A profile's `addedAffinity` (kube's NodeAffinityArgs): node affinity every pod of the profile
must meet besides its own, read from the profile file with kube's validation of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pysched.api.limits import MAX_VALUE_CHARS, clip
from pysched.api.selectors import NODE_NAME_FIELD, NODE_OPERATORS, Requirement, SelectorTerm, requirement_problem

MAX_TERMS = 100  # terms, requirements per term, values per requirement: far beyond any real profile
MAX_KEY_CHARS = 317  # a label key: a 253-character prefix, "/", a 63-character name


@dataclass(frozen=True, slots=True)
class AddedAffinity:
    required: tuple[SelectorTerm, ...] | None = None  # None: no added requirement
    preferred: tuple[tuple[int, SelectorTerm], ...] = ()


def _items(value: object, what: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ValueError(f"{what} must be a list, got {clip(value)}")
    if len(value) > MAX_TERMS:
        raise ValueError(f"{what} has {len(value)} entries (at most {MAX_TERMS})")
    return value


def _fields(value: object, what: str, known: tuple[str, ...]) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a map, got {clip(value)}")
    unknown = [k for k in value if k not in known]
    if unknown:
        raise ValueError(f"{what}: unknown field {clip(unknown[0])} (accepted: {', '.join(known)})")
    return value


def _text(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value or len(value) > limit:
        raise ValueError(f"{what} must be a non-empty string of at most {limit} characters, got {clip(value)}")
    return value


def _value(value: object, what: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_VALUE_CHARS:  # a label value may be empty
        raise ValueError(f"{what} must be strings of at most {MAX_VALUE_CHARS} characters, got {clip(value)}")
    return value


def _requirement(raw: object, what: str, field: bool) -> Requirement:
    entry = _fields(raw, what, ("key", "operator", "values"))
    key = _text(entry.get("key"), f"{what}.key", MAX_KEY_CHARS)
    operator = entry.get("operator")
    if operator not in NODE_OPERATORS:
        raise ValueError(f"{what}.operator must be one of {', '.join(NODE_OPERATORS)}, got {clip(operator)}")
    values = tuple(_value(v, f"{what}.values") for v in _items(entry.get("values"), f"{what}.values"))
    if operator in ("In", "NotIn") and not values:
        raise ValueError(f"{what}: {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"{what}: {operator} takes no values")
    if field:
        if key != NODE_NAME_FIELD or operator not in ("In", "NotIn") or len(values) != 1:
            raise ValueError(f"{what}: matchFields supports only metadata.name with In or NotIn and one value")
        return Requirement(key, str(operator), values)
    requirement = Requirement(key, str(operator), values)
    problem = requirement_problem(requirement)
    if problem is not None:
        raise ValueError(f"{what}: {problem}")
    return requirement


def _term(raw: object, what: str) -> SelectorTerm:
    term = _fields(raw, what, ("matchExpressions", "matchFields"))
    expressions = tuple(
        _requirement(r, f"{what}.matchExpressions[{i}]", False)
        for i, r in enumerate(_items(term.get("matchExpressions"), f"{what}.matchExpressions"))
    )
    fields = tuple(
        _requirement(r, f"{what}.matchFields[{i}]", True)
        for i, r in enumerate(_items(term.get("matchFields"), f"{what}.matchFields"))
    )
    return SelectorTerm(expressions, fields)


def parse_added_affinity(raw: Mapping[str, Any] | None) -> AddedAffinity:
    """The arg as kube's NodeAffinity plugin reads it; ValueError naming the field otherwise."""
    required_key, preferred_key = (
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
    )
    affinity = _fields(raw, "addedAffinity", (required_key, preferred_key))
    required = None
    if affinity.get(required_key) is not None:
        what = f"addedAffinity.{required_key}"
        selector = _fields(affinity[required_key], what, ("nodeSelectorTerms",))
        terms = _items(selector.get("nodeSelectorTerms"), f"{what}.nodeSelectorTerms")
        if not terms:
            raise ValueError(f"{what}.nodeSelectorTerms must hold at least one term")
        required = tuple(_term(t, f"{what}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms))
    preferred = []
    for i, item in enumerate(_items(affinity.get(preferred_key), f"addedAffinity.{preferred_key}")):
        what = f"addedAffinity.{preferred_key}[{i}]"
        entry = _fields(item, what, ("weight", "preference"))
        weight = entry.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            raise ValueError(f"{what}.weight must be an integer from 1 to 100, got {clip(weight)}")
        term = _term(entry.get("preference"), f"{what}.preference")
        if term.match_expressions or term.match_fields:  # an empty preference counts for nothing
            preferred.append((weight, term))
    return AddedAffinity(required, tuple(preferred))
