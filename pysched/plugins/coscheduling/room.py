"""How many more pods of one shape the cluster has room for, from the node table's free resources.

A gang is refused early when its members still to be placed cannot fit even if every node's free
room were theirs: a necessary condition only (filters such as taints or affinity may refuse more),
so it never refuses a job that could be placed.
"""

from __future__ import annotations

import numpy as np

from pysched.framework.nodetable import POD_COLUMN, NodeTable, RequestShape


def room_for(nodes: NodeTable, shape: RequestShape) -> int:
    """Pods shaped like `shape` that fit in the free room of the present nodes, node by node."""
    size = nodes.size
    free = nodes.allocatable[:size] - nodes.requested[:size]
    columns = [*(int(c) for c in shape.columns), POD_COLUMN]
    fits = np.full(size, np.iinfo(np.int64).max, np.int64)
    for column in columns:
        want = int(shape.charge[column])
        if want > 0:
            fits = np.minimum(fits, np.maximum(free[:, column], 0) // want)
    return int(fits[nodes.present[:size]].sum())
