"""The plugin-visible view of the pods on nodes, bound or assumed, with change notices.

Plugins whose verdict depends on other pods (pod affinity, topology spread, host ports, volumes
in use, preemption) read it instead of scanning pods per cycle: a plugin subscribes from its
factory and keeps its own counts, updated by `pod_placed` / `pod_removed` as the engine's cache
assumes, confirms, forgets and removes pods. The engine writes it; plugins only read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

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
        self._listeners: list[PlacementListener] = []

    # ----- plugin side
    def subscribe(self, listener: PlacementListener) -> None:
        """Deliver every pod placed so far, then every change."""
        self._listeners.append(listener)
        for row, pods in self._rows.items():
            for pod in pods.values():
                listener.pod_placed(pod, row)

    def on_row(self, row: int) -> Iterator[PodInfo]:
        return iter(self._rows.get(row, {}).values())

    def __iter__(self) -> Iterator[tuple[PodInfo, int]]:
        for row, pods in self._rows.items():
            for pod in pods.values():
                yield pod, row

    def __len__(self) -> int:
        return sum(len(pods) for pods in self._rows.values())

    # ----- engine side
    def placed(self, pod: PodInfo, row: int) -> None:
        self._rows.setdefault(row, {})[pod.key] = pod
        for listener in self._listeners:
            listener.pod_placed(pod, row)

    def removed(self, pod: PodInfo, row: int) -> None:
        pods = self._rows.get(row)
        if pods is None or pods.pop(pod.key, None) is None:
            return
        if not pods:
            del self._rows[row]
        for listener in self._listeners:
            listener.pod_removed(pod, row)

    def replaced(self, old: PodInfo, new: PodInfo, row: int) -> None:
        """The same placed pod, newer: listeners hear of it only when its labels changed or it
        started terminating (pod counts such as topology spread leave terminating pods out)."""
        if old.labels == new.labels and old.deleting == new.deleting:
            self._rows[row][new.key] = new
            return
        self.removed(old, row)
        self.placed(new, row)
