"""Node selector requirements and terms: pod node affinity, PV node affinity, allowed topologies."""

from __future__ import annotations

from dataclasses import dataclass


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
