"""Kubernetes label selectors (`matchLabels` + `matchExpressions`), as profiles write them.

Used by DeadlineLaxity's `deadlineNamespaces`: a profile names the namespaces allowed to use
deadlines by their labels, as a NetworkPolicy or a webhook's namespaceSelector would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pysched.api.limits import clip

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
# Well-known node labels the kubelet and cloud providers set (topology keys of affinity and spread).
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"


def selector_problem(selector: Mapping[str, Any]) -> str | None:
    """Why the selector is malformed, or None. Checked when the profile loads, never later."""
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    if unknown:
        return f"unknown selector field(s) {clip(sorted(map(str, unknown)))} (accepted: matchLabels, matchExpressions)"
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        return "matchLabels must map label keys to string values"
    for expr in selector.get("matchExpressions") or ():
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
            return f"matchExpressions entry {clip(expr)} needs a key"
        op, values = expr.get("operator"), expr.get("values") or []
        if op not in OPERATORS:
            return f"matchExpressions operator {clip(op)} is not one of {', '.join(OPERATORS)}"
        if not isinstance(values, list | tuple) or (op in ("In", "NotIn")) != bool(values):
            return f"matchExpressions {op} needs values for In/NotIn and none otherwise"
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
