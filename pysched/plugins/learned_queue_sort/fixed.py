"""Each waiting pod's fixed feature row (`pysched.deadline.features.static`), read once per
version of the pod (and of what else the row was read from: `stamp`) and kept in one matrix, so
that a window is a list of row numbers and the compiled pick reads the rows in place (no stacking
per pick)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np

from pysched.api.ids import PodKey
from pysched.api.objects import PodInfo
from pysched.deadline.features import STATIC_WIDTH
from pysched.framework.interfaces import QueuedPod

LIMIT = 10_000  # pods whose rows are kept; past it every row is read again (pods long gone)
FIRST_ROWS = 64


class FixedRows:
    __slots__ = ("free", "matrix", "slot")

    def __init__(self) -> None:
        self.matrix = np.zeros((FIRST_ROWS, STATIC_WIDTH))
        self.slot: dict[PodKey, tuple[PodInfo, int, Hashable]] = {}
        self.free = list(range(FIRST_ROWS - 1, -1, -1))

    def index(
        self,
        candidates: Sequence[QueuedPod],
        read: Callable[[PodInfo], Sequence[float]],
        stamp: Callable[[PodInfo], Hashable] | None = None,
    ) -> np.ndarray:
        """The candidates' row numbers (int64), reading with `read` the pods that are new or changed
        (a demotion, a resize) since their row was written, or whose `stamp` changed (what the row
        also depends on: whether the pod's namespace may use deadlines)."""
        if len(self.slot) >= LIMIT:  # before any row of this window is handed out
            self.slot.clear()
            self.free = list(range(len(self.matrix) - 1, -1, -1))
        slot = self.slot
        rows = []
        for c in candidates:
            pod = c.pod
            now = None if stamp is None else stamp(pod)
            entry = slot.get(pod.key)
            if entry is None or entry[0] is not pod or entry[2] != now:
                entry = self._write(pod, read(pod), entry, now)
            rows.append(entry[1])
        return np.array(rows, np.int64)

    def drop(self, key: PodKey) -> None:
        """The pod left the queue: its row is free again."""
        entry = self.slot.pop(key, None)
        if entry is not None:
            self.free.append(entry[1])

    def _write(
        self, pod: PodInfo, row: Sequence[float], entry: tuple[PodInfo, int, Hashable] | None, stamp: Hashable
    ) -> tuple[PodInfo, int, Hashable]:
        if entry is None:
            if not self.free:
                size = len(self.matrix)
                self.matrix = np.concatenate([self.matrix, np.zeros((size, STATIC_WIDTH))])
                self.free = list(range(2 * size - 1, size - 1, -1))
            number = self.free.pop()
        else:
            number = entry[1]
        self.matrix[number] = row
        entry = self.slot[pod.key] = (pod, number, stamp)
        return entry
