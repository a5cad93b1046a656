"""The plain definition of kube-scheduler's preemption over plain values, for tests to hold the
plugin to: nodes as free resources, pods as (priority, start, requests, labels), no engine."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RefPod:
    name: str
    priority: int
    start: float
    requests: Mapping[str, int]
    labels: Mapping[str, str] = field(default_factory=dict)
    deadline_slack: float | None = None  # None: best-effort


@dataclass(frozen=True)
class RefBudget:
    labels: Mapping[str, str]  # matchLabels
    allowed: int


def _fits(allocatable: Mapping[str, int], pods: Sequence[RefPod], pod: RefPod) -> bool:
    if len(pods) + 1 > allocatable.get("pods", 0):
        return False
    for name, amount in pod.requests.items():
        if amount and amount > allocatable.get(name, 0) - sum(p.requests.get(name, 0) for p in pods):
            return False
    return True


def _violating(pods: Sequence[RefPod], budgets: Sequence[RefBudget]) -> set[str]:
    allowed = [b.allowed for b in budgets]
    out: set[str] = set()
    for pod in pods:
        for i, budget in enumerate(budgets):
            if pod.labels and budget.labels and all(pod.labels.get(k) == v for k, v in budget.labels.items()):
                allowed[i] -= 1
                if allowed[i] < 0:
                    out.add(pod.name)
    return out


def victims_on(
    allocatable: Mapping[str, int], pods: Sequence[RefPod], pod: RefPod, budgets: Sequence[RefBudget]
) -> tuple[list[RefPod], int] | None:
    lower = [p for p in pods if p.priority < pod.priority]
    keep = [p for p in pods if p.priority >= pod.priority]
    if not lower or not _fits(allocatable, keep, pod):
        return None
    lower.sort(key=lambda p: (-p.priority, p.start, p.name))
    bad = _violating(lower, budgets)
    victims: list[RefPod] = []
    violations = 0
    for group in ([p for p in lower if p.name in bad], [p for p in lower if p.name not in bad]):
        for p in group:
            if _fits(allocatable, [*keep, p], pod):
                keep.append(p)
            else:
                victims.append(p)
                violations += p.name in bad
    victims.sort(key=lambda p: (-p.priority, p.start, p.name))
    return victims, violations


def choose(
    nodes: Sequence[tuple[str, Mapping[str, int], Sequence[RefPod]]], pod: RefPod, budgets: Sequence[RefBudget]
) -> tuple[str, list[RefPod]] | None:
    """(node, victims) kube picks, then pysched's deadline tie-break, then the first node."""
    found = []
    for name, allocatable, pods in nodes:
        chosen = victims_on(allocatable, pods, pod, budgets)
        if chosen is not None:
            found.append((name, *chosen))
    if not found:
        return None

    def kube(entry: tuple[str, list[RefPod], int]) -> tuple[float, ...]:
        _, victims, violations = entry
        top = victims[0].priority
        return (
            violations,
            top,
            sum(v.priority + 2**31 for v in victims),
            len(victims),
            -min(v.start for v in victims if v.priority == top),
        )

    def deadline(entry: tuple[str, list[RefPod], int]) -> tuple[float, ...]:
        slacks = [v.deadline_slack for v in entry[1] if v.deadline_slack is not None]
        return (len(slacks), -min(slacks, default=math.inf))

    best = min(kube(e) for e in found)
    tied = [e for e in found if kube(e) == best]
    name, victims, _ = min(tied, key=deadline)
    return name, victims
