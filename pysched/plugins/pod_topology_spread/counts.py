"""Matching pods per node row, per (namespace, selector), kept from the placement notices."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from pysched.api.objects import PodInfo
from pysched.api.spread import SpreadSelector
from pysched.framework.nodetable import I64, NodeTable
from pysched.framework.placed import PlacedPods

SELECTORS_KEPT = 256  # distinct (namespace, selector) count arrays before the least recent goes


class _Namespace:
    """The count arrays of one namespace and an inverted index over their selectors: each
    selector sits in the buckets of one requirement it must satisfy (`index_terms`), so a placed
    pod is matched only against the selectors in the buckets of its own labels, plus those with
    no such requirement (`unindexed`, matched against every pod)."""

    __slots__ = ("arrays", "by_key", "by_pair", "unindexed")

    def __init__(self) -> None:
        self.arrays: dict[SpreadSelector, I64] = {}
        self.by_pair: dict[tuple[str, str], dict[SpreadSelector, None]] = {}  # matchLabels / In
        self.by_key: dict[str, dict[SpreadSelector, None]] = {}  # Exists
        self.unindexed: dict[SpreadSelector, None] = {}

    def _buckets(self, selector: SpreadSelector) -> list[dict[SpreadSelector, None]]:
        terms = selector.index_terms()
        if not terms:
            return [self.unindexed]
        out = []
        for key, value in terms:
            if value is None:
                out.append(self.by_key.setdefault(key, {}))
            else:
                out.append(self.by_pair.setdefault((key, value), {}))
        return out

    def add(self, selector: SpreadSelector, counts: I64) -> None:
        self.arrays[selector] = counts
        for bucket in self._buckets(selector):
            bucket[selector] = None

    def drop(self, selector: SpreadSelector) -> None:
        del self.arrays[selector]
        for key, value in selector.index_terms():
            index: dict[Any, dict[SpreadSelector, None]] = self.by_key if value is None else self.by_pair
            term = key if value is None else (key, value)
            bucket = index[term]
            del bucket[selector]
            if not bucket:
                del index[term]
        self.unindexed.pop(selector, None)

    def candidates(self, labels: Mapping[str, str]) -> list[SpreadSelector]:
        """Every selector that may match `labels` (a superset of those that do)."""
        found = list(self.unindexed)
        by_pair, by_key = self.by_pair, self.by_key
        for pair in labels.items():
            bucket = by_pair.get(pair)
            if bucket:
                found += bucket
            if by_key:
                bucket = by_key.get(pair[0])
                if bucket:
                    found += bucket
        return found


class SelectorCounts:
    """`of(namespace, selector)[row]`: the placed, non-terminating pods of the namespace on that
    row that the selector matches. An array is built by one scan of the placed pods on first use,
    then kept up to date by `pod_placed` / `pod_removed` (which visit only the selectors the
    inverted index of `_Namespace` offers for the pod's labels); the least recently used go
    first."""

    def __init__(self, pods: PlacedPods, nodes: NodeTable, kept: int = SELECTORS_KEPT) -> None:
        self._pods = pods
        self._nodes = nodes
        self._kept = kept
        self._by_namespace: dict[str, _Namespace] = {}
        self._recent: OrderedDict[tuple[str, SpreadSelector], None] = OrderedDict()
        self._subscribed = False  # on first use: until a pod spreads, placements cost nothing

    def __len__(self) -> int:
        return len(self._recent)

    # ----- PlacementListener
    def pod_placed(self, pod: PodInfo, row: int) -> None:
        if not pod.deleting:  # terminating pods never count, as in kube-scheduler
            self._count(pod, row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        if not pod.deleting:
            self._count(pod, row, -1)

    def _candidate_pods(self, namespace: str, selector: SpreadSelector) -> Iterator[tuple[PodInfo, int]]:
        """The counted pods the selector may match: the placed pods carrying one of its index
        terms (`PlacedPods.with_label`), or every placed pod when it has no term with a value;
        of the namespace, never terminating."""
        terms = selector.index_terms()
        if not terms or terms[0][1] is None:
            candidates: Iterable[tuple[PodInfo, int]] = self._pods
        else:
            candidates = (placed for key, value in terms for placed in self._pods.with_label(key, str(value)))
        for pod, row in candidates:
            if pod.namespace == namespace and not pod.deleting:
                yield pod, row

    def _count(self, pod: PodInfo, row: int, delta: int) -> None:
        space = self._by_namespace.get(pod.namespace)
        if space is None:
            return
        labels = pod.labels
        arrays = space.arrays
        for selector in space.candidates(labels):
            if selector.matches(labels):
                counts = arrays[selector]
                if row >= counts.shape[0]:
                    counts = arrays[selector] = _grown(counts, row + 1)
                counts[row] += delta

    # ----- reads
    def of(self, namespace: str, selector: SpreadSelector) -> I64:
        size = self._nodes.size
        if selector.empty or selector.nothing:
            return np.zeros(size, np.int64)  # kube counts no pod for these
        space = self._by_namespace.get(namespace)
        if space is None:
            space = self._by_namespace[namespace] = _Namespace()
        key = (namespace, selector)
        counts = space.arrays.get(selector)
        if counts is None:
            if not self._subscribed:
                self._pods.subscribe(self)  # replays nothing yet: no selector is counted
                self._subscribed = True
            counts = np.zeros(max(size, 64), np.int64)
            for pod, row in self._candidate_pods(namespace, selector):
                if selector.matches(pod.labels):
                    if row >= counts.shape[0]:
                        counts = _grown(counts, row + 1)
                    counts[row] += 1
            space.add(selector, counts)
            self._recent[key] = None
            while len(self._recent) > self._kept:
                (old_ns, old_selector), _ = self._recent.popitem(last=False)
                old = self._by_namespace[old_ns]
                old.drop(old_selector)
                if not old.arrays:
                    del self._by_namespace[old_ns]
        else:
            self._recent.move_to_end(key)
        if counts.shape[0] < size:
            counts = _grown(counts, size)
            space.arrays[selector] = counts
        return counts[:size]


def _grown(counts: I64, rows: int) -> I64:
    out = np.zeros(max(rows, 2 * counts.shape[0]), np.int64)
    out[: counts.shape[0]] = counts
    return out
