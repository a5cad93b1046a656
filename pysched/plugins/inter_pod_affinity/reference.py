"""InterPodAffinity's meaning, the obvious way: every node against every placed pod.

kube-scheduler v1.36's filtering.go and scoring.go, one node and one pod at a time, with no counts
kept. The plugin's incremental counts are held to this by hypothesis (tests/test_reference.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from pysched.api.affinity import AffinityTerm
from pysched.api.objects import NodeInfo, PodInfo
from pysched.framework.nodetable import MAX_NODE_SCORE

NamespaceLabels = Callable[[str], Mapping[str, str]]
Placed = Sequence[tuple[PodInfo, NodeInfo]]


def _incoming_matches(term: AffinityTerm, other: PodInfo, ns_labels: NamespaceLabels, all_ns: Collection[str]) -> bool:
    """The incoming pod's term against a placed pod: the namespaceSelector selects namespaces
    (empty: all of them) among those the cluster knows."""
    selector = term.namespace_selector
    if selector.everything:
        in_namespace = True
    else:
        chosen = {ns for ns in all_ns if selector.matches(ns_labels(ns))} if not selector.nothing else set()
        in_namespace = other.namespace in term.namespaces or other.namespace in chosen
    return in_namespace and term.selector.matches(other.labels)


def _all(terms: Sequence[AffinityTerm], pod: PodInfo, ns_labels: NamespaceLabels, all_ns: Collection[str]) -> bool:
    return bool(terms) and all(_incoming_matches(t, pod, ns_labels, all_ns) for t in terms)


def verdicts(
    pod: PodInfo, nodes: Sequence[NodeInfo], placed: Placed, ns_labels: NamespaceLabels, all_ns: Collection[str]
) -> list[str | None]:
    """Per node: None (passes) or the reason kube gives."""
    affinity = pod.pod_affinity
    hard = affinity.required_affinity if affinity else ()
    anti = affinity.required_anti_affinity if affinity else ()
    own_ns = ns_labels(pod.namespace)
    # Pairs (key, value) with pods matching all required affinity terms (kube's affinityCounts).
    affinity_pairs: set[tuple[str, str]] = set()
    for other, node in placed:
        if _all(hard, other, ns_labels, all_ns):
            affinity_pairs |= {
                (t.topology_key, node.labels[t.topology_key]) for t in hard if t.topology_key in node.labels
            }
    anti_pairs = {
        (t.topology_key, node.labels[t.topology_key])
        for other, node in placed
        for t in anti
        if t.topology_key in node.labels and _incoming_matches(t, other, ns_labels, all_ns)
    }
    existing_pairs = {
        (t.topology_key, node.labels[t.topology_key])
        for other, node in placed
        if other.pod_affinity is not None
        for t in other.pod_affinity.required_anti_affinity
        if t.topology_key in node.labels and t.matches(pod.namespace, pod.labels, own_ns)
    }
    out: list[str | None] = []
    for node in nodes:
        ok = True
        exist = True
        for t in hard:
            if t.topology_key not in node.labels:
                ok = False
            elif (t.topology_key, node.labels[t.topology_key]) not in affinity_pairs:
                exist = False
        if ok and not exist:
            ok = not affinity_pairs and _all(hard, pod, ns_labels, all_ns)
        if not ok:
            out.append("node(s) didn't match pod affinity rules")
        elif any(
            t.topology_key in node.labels and (t.topology_key, node.labels[t.topology_key]) in anti_pairs for t in anti
        ):
            out.append("node(s) didn't match pod anti-affinity rules")
        elif any(pair in existing_pairs for pair in node.labels.items()):
            out.append("node(s) didn't satisfy existing pods anti-affinity rules")
        else:
            out.append(None)
    return out


def raw_scores(
    pod: PodInfo,
    nodes: Sequence[NodeInfo],
    placed: Placed,
    ns_labels: NamespaceLabels,
    all_ns: Collection[str],
    hard_weight: int = 1,
) -> list[int]:
    """Per node, kube's Score: the topology scores of its labels."""
    affinity = pod.pod_affinity
    own_ns = ns_labels(pod.namespace)
    topology: dict[tuple[str, str], int] = {}

    def add(term: AffinityTerm, node: NodeInfo, weight: int) -> None:
        if term.topology_key in node.labels:
            pair = (term.topology_key, node.labels[term.topology_key])
            topology[pair] = topology.get(pair, 0) + weight

    for other, node in placed:
        if affinity is not None:
            for w in affinity.preferred_affinity:
                if _incoming_matches(w.term, other, ns_labels, all_ns):
                    add(w.term, node, w.weight)
            for w in affinity.preferred_anti_affinity:
                if _incoming_matches(w.term, other, ns_labels, all_ns):
                    add(w.term, node, -w.weight)
        carried = other.pod_affinity
        if carried is None:
            continue
        if hard_weight > 0:
            for t in carried.required_affinity:
                if t.matches(pod.namespace, pod.labels, own_ns):
                    add(t, node, hard_weight)
        for w in carried.preferred_affinity:
            if w.term.matches(pod.namespace, pod.labels, own_ns):
                add(w.term, node, w.weight)
        for w in carried.preferred_anti_affinity:
            if w.term.matches(pod.namespace, pod.labels, own_ns):
                add(w.term, node, -w.weight)
    return [sum(topology.get(pair, 0) for pair in node.labels.items()) for node in nodes]


def normalized(scores: Sequence[int]) -> list[int]:
    """kube's NormalizeScore over the feasible nodes' scores."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [0] * len(scores)
    return [int(float(MAX_NODE_SCORE) * (float(s - low) / float(high - low))) for s in scores]


__all__ = ["normalized", "raw_scores", "verdicts"]
