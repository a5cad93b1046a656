"""Kubernetes label selectors (`matchLabels` + `matchExpressions`), as profiles write them.

Used by DeadlineLaxity's `deadlineNamespaces`: a profile names the namespaces allowed to use
deadlines by their labels, as a NetworkPolicy or a webhook's namespaceSelector would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pysched.api.limits import clip

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
SELECTOR_FIELDS = ("matchLabels", "matchExpressions")
EXPRESSION_FIELDS = ("key", "operator", "values")
# Well-known node labels the kubelet and cloud providers set (topology keys of affinity and spread).
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"


# A label value, and a label key's name part: apimachinery's IsValidLabelValue and the name part
# of IsQualifiedName share this pattern (a value may be empty, a name may not).
_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_NAME_CHARS = 63


def dns_name(name: str, *, subdomain: bool = False) -> bool:
    """A DNS-1123 label (63 characters: a namespace) or, with `subdomain`, dot-separated labels
    (253 characters: an object's name, a label key's prefix)."""
    parts = name.split(".") if subdomain else [name]
    return 0 < len(name) <= (253 if subdomain else 63) and all(_DNS_LABEL.fullmatch(part) for part in parts)


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a qualified label key (an optional DNS-subdomain prefix and '/', then a
    name), or None."""
    prefix, slash, name = key.rpartition("/")
    if not name or len(name) > MAX_NAME_CHARS or not _NAME.fullmatch(name):
        return (
            f"label key {clip(key)}: name part must be 63 characters or less: alphanumeric, '-', '_' or '.', "
            "starting and ending alphanumeric"
        )
    if slash and not dns_name(prefix, subdomain=True):
        return f"label key {clip(key)}: prefix part must be a DNS subdomain"
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) <= MAX_NAME_CHARS and _NAME.fullmatch(value):
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
        if problem := label_key_problem(key) or label_value_problem(value):
            return f"matchLabels: {problem}"
    expressions = selector.get("matchExpressions")
    if not isinstance(expressions, list | tuple | None):
        return f"matchExpressions must be a list, got {clip(expressions)}"
    for i, expr in enumerate(expressions or ()):
        at = f"matchExpressions[{i}]"
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
            return f"{at} {clip(expr)} needs a key"
        if problem := _unknown("field", expr, EXPRESSION_FIELDS) or label_key_problem(expr["key"]):
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
        if problem := next(filter(None, map(label_value_problem, values or ())), None):
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
