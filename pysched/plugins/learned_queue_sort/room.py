"""What LearnedQueueSort sees of the cluster: the shares of CPUs and GPUs not requested and the
most room left on one node, kept up to date from the node table's change log (a pick follows a
bind or two, so only those rows are read again, in one compiled call)."""

from __future__ import annotations

import numpy as np

from pysched.api.resources import CPU, GPU
from pysched.compiled import compiled
from pysched.deadline.features import ClusterView
from pysched.framework.nodetable import NodeTable

REREAD_LIMIT = 16  # changed rows past which every row is read again


@compiled()
def _fold(
    rows: np.ndarray, present: np.ndarray, allocatable: np.ndarray, requested: np.ndarray, columns: np.ndarray,
    free: np.ndarray, held: np.ndarray, sums: np.ndarray, room: np.ndarray, shares: np.ndarray,
) -> None:  # fmt: skip  # pragma: no cover - compiled
    """Read `rows` of the node table again into `free` / `held` (per resource), keeping `sums`
    (free, then allocatable, per resource), `room` (the most free on one row; searched again only
    when the row that held it lost some) and `shares` (free per allocatable, 0 for a resource no
    node has)."""
    for k in range(2):
        column = columns[k]
        if column < 0:
            continue
        search = False
        for row in rows:
            a = allocatable[row, column] if present[row] else 0
            f = a - requested[row, column] if present[row] else 0
            old = free[k, row]
            sums[k] += f - old
            sums[2 + k] += a - held[k, row]
            free[k, row] = f
            held[k, row] = a
            if f >= room[k]:
                room[k] = f
            elif old == room[k]:
                search = True
        if search:
            most = 0
            for row in range(free.shape[1]):
                most = max(most, free[k, row])
            room[k] = most
    for k in range(2):
        total = sums[2 + k]
        shares[k] = 0.0 if total <= 0 else max(0.0, sums[k] / total)


class ClusterRoom:
    """Free shares and the most room on one node, CPU and GPU, as of node-table change `seq`."""

    __slots__ = ("_fractions", "_names", "columns", "free", "held", "most", "room", "seq", "shares", "sums")

    def __init__(self) -> None:
        self.seq = -1
        self.columns = np.full(2, -1, np.int64)  # the CPU and GPU columns of the node table
        self._names: dict[str, int] | None = None  # the table's column map `columns` was read from
        self.free = np.zeros((2, 0), np.int64)
        self.held = np.zeros((2, 0), np.int64)
        self.sums = np.zeros(4, np.int64)
        self.room = np.zeros(2, np.int64)
        self._fractions = np.zeros(2)
        self.shares = ClusterView(1.0, 0.0)  # (CPU, GPU) shares not requested, in [0, 1]
        self.most = (0.0, 0.0)  # the most free CPU millicores and GPUs on one node

    def refresh(self, nodes: NodeTable) -> bool:
        """Bring the view up to `nodes`; False when nothing changed since the last call."""
        seq = nodes.change_seq
        if seq == self.seq:
            return False
        size = nodes.size
        fresh = self.seq >= 0 and self.free.shape[1] == size and nodes.column is self._names
        changed = nodes.changed_since(self.seq, REREAD_LIMIT) if fresh else None
        if changed is None:  # the first time, nodes or resources added or removed, many changes: every row
            self._names = nodes.column
            self.columns = np.array([nodes.column.get(CPU, -1), nodes.column.get(GPU, -1)], np.int64)
            self.free = np.zeros((2, size), np.int64)
            self.held = np.zeros((2, size), np.int64)
            self.sums[:] = 0
            self.room[:] = 0
            changed = np.arange(size, dtype=np.int64)
        _fold(changed, nodes.present, nodes.allocatable, nodes.requested, self.columns, self.free, self.held, self.sums,
              self.room, self._fractions)  # fmt: skip
        self.seq = seq
        cpu, gpu = self._fractions.tolist()
        self.shares = ClusterView(cpu, gpu)
        most = self.room.tolist()
        self.most = (float(most[0]), float(most[1]))
        return True
