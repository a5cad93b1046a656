"""NodePorts' numpy definition: recompute every row's used binds from all placed pods, then test
each of the pod's host ports against each row's binds, one pair at a time."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from pysched.api.objects import PodInfo
from pysched.api.ports import HostPort
from pysched.framework.nodetable import Bools


def used_binds(placed: Iterable[tuple[PodInfo, int]]) -> dict[int, set[HostPort]]:
    out: dict[int, set[HostPort]] = {}
    for pod, row in placed:
        for bind in pod.host_ports:
            out.setdefault(row, set()).add(bind)
    return out


def feasible(pod: PodInfo, placed: Iterable[tuple[PodInfo, int]], rows: int) -> Bools:
    used = used_binds(placed)
    return np.array(
        [not any(want.conflicts(bind) for want in pod.host_ports for bind in used.get(row, ())) for row in range(rows)],
        np.bool_,
    )
