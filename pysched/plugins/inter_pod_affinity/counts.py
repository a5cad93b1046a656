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
never a scan of the pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from pysched.api.affinity import AffinityTerm, Selector
from pysched.api.objects import PodInfo
from pysched.framework.nodetable import I32, Bools
from pysched.framework.placed import PlacedPods

MAX_MATCHERS = 512

RowCounts = dict[int, int]  # node row -> pods (only rows with pods)


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
    """Placed pods per row for each matcher in use."""

    def __init__(self, pods: PlacedPods) -> None:
        self._pods = pods
        self._rows: dict[Matcher, RowCounts] = {}
        self._used: dict[Matcher, int] = {}
        self._tick = 0
        self.scans = 0  # matchers built by a scan (tests)

    def rows(self, matcher: Matcher) -> RowCounts:
        self._tick += 1
        found = self._rows.get(matcher)
        if found is None:
            if len(self._rows) >= MAX_MATCHERS:
                oldest = sorted(self._used, key=self._used.__getitem__)[: MAX_MATCHERS // 4]
                for old in oldest:
                    del self._rows[old], self._used[old]
            found = {}
            for pod, row in self._pods:
                if matches_all(matcher, pod):
                    _add(found, row, 1)
            self._rows[matcher] = found
            self.scans += 1
        self._used[matcher] = self._tick
        return found

    @property
    def in_use(self) -> bool:
        return bool(self._rows)

    def pod_placed(self, pod: PodInfo, row: int) -> None:
        for matcher, rows in self._rows.items():
            if matches_all(matcher, pod):
                _add(rows, row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        for matcher, rows in self._rows.items():
            if matches_all(matcher, pod):
                _add(rows, row, -1)


class CarriedTerms:
    """The terms placed pods carry, per distinct term, with their pods per row."""

    def __init__(self, hard_weight: int) -> None:
        self.hard_weight = hard_weight
        self.required_anti: dict[AffinityTerm, RowCounts] = {}
        self.scoring: dict[tuple[AffinityTerm, int], RowCounts] = {}

    def _update(self, pod: PodInfo, row: int, delta: int) -> None:
        affinity = pod.pod_affinity
        if affinity is None:
            return
        for term in affinity.required_anti_affinity:
            rows = self.required_anti.setdefault(term, {})
            _add(rows, row, delta)
            if not rows:
                del self.required_anti[term]
        keys: list[tuple[AffinityTerm, int]] = [(w.term, w.weight) for w in affinity.preferred_affinity]
        keys += [(w.term, -w.weight) for w in affinity.preferred_anti_affinity]
        if self.hard_weight > 0:
            keys += [(term, self.hard_weight) for term in affinity.required_affinity]
        for key in keys:
            rows = self.scoring.setdefault(key, {})
            _add(rows, row, delta)
            if not rows:
                del self.scoring[key]

    def pod_placed(self, pod: PodInfo, row: int) -> None:
        self._update(pod, row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        self._update(pod, row, -1)


class Placements:
    """One subscription for both: a plain pod placed while no matcher is in use costs two checks."""

    def __init__(self, matches: Matches, carried: CarriedTerms) -> None:
        self.matches = matches
        self.carried = carried

    def pod_placed(self, pod: PodInfo, row: int) -> None:
        if self.matches.in_use:
            self.matches.pod_placed(pod, row)
        if pod.pod_affinity is not None:
            self.carried.pod_placed(pod, row)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        if self.matches.in_use:
            self.matches.pod_removed(pod, row)
        if pod.pod_affinity is not None:
            self.carried.pod_removed(pod, row)


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
