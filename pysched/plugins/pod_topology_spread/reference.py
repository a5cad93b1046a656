"""PodTopologySpread by its definition: every count recomputed from the full pod list, one node
at a time, as kube-scheduler's plugin reads it. The plugin's incremental counts and bincounts are
held equal to this by hypothesis (tests/test_reference.py)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from pysched.api.objects import NodeInfo, PodInfo
from pysched.api.spread import SpreadConstraint, SpreadSelector
from pysched.framework.masks import first_untolerated
from pysched.framework.nodetable import MAX_NODE_SCORE

HOSTNAME = "kubernetes.io/hostname"
Placed = Sequence[tuple[PodInfo, NodeInfo]]
# Whether a node matches the pod's nodeSelector and required node affinity: NodeAffinity's
# definition, passed in (its one-node oracle lives in NodeAffinity's tests).
Affinity = Callable[[PodInfo, NodeInfo], bool]


def included(pod: PodInfo, node: NodeInfo, constraint: SpreadConstraint, affinity: Affinity) -> bool:
    if constraint.honor_affinity and not affinity(pod, node):
        return False
    return not (constraint.honor_taints and first_untolerated(node.taints, pod.tolerations) is not None)


def count_on(node: NodeInfo, placed: Placed, namespace: str, selector: SpreadSelector) -> int:
    if selector.empty or selector.nothing:
        return 0
    return sum(
        1
        for p, n in placed
        if n.name == node.name and p.namespace == namespace and not p.deleting and selector.matches(p.labels)
    )


def filter_reasons(
    pod: PodInfo, constraints: Sequence[SpreadConstraint], nodes: Sequence[NodeInfo], placed: Placed, affinity: Affinity
) -> dict[str, str | None]:
    """node -> None (passes), "missing" or "skew", for the pod's DoNotSchedule constraints."""
    hard = [c for c in constraints if c.hard]
    domains: list[dict[str, int]] = []
    for c in hard:
        per: dict[str, int] = {}
        for node in nodes:
            if all(h.topology_key in node.labels for h in hard) and included(pod, node, c, affinity):
                value = node.labels[c.topology_key]
                per[value] = per.get(value, 0) + count_on(node, placed, pod.namespace, c.selector_for(pod.labels))
        domains.append(per)
    out: dict[str, str | None] = {}
    for node in nodes:
        verdict = None
        for c, per in zip(hard, domains, strict=True):
            if c.topology_key not in node.labels:
                verdict = "missing"
                break
            low = 0 if len(per) < c.min_domains else min(per.values())
            own = int(c.selector_for(pod.labels).matches(pod.labels))
            if per.get(node.labels[c.topology_key], 0) + own - low > c.max_skew:
                verdict = "skew"
                break
        out[node.name] = verdict
    return out


def scores(
    pod: PodInfo,
    constraints: Sequence[SpreadConstraint],
    nodes: Sequence[NodeInfo],
    feasible: Sequence[NodeInfo],
    placed: Placed,
    affinity: Affinity,
    require_all: bool = True,
) -> dict[str, int]:
    """Normalized scores of the feasible nodes for the pod's ScheduleAnyway constraints."""
    soft = [c for c in constraints if not c.hard]

    def has_all(node: NodeInfo) -> bool:
        return not require_all or all(c.topology_key in node.labels for c in soft)

    kept = [n for n in feasible if has_all(n)]
    raw: dict[str, int] = {}
    weights, per_domain = [], []
    for c in soft:
        selector = c.selector_for(pod.labels)
        values = {n.labels.get(c.topology_key, "") for n in kept}
        weights.append(math.log((len(kept) if c.topology_key == HOSTNAME else len(values)) + 2))
        per: dict[str, int] = {}
        for node in nodes:
            if has_all(node) and included(pod, node, c, affinity):
                value = node.labels.get(c.topology_key, "")
                per[value] = per.get(value, 0) + count_on(node, placed, pod.namespace, selector)
        per_domain.append(per)
    for node in kept:
        total = 0.0
        for c, weight, per in zip(soft, weights, per_domain, strict=True):
            if c.topology_key not in node.labels:
                continue
            if c.topology_key == HOSTNAME:
                count = count_on(node, placed, pod.namespace, c.selector_for(pod.labels))
            else:
                count = per.get(node.labels[c.topology_key], 0)
            total += count * weight + (c.max_skew - 1)
        raw[node.name] = math.floor(total + 0.5)
    out: dict[str, int] = {n.name: 0 for n in feasible}
    if raw:
        low, high = min(raw.values()), max(raw.values())
        for name, got in raw.items():
            out[name] = MAX_NODE_SCORE if high == 0 else MAX_NODE_SCORE * (high + low - got) // high
    return out
