"""The plugin-visible view of the pods on nodes, bound or assumed, with change notices.

Plugins whose verdict depends on other pods (pod affinity, topology spread, host ports, volumes
in use, preemption) read it instead of scanning pods per cycle: a plugin subscribes from its
factory and keeps its own counts, updated by `pod_placed` / `pod_removed` as the engine's cache
assumes, confirms, forgets and removes pods. The engine writes it; plugins only read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from pysched.api.features import EVERY_POD, PodFeatures
from pysched.api.ids import PodKey
from pysched.api.objects import PodInfo


class PlacementListener(Protocol):
    def pod_placed(self, pod: PodInfo, row: int) -> None:
        """`pod` now counts on the node in `row` of the node table."""
        ...

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        """`pod` (as it was placed) no longer counts on the node in `row`."""
        ...


class PlacedPods:
    """Pods per node-table row. A pod whose labels or deletion state change while placed is
    reported removed, then placed again, so a listener's counts never hold a stale label set."""

    def __init__(self) -> None:
        self._rows: dict[int, dict[PodKey, PodInfo]] = {}
        self._listeners: list[tuple[PlacementListener, PodFeatures]] = []
        self._by_features: dict[PodFeatures, tuple[PlacementListener, ...]] = {}  # who hears of such a pod
        # Placed pods per label pair: a plugin counting a new selector starts from the pods that
        # carry a pair it requires instead of scanning every pod.
        self._by_label: dict[tuple[str, str], dict[tuple[PodKey, int], PodInfo]] = {}
        # How many placed pods hold each priority: preemption asks whether any is below its own.
        self._priorities: dict[int, int] = {}
        # Nominated pods whose room is held on their node: counted by the filters as kube counts
        # nominated pods, but not placed (a gang is not started by members only nominated).
        self._held: set[PodKey] = set()

    # ----- plugin side
    def subscribe(self, listener: PlacementListener, features: PodFeatures = EVERY_POD) -> None:
        """Deliver every pod placed so far, then every change; only of pods with one of
        `features` (`pysched.api.features`), for a listener that counts only those."""
        self._listeners.append((listener, features))
        self._by_features.clear()
        for row, pods in self._rows.items():
            for pod in pods.values():
                if pod.features & features:
                    listener.pod_placed(pod, row)

    def _hearing(self, features: PodFeatures) -> tuple[PlacementListener, ...]:
        found = self._by_features.get(features)
        if found is None:
            found = self._by_features[features] = tuple(who for who, wanted in self._listeners if features & wanted)
        return found

    def on_row(self, row: int) -> Iterator[PodInfo]:
        return iter(self._rows.get(row, {}).values())

    def with_label(self, key: str, value: str) -> Iterator[tuple[PodInfo, int]]:
        """The placed pods labelled `key=value`, with their rows."""
        for (_, row), pod in self._by_label.get((key, value), {}).items():
            yield pod, row

    def held(self, key: PodKey) -> bool:
        """The pod counts here only as a nomination whose room is held (not assumed or bound)."""
        return key in self._held

    def any_below(self, priority: int) -> bool:
        """Some placed pod has a lower priority (else no node holds a victim for `priority`)."""
        return any(held < priority for held in self._priorities)

    def __iter__(self) -> Iterator[tuple[PodInfo, int]]:
        for row, pods in self._rows.items():
            for pod in pods.values():
                yield pod, row

    def __len__(self) -> int:
        return sum(len(pods) for pods in self._rows.values())

    # ----- engine side
    def placed(self, pod: PodInfo, row: int, held: bool = False) -> None:
        """`held`: a nomination's room, not a place (`held()`)."""
        if held:
            self._held.add(pod.key)
        pods = self._rows.get(row)
        if pods is None:  # not setdefault: no empty dict made per placement
            pods = self._rows[row] = {}
        pods[pod.key] = pod
        priorities = self._priorities
        priorities[pod.priority] = priorities.get(pod.priority, 0) + 1
        if pod.labels:
            self._file(pod, row)
        for listener in self._hearing(pod.features):
            listener.pod_placed(pod, row)

    def removed(self, pod: PodInfo, row: int) -> None:
        pods = self._rows.get(row)
        if pods is None or pods.pop(pod.key, None) is None:
            return
        self._held.discard(pod.key)
        if not pods:
            del self._rows[row]
        left = self._priorities[pod.priority] - 1
        if left:
            self._priorities[pod.priority] = left
        else:
            del self._priorities[pod.priority]
        by_label, at = self._by_label, (pod.key, row)
        for pair in pod.labels.items():
            bucket = by_label.get(pair)
            if bucket is not None and bucket.pop(at, None) is not None and not bucket:
                del by_label[pair]
        for listener in self._hearing(pod.features):
            listener.pod_removed(pod, row)

    def replaced(self, old: PodInfo, new: PodInfo, row: int) -> None:
        """The same placed pod, newer: listeners hear of it only when its labels changed or it
        started terminating (pod counts such as topology spread leave terminating pods out), or
        its priority changed (which the API forbids, but the counts must not depend on it)."""
        if old.labels == new.labels and old.deleting == new.deleting and old.priority == new.priority:
            self._rows[row][new.key] = new
            if new.labels:
                self._file(new, row)
            return
        held = old.key in self._held
        self.removed(old, row)
        self.placed(new, row, held)

    def _file(self, pod: PodInfo, row: int) -> None:
        by_label, at = self._by_label, (pod.key, row)
        for pair in pod.labels.items():
            by_label.setdefault(pair, {})[at] = pod
