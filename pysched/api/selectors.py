"""Node selector requirements and terms: pod node affinity, PV node affinity, allowed topologies."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from pysched.api.labels import label_key_problem, label_value_problem

_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = 2**63


def go_int(text: str) -> int | None:
    """`text` as Go's strconv.ParseInt(text, 10, 64) reads a Gt/Lt operand or label value; None
    where it fails (the requirement then matches nothing). Python's int() would also take spaces,
    `1_000` and non-ASCII digits, and place pods where kube-scheduler places none."""
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -_INT64 <= value < _INT64 else None


NODE_NAME_FIELD = "metadata.name"  # the one node field `matchFields` may select on


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node selector requirement (`matchExpressions` or `matchFields` entry)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()


NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")  # a node selector's; labels' lack Gt, Lt


@functools.lru_cache(maxsize=4096)
def requirement_problem(req: Requirement) -> str | None:
    """Why a matchExpressions requirement is not one kube's labels.NewRequirement builds, or None.
    The apiserver checks only the operator and the number of values, so a pod may carry a bad
    key or value; kube-scheduler then matches no node with the term, and so do we."""
    if req.operator not in NODE_OPERATORS:
        return f"operator {req.operator!r} is not one of {', '.join(NODE_OPERATORS)}"
    if req.operator in ("In", "NotIn") and not req.values:
        return f"{req.operator} needs at least one value"
    if req.operator in ("Exists", "DoesNotExist") and req.values:
        return f"{req.operator} takes no values"
    if req.operator in ("Gt", "Lt") and (len(req.values) != 1 or go_int(req.values[0]) is None):
        return f"{req.operator} takes exactly one integer value"
    return label_key_problem(req.key) or next(filter(None, map(label_value_problem, req.values)), None)
