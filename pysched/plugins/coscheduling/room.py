"""How many more pods of one shape the cluster has room for, from the node table's free resources.

A gang is refused early when its members still to be placed cannot fit even if every node's free
room were theirs, and the room of the pods a preemption could evict for them: a necessary
condition only (filters such as taints or affinity may refuse more), so it never refuses a job that
could be placed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from pysched.api.ids import PodKey
from pysched.framework.nodetable import POD_COLUMN, NodeTable, RequestShape
from pysched.framework.placed import PlacedPods


def room_for(nodes: NodeTable, shape: RequestShape, reclaimable: np.ndarray | None = None) -> int:
    """Pods shaped like `shape` that fit in the free room of the present nodes, node by node, with
    `reclaimable` (per row, what placed pods a preemption may evict hold) counted as free."""
    size = nodes.size
    free = _free(nodes, reclaimable)
    columns = [*(int(c) for c in shape.columns), POD_COLUMN]
    fits = np.full(size, np.iinfo(np.int64).max, np.int64)
    for column in columns:
        want = int(shape.charge[column])
        if want > 0:
            fits = np.minimum(fits, np.maximum(free[:, column], 0) // want)
    return int(fits[nodes.present[:size]].sum())


def short_in_total(
    nodes: NodeTable, wanted: Mapping[str, int], reclaimable: np.ndarray | None = None
) -> tuple[str, int, int] | None:
    """The first resource of which the present nodes' free room together (with `reclaimable`)
    holds less than `wanted`: (its name, wanted, free); None when all of it is there."""
    total = np.maximum(_free(nodes, reclaimable)[nodes.present[: nodes.size]], 0).sum(axis=0)
    for name, want in sorted(wanted.items()):
        column = nodes.column.get(name)
        have = int(total[column]) if column is not None else 0
        if want > have:
            return name, want, have
    return None


def _free(nodes: NodeTable, reclaimable: np.ndarray | None) -> np.ndarray:
    """Each row's free room, with `reclaimable` counted as free."""
    free = nodes.allocatable[: nodes.size] - nodes.requested[: nodes.size]
    return free if reclaimable is None else free + reclaimable[: nodes.size]


def held_below(nodes: NodeTable, placed: PlacedPods, priority: int, own: Collection[PodKey] = ()) -> np.ndarray | None:
    """Per row, what the placed pods of a priority below `priority` hold (their requests and pod
    slots), and the room nominations of `own` pods hold (a gang's members still to place: the
    room a member's preemption freed is the gang's); None when there is neither."""
    mine = {key for key in own if placed.held(key)}
    if not mine and not placed.any_below(priority):
        return None
    held = np.zeros_like(nodes.requested)
    for pod, row in placed:
        if pod.priority < priority or pod.key in mine:
            held[row] += nodes.request_shape(pod.requests).charge
    return held
