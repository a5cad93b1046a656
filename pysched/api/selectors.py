"""Node selector requirements and terms: pod node affinity, PV node affinity, allowed topologies."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
