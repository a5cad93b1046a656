"""Numpy reference of BalancedAllocation (kube-scheduler's `balancedResourceScorer`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

MAX = 100


def balanced_allocation(
    cpu: int, memory: int, allocatable: npt.NDArray[np.int64], requested: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Per node: (1 - spread of the cpu and memory fractions after placing the pod) * 100.

    Uses the pod's actual requests (not the non-zero defaults); fractions are capped at 1; with
    two resources the spread is |f_cpu - f_mem| / 2; a resource the node lacks is left out.
    A pod that requests neither cpu nor memory is skipped (every node scores 0).
    """
    n = allocatable.shape[0]
    if cpu == 0 and memory == 0:
        return np.zeros(n, np.int64)
    fractions = []
    present = []
    for column, request in ((0, cpu), (1, memory)):
        cap = allocatable[:, column]
        has = cap != 0
        fractions.append(np.where(has, np.minimum((requested[:, column] + request) / np.where(has, cap, 1), 1.0), 0.0))
        present.append(has)
    both = present[0] & present[1]
    std = np.where(both, np.abs(fractions[0] - fractions[1]) / 2.0, 0.0)
    return ((1.0 - std) * MAX).astype(np.int64)
