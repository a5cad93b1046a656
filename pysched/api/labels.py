"""Kubernetes label selectors (`matchLabels` + `matchExpressions`), as profiles write them.

Used by DeadlineLaxity's `deadlineNamespaces`: a profile names the namespaces allowed to use
deadlines by their labels, as a NetworkPolicy or a webhook's namespaceSelector would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pysched.api.affinity import label_key_problem
from pysched.api.limits import clip

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
SELECTOR_FIELDS = ("matchLabels", "matchExpressions")
EXPRESSION_FIELDS = ("key", "operator", "values")
# Well-known node labels the kubelet and cloud providers set (topology keys of affinity and spread).
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"


def _key_problem(key: str) -> str | None:
    problem = label_key_problem(key)
    return None if problem is None else f"label key {problem}"


def _value_problem(value: str) -> str | None:
    # A label value is empty or has the syntax of a key's name part (apimachinery's
    # IsValidLabelValue and the name part of IsQualifiedName share one pattern).
    if value == "" or ("/" not in value and label_key_problem(value) is None):
        return None
    return (
        f"label value {clip(value)} must be empty or at most 63 characters: alphanumeric, '-', '_' or '.', "
        "starting and ending alphanumeric"
    )


def _unknown(what: str, fields: Mapping[Any, Any], accepted: tuple[str, ...]) -> str | None:
    unknown = [key for key in fields if key not in accepted]
    return None if not unknown else f"unknown {what} {clip(unknown[0])} (accepted: {', '.join(accepted)})"


def selector_problem(selector: Mapping[str, Any]) -> str | None:
    """Why the selector is malformed, or None: the apiserver's checks (label keys and values,
    operators and their values, no unknown field), so a selector that could never match is
    refused when the profile loads rather than matching nothing for ever."""
    if problem := _unknown("selector field", selector, SELECTOR_FIELDS):
        return problem
    labels = selector.get("matchLabels")
    if not isinstance(labels, Mapping | None):
        return f"matchLabels must map label keys to values, got {clip(labels)}"
    for key, value in (labels or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            return f"matchLabels must map label keys to string values, got {clip(key)}: {clip(value)}"
        if problem := _key_problem(key) or _value_problem(value):
            return f"matchLabels: {problem}"
    expressions = selector.get("matchExpressions")
    if not isinstance(expressions, list | tuple | None):
        return f"matchExpressions must be a list, got {clip(expressions)}"
    for i, expr in enumerate(expressions or ()):
        at = f"matchExpressions[{i}]"
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
            return f"{at} {clip(expr)} needs a key"
        if problem := _unknown("field", expr, EXPRESSION_FIELDS) or _key_problem(expr["key"]):
            return f"{at}: {problem}"
        op, values = expr.get("operator"), expr.get("values")
        if op not in OPERATORS:
            return f"matchExpressions operator {clip(op)} is not one of {', '.join(OPERATORS)} ({at})"
        if not isinstance(values, list | tuple | None) or not all(isinstance(v, str) for v in values or ()):
            return f"{at}: values must be a list of strings, got {clip(values)}"
        if op in ("In", "NotIn") and not values:
            return f"{at}: {op} needs at least one value"
        if op in ("Exists", "DoesNotExist") and values:
            return f"{at}: {op} takes no values"
        if problem := next(filter(None, map(_value_problem, values or ())), None):
            return f"{at}: {problem}"
    return None


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Every matchLabels pair and every expression holds (an empty selector matches everything)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr["key"], expr["operator"], expr.get("values") or ()
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True
