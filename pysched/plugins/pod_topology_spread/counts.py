"""Matching pods per node row, per (namespace, selector), kept from the placement notices."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from pysched.api.objects import PodInfo
from pysched.api.spread import SpreadSelector
from pysched.framework.nodetable import I64, NodeTable
from pysched.framework.placed import PlacedPods

SELECTORS_KEPT = 256  # distinct (namespace, selector) count arrays before the least recent goes


class SelectorCounts:
    """`of(namespace, selector)[row]`: the placed, non-terminating pods of the namespace on that
    row that the selector matches. An array is built by one scan of the placed pods on first use,
    then kept up to date by `pod_placed` / `pod_removed`; the least recently used go first."""

    def __init__(self, pods: PlacedPods, nodes: NodeTable, kept: int = SELECTORS_KEPT) -> None:
        self._pods = pods
        self._nodes = nodes
        self._kept = kept
        self._by_namespace: dict[str, dict[SpreadSelector, I64]] = {}
        self._recent: OrderedDict[tuple[str, SpreadSelector], None] = OrderedDict()
        pods.subscribe(self)

    def __len__(self) -> int:
        return len(self._recent)

    # ----- PlacementListener
    def pod_placed(self, pod: PodInfo, row: int) -> None:
        self._count(pod, row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        self._count(pod, row, -1)

    def _count(self, pod: PodInfo, row: int, delta: int) -> None:
        if pod.deleting:
            return  # terminating pods never count (kube-scheduler #87621)
        arrays = self._by_namespace.get(pod.namespace)
        if not arrays:
            return
        for selector, counts in arrays.items():
            if selector.matches(pod.labels):
                if row >= counts.shape[0]:
                    counts = arrays[selector] = _grown(counts, row + 1)
                counts[row] += delta

    # ----- reads
    def of(self, namespace: str, selector: SpreadSelector) -> I64:
        size = self._nodes.size
        if selector.empty or selector.nothing:
            return np.zeros(size, np.int64)  # kube counts no pod for these
        arrays = self._by_namespace.setdefault(namespace, {})
        key = (namespace, selector)
        counts = arrays.get(selector)
        if counts is None:
            counts = np.zeros(max(size, 64), np.int64)
            for pod, row in self._pods:
                if pod.namespace == namespace and not pod.deleting and selector.matches(pod.labels):
                    if row >= counts.shape[0]:
                        counts = _grown(counts, row + 1)
                    counts[row] += 1
            arrays[selector] = counts
            self._recent[key] = None
            while len(self._recent) > self._kept:
                (old_ns, old_selector), _ = self._recent.popitem(last=False)
                old = self._by_namespace[old_ns]
                del old[old_selector]
                if not old:
                    del self._by_namespace[old_ns]
        else:
            self._recent.move_to_end(key)
        if counts.shape[0] < size:
            counts = arrays[selector] = _grown(counts, size)
        return counts[:size]


def _grown(counts: I64, rows: int) -> I64:
    out = np.zeros(max(rows, 2 * counts.shape[0]), np.int64)
    out[: counts.shape[0]] = counts
    return out
