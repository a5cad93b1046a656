"""The plain definition of NodeVolumeLimits' verdict: count every placed pod's CSI volumes per
node from scratch (what the incremental counts must equal)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from pysched.api.objects import PodInfo
from pysched.framework.nodetable import Bools, NodeTable
from pysched.framework.storage import StorageView
from pysched.plugins.node_volume_limits import csi_volumes


def reference_fits(
    pod: PodInfo, placed: Iterable[tuple[PodInfo, int]], storage: StorageView, nodes: NodeTable
) -> Bools:
    attached: dict[int, dict[str, str]] = {}
    for other, row in placed:
        attached.setdefault(row, {}).update(csi_volumes(other, storage))
    new = csi_volumes(pod, storage)
    fits = np.ones(nodes.size, np.bool_)
    for row in range(nodes.size):
        name = nodes.names[row]
        if name is None:
            continue
        csi_node = storage.csi_node(name)
        limits: Mapping[str, int] = csi_node.limits if csi_node is not None else {}
        here = attached.get(row, {})
        for driver, limit in limits.items():
            adding = sum(1 for v, d in new.items() if d == driver and v not in here)
            if adding and sum(1 for d in here.values() if d == driver) + adding > limit:
                fits[row] = False
    return fits
