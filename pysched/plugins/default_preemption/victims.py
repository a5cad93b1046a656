"""Victim selection and candidate ordering, as kube-scheduler's DefaultPreemption does them, with
pysched's deadline-aware tie-break after kube's criteria.

Pure functions: the node is reached through a `DryRun` (take pods away, give them back, ask
whether the preemptor fits), budgets, times and each pod's progress (`Progress`) are passed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pysched.api.annotations import ProgressReport, deadline_of, total_steps_of
from pysched.api.disruption import DisruptionBudget, start_time
from pysched.api.ids import NodeName
from pysched.api.objects import PodInfo
from pysched.framework.preemption import DryRun

PRIORITY_OFFSET = 2**31  # kube adds MaxInt32 + 1 so that sums of negative priorities compare well

Progress = Callable[[PodInfo], "ProgressReport | None"]  # a pod's `pysched.io/progress` (`ClusterBackend.progress`)


@dataclass(frozen=True, slots=True)
class Candidate:
    node: NodeName
    row: int
    victims: tuple[PodInfo, ...]  # most important first
    pdb_violations: int


def importance(pod: PodInfo, now: float) -> tuple[int, float, str]:
    """Sort key, most important first: higher priority, then the longer running (earlier start)."""
    return (-pod.priority, start_time(pod, now), pod.key)


def split_by_budgets(
    pods: Sequence[PodInfo], budgets: Sequence[DisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(pods whose deletion would violate a budget, the others), order kept: each matching budget
    not already counting the pod as disrupted loses one allowed disruption per pod, and a pod
    that takes one below zero violates it."""
    allowed = [b.disruptions_allowed for b in budgets]
    violating: list[PodInfo] = []
    other: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, budget in enumerate(budgets):
                if not budget.matches(pod) or pod.name in budget.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else other).append(pod)
    return violating, other


def select_victims(
    potential: Sequence[PodInfo], budgets: Sequence[DisruptionBudget], run: DryRun, now: float
) -> tuple[list[PodInfo], int] | None:
    """The fewest victims among `potential` (lower priority than the preemptor) that let it fit:
    all removed first (None when it still does not fit), then each given back while it still
    fits, budget-violating ones first, most important first. Victims come out most important first."""
    for pod in potential:
        run.remove(pod)
    if not run.fits():
        return None
    ordered = sorted(potential, key=lambda p: importance(p, now))
    violating, other = split_by_budgets(ordered, budgets)
    victims: list[PodInfo] = []
    violations = 0
    for group, counted in ((violating, True), (other, False)):
        for pod in group:
            run.add(pod)
            if not run.fits():
                run.remove(pod)
                victims.append(pod)
                violations += counted
    victims.sort(key=lambda p: importance(p, now))
    return victims, violations


def kube_key(candidate: Candidate, now: float) -> tuple[int, int, int, int, float]:
    """kube-scheduler's pickOneNodeForPreemption as one ascending key: fewest budget violations,
    lowest highest-victim priority, smallest priority sum, fewest victims, latest earliest start
    among the highest-priority victims."""
    victims = candidate.victims
    top = victims[0].priority
    earliest = min(start_time(p, now) for p in victims if p.priority == top)
    return (
        candidate.pdb_violations,
        top,
        sum(p.priority + PRIORITY_OFFSET for p in victims),
        len(victims),
        -earliest,
    )


def slack_after_preemption(pod: PodInfo, now: float, progress_of: Progress) -> float:
    """Seconds to spare before the victim's deadline if it is preempted now and must redo the
    work done since its last checkpoint. pysched knows of no checkpoint, so the work redone is
    all of it: the job's whole predicted run (steps times the seconds per step it has shown),
    or nothing when it has reported no progress (then the most slack: its deadline minus now)."""
    deadline = deadline_of(pod)
    if deadline is None:
        return math.inf
    redo = 0.0
    written, total = progress_of(pod), total_steps_of(pod)
    stamp = None if written is None else written.stamp
    if stamp is not None and total is not None and stamp.steps > 0:
        steps, observed = stamp.steps, stamp.at
        elapsed = observed - start_time(pod, observed)
        if elapsed > 0:
            redo = total * elapsed / steps
    return deadline - now - redo


def deadline_key(candidate: Candidate, now: float, progress_of: Progress) -> tuple[int, float]:
    """pysched's tie-break among candidates kube finds equally good: fewer deadline victims
    (best-effort ones go first), then the most slack left to the tightest deadline victim."""
    slacks = [slack_after_preemption(p, now, progress_of) for p in candidate.victims if deadline_of(p) is not None]
    return (len(slacks), -min(slacks, default=math.inf))


def pick(candidates: Iterable[Candidate], now: float, progress_of: Progress) -> Candidate | None:
    """The best candidate by kube's criteria, then the deadline tie-break, then the first."""
    ranked = list(candidates)
    if not ranked:
        return None
    keys = [kube_key(c, now) for c in ranked]
    best = min(keys)
    tied = [c for c, k in zip(ranked, keys, strict=True) if k == best]
    if len(tied) == 1:
        return tied[0]
    return min(tied, key=lambda c: deadline_key(c, now, progress_of))
