"""What preemption reads of the API beyond a pod's requests: PodDisruptionBudgets (policy/v1) and
the preemption fields of a pod (`spec.preemptionPolicy`, `status.nominatedNodeName`,
`status.startTime`, the `DisruptionTarget` condition), each through a bounded parser."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pysched.api.labels import selector_matches, selector_problem
from pysched.api.limits import MAX_UNITS
from pysched.api.objects import PodInfo
from pysched.api.times import parse_rfc3339

PREEMPT_NEVER = "Never"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
MAX_NAME_CHARS = 253  # a DNS subdomain: the longest object name the API accepts


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget as preemption counts it. `selector` None matches no pod (absent,
    empty or malformed, as kube-scheduler treats them)."""

    namespace: str
    name: str
    selector: Mapping[str, Any] | None
    disruptions_allowed: int
    disrupted_pods: frozenset[str] = frozenset()

    def matches(self, pod: PodInfo) -> bool:
        return (
            self.selector is not None
            and pod.namespace == self.namespace
            and bool(pod.labels)
            and selector_matches(self.selector, pod.labels)
        )


def budget_from_dict(obj: Mapping[str, Any]) -> DisruptionBudget:
    """Raises ValueError/TypeError (MALFORMED) when the object cannot be read at all; a bad
    selector only makes the budget match nothing."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = str(meta["name"])[:MAX_NAME_CHARS]
    namespace = str(meta.get("namespace") or "default")[:MAX_NAME_CHARS]
    raw_selector = spec.get("selector")
    selector: Mapping[str, Any] | None = None
    if isinstance(raw_selector, Mapping) and raw_selector and selector_problem(raw_selector) is None:
        selector = raw_selector
    allowed = status.get("disruptionsAllowed") or 0
    if isinstance(allowed, bool) or not isinstance(allowed, int):
        raise TypeError("status.disruptionsAllowed must be an integer")
    disrupted = status.get("disruptedPods") or {}
    if not isinstance(disrupted, Mapping):
        raise TypeError("status.disruptedPods must be a map")
    return DisruptionBudget(
        namespace, name, selector, max(-MAX_UNITS, min(allowed, MAX_UNITS)), frozenset(str(k) for k in disrupted)
    )


def preemption_policy(pod: PodInfo) -> str:
    value = (pod.raw.get("spec") or {}).get("preemptionPolicy")
    return value if isinstance(value, str) else "PreemptLowerPriority"


def nominated_node(pod: PodInfo) -> str | None:
    value = (pod.raw.get("status") or {}).get("nominatedNodeName")
    return value if isinstance(value, str) and value and len(value) <= MAX_NAME_CHARS else None


def start_time(pod: PodInfo, now: float) -> float:
    """`status.startTime` (epoch s); kube-scheduler takes now when a pod has none."""
    value = (pod.raw.get("status") or {}).get("startTime")
    parsed = parse_rfc3339(value) if isinstance(value, str) else None
    return now if parsed is None else parsed


def terminating_by_preemption(pod: PodInfo) -> bool:
    """Being deleted, with the DisruptionTarget condition the scheduler's preemption writes."""
    if not pod.deleting:
        return False
    for condition in (pod.raw.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == DISRUPTION_TARGET:
            return condition.get("status") == "True" and condition.get("reason") == PREEMPTION_BY_SCHEDULER
    return False
