"""What InterPodAffinity keeps between cycles, updated by the placement notices (`Handle.pods`).

- `Matches`: for each distinct pod matcher an incoming pod used (its terms' selectors with the
  namespaces resolved), how many placed pods it matches per node row. Created by one scan of the
  placed pods on first use, then kept by the notices; least recently used ones are dropped beyond
  MAX_MATCHERS.
- `CarriedTerms`: the placed pods' own terms, grouped by distinct term, with their pods per node
  row: the required anti-affinity terms (the symmetric rule) and the terms incoming pods are scored
  with (preferred affinity +weight, preferred anti-affinity -weight, required affinity
  +hardPodAffinityWeight).

Per cycle a term then costs one pass over its rows and one over the node table's label column,
never a scan of the pods. Both are found through a `LabelIndex`: a pod (incoming or placed) is
matched only against the matchers / terms filed under one of its own labels, plus the few whose
selectors require no label value, never against all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from pysched.api.affinity import AffinityTerm, PodAffinity, Selector
from pysched.api.objects import PodInfo
from pysched.framework.nodetable import I32, Bools
from pysched.framework.placed import PlacedPods

MAX_MATCHERS = 512

RowCounts = dict[int, int]  # node row -> pods (only rows with pods)
LabelPair = tuple[str, str]
T = TypeVar("T", bound=Hashable)


def index_keys(selectors: Iterable[Selector]) -> tuple[LabelPair, ...] | None:
    """Label pairs one of which every pod matching all of `selectors` carries: the values of
    the `In` requirement (matchLabels included) with the fewest of them. () when no pod can match
    (a selector that matches nothing); None when no such requirement exists."""
    best: tuple[LabelPair, ...] | None = None
    for selector in selectors:
        if selector.nothing:
            return ()
        for requirement in selector.requirements:
            if requirement.operator == "In" and (best is None or len(requirement.values) < len(best)):
                best = tuple((requirement.key, value) for value in sorted(requirement.values))
    return best


class LabelIndex(Generic[T]):
    """Items (matchers, terms) filed by the label pairs of `index_keys`: `candidates(labels)` is
    every item that may match a pod with `labels`, each once (a pod has one value per key, so
    it meets at most one of an item's pairs); the caller still checks the whole match."""

    def __init__(self) -> None:
        self._buckets: dict[LabelPair, dict[T, None]] = {}
        self._always: dict[T, None] = {}  # no required label value: a candidate for every pod

    def add(self, item: T, selectors: Iterable[Selector]) -> None:
        keys = index_keys(selectors)
        if keys is None:
            self._always[item] = None
            return
        for pair in keys:
            self._buckets.setdefault(pair, {})[item] = None

    def remove(self, item: T, selectors: Iterable[Selector]) -> None:
        keys = index_keys(selectors)
        if keys is None:
            self._always.pop(item, None)
            return
        for pair in keys:
            bucket = self._buckets.get(pair)
            if bucket is not None:
                bucket.pop(item, None)
                if not bucket:
                    del self._buckets[pair]

    def candidates(self, labels: Mapping[str, str]) -> Iterator[T]:
        yield from self._always
        buckets = self._buckets
        if buckets:
            for pair in labels.items():
                bucket = buckets.get(pair)
                if bucket is not None:
                    yield from bucket

    @property
    def unindexed(self) -> bool:
        """Some item requires no label value: a pod without labels may match it."""
        return bool(self._always)

    def items(self) -> set[T]:
        """Every item filed (tests)."""
        return {*self._always, *(item for bucket in self._buckets.values() for item in bucket)}


@dataclass(frozen=True, slots=True)
class Clause:
    """One term as it selects placed pods: its label selector and its namespaces, resolved
    (None: every namespace)."""

    selector: Selector
    namespaces: frozenset[str] | None

    def matches(self, pod: PodInfo) -> bool:
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return self.selector.matches(pod.labels)


Matcher = tuple[Clause, ...]  # a pod matches when it matches every clause


def _selectors(matcher: Matcher) -> list[Selector]:
    return [clause.selector for clause in matcher]


def matches_all(matcher: Matcher, pod: PodInfo) -> bool:
    for clause in matcher:
        if not clause.matches(pod):
            return False
    return bool(matcher)


def _add(rows: RowCounts, row: int, delta: int) -> None:
    count = rows.get(row, 0) + delta
    if count:
        rows[row] = count
    else:
        rows.pop(row, None)


class Matches:
    """Placed pods per row for each matcher in use. It subscribes to the placed pods itself, on
    first use: until a pod has terms, placements cost it nothing."""

    def __init__(self, pods: PlacedPods) -> None:
        self._pods = pods
        self._subscribed = False
        self._rows: dict[Matcher, RowCounts] = {}
        self._used: dict[Matcher, int] = {}
        self._index: LabelIndex[Matcher] = LabelIndex()
        self._tick = 0
        self.scans = 0  # matchers built by a scan (tests)

    def rows(self, matcher: Matcher) -> RowCounts:
        self._tick += 1
        found = self._rows.get(matcher)
        if found is None:
            if not self._subscribed:
                self._pods.subscribe(self)  # replays nothing yet: no matcher is filed
                self._subscribed = True
            if len(self._rows) >= MAX_MATCHERS:
                oldest = sorted(self._used, key=self._used.__getitem__)[: MAX_MATCHERS // 4]
                for old in oldest:
                    del self._rows[old], self._used[old]
                    self._index.remove(old, _selectors(old))
            found = {}
            keys = index_keys(_selectors(matcher))
            if keys is None:
                candidates: Iterable[tuple[PodInfo, int]] = self._pods
            else:  # only pods carrying one of the pairs every match must carry
                candidates = (placed for pair in keys for placed in self._pods.with_label(*pair))
            for pod, row in candidates:
                if matches_all(matcher, pod):
                    _add(found, row, 1)
            self._rows[matcher] = found
            self._index.add(matcher, _selectors(matcher))
            self.scans += 1
        self._used[matcher] = self._tick
        return found

    def _count(self, pod: PodInfo, row: int, delta: int) -> None:
        for matcher in self._index.candidates(pod.labels):
            if matches_all(matcher, pod):
                _add(self._rows[matcher], row, delta)

    def pod_placed(self, pod: PodInfo, row: int) -> None:
        self._count(pod, row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        self._count(pod, row, -1)


class CarriedTerms:
    """The terms placed pods carry, per distinct term, with their pods per row."""

    def __init__(self, hard_weight: int, on_emptied_or_filled: Callable[[], None] = lambda: None) -> None:
        self.hard_weight = hard_weight
        # Told when `shape` changes: which pods the plugin must see depends on it.
        self._changed = on_emptied_or_filled
        self.required_anti: dict[AffinityTerm, RowCounts] = {}
        self.scoring: dict[tuple[AffinityTerm, int], RowCounts] = {}
        self.anti_index: LabelIndex[AffinityTerm] = LabelIndex()  # the keys of required_anti
        self.scoring_index: LabelIndex[tuple[AffinityTerm, int]] = LabelIndex()  # those of scoring

    def _update(self, pod: PodInfo, row: int, delta: int) -> None:
        affinity = pod.pod_affinity
        if affinity is None:
            return
        before = self.shape
        self._count(affinity, row, delta)
        if self.shape != before:
            self._changed()

    @property
    def shape(self) -> tuple[bool, bool, bool, bool]:
        """Whether there are anti-affinity terms and scoring terms, and whether any of either
        kind can match a pod without labels."""
        return (
            bool(self.required_anti),
            bool(self.scoring),
            self.anti_index.unindexed,
            self.scoring_index.unindexed,
        )

    def _count(self, affinity: PodAffinity, row: int, delta: int) -> None:
        for term in affinity.required_anti_affinity:
            rows = self.required_anti.get(term)
            if rows is None:
                rows = self.required_anti[term] = {}
                self.anti_index.add(term, (term.selector,))
            _add(rows, row, delta)
            if not rows:
                del self.required_anti[term]
                self.anti_index.remove(term, (term.selector,))
        keys: list[tuple[AffinityTerm, int]] = [(w.term, w.weight) for w in affinity.preferred_affinity]
        keys += [(w.term, -w.weight) for w in affinity.preferred_anti_affinity]
        if self.hard_weight > 0:
            keys += [(term, self.hard_weight) for term in affinity.required_affinity]
        for key in keys:
            rows = self.scoring.get(key)
            if rows is None:
                rows = self.scoring[key] = {}
                self.scoring_index.add(key, (key[0].selector,))
            _add(rows, row, delta)
            if not rows:
                del self.scoring[key]
                self.scoring_index.remove(key, (key[0].selector,))

    def pod_placed(self, pod: PodInfo, row: int) -> None:
        self._update(pod, row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        self._update(pod, row, -1)


def row_arrays(rows: RowCounts, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, counts) as arrays, rows beyond the table left out."""
    index = np.fromiter(rows.keys(), np.int64, len(rows))
    counts = np.fromiter(rows.values(), np.int64, len(rows))
    keep = index < size
    return index[keep], counts[keep]


def domains_hit(rows: RowCounts, column: I32, values: int) -> Bools:
    """Per node: its topology value (column) is that of a row holding pods. Nodes without the
    label are never hit. `values` is the number of value ids of the column's key."""
    index, _ = row_arrays(rows, column.shape[0])
    hit = np.zeros(values + 1, np.bool_)  # the extra slot is "label absent" (-1)
    ids = column[index]
    hit[ids[ids >= 0]] = True
    hit[-1] = False
    return hit[column]


def domain_sums(contributions: Iterable[tuple[RowCounts, int]], column: I32, values: int) -> np.ndarray:
    """Per node: the sum of count x weight over the rows sharing its topology value (0 without the label)."""
    total = np.zeros(values + 1, np.int64)
    for rows, weight in contributions:
        index, counts = row_arrays(rows, column.shape[0])
        ids = column[index]
        keep = ids >= 0
        np.add.at(total, ids[keep], counts[keep] * weight)
    total[-1] = 0
    return total[column]


def any_on_labelled(rows: RowCounts, columns: Mapping[str, I32]) -> bool:
    """Some row holding pods has one of the topology labels (kube's non-empty affinity counts)."""
    for column in columns.values():
        index, _ = row_arrays(rows, column.shape[0])
        if (column[index] >= 0).any():
            return True
    return False
