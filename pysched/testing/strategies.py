"""Hypothesis strategies for node arrays and pod requests (kernel parity and property tests)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

GI = 1024**3


@dataclass(frozen=True)
class Arrays:
    """Node arrays in the NodeTable layout: columns cpu, memory, pods, ephemeral-storage, gpu."""

    allocatable: npt.NDArray[np.int64]
    requested: npt.NDArray[np.int64]
    nonzero_requested: npt.NDArray[np.int64]
    mask: npt.NDArray[np.bool_]


@st.composite
def node_arrays(draw: st.DrawFn, max_nodes: int = 24) -> Arrays:
    n = draw(st.integers(1, max_nodes))
    alloc = np.zeros((n, 5), np.int64)
    used = np.zeros((n, 5), np.int64)
    nonzero = np.zeros((n, 2), np.int64)
    mask = np.zeros(n, np.bool_)
    for i in range(n):
        alloc[i, 0] = draw(st.sampled_from([0, 500, 1000, 4000, 32000, 96000]) | st.integers(0, 128000))
        alloc[i, 1] = draw(st.sampled_from([0, GI, 16 * GI, 128 * GI]) | st.integers(0, 512 * GI))
        alloc[i, 2] = draw(st.integers(0, 110))
        alloc[i, 4] = draw(st.sampled_from([0, 0, 4, 8]))
        # Requested may exceed allocatable: the scores must clamp like kube-scheduler's.
        used[i, 0] = draw(st.integers(0, int(alloc[i, 0]) + 2000))
        used[i, 1] = draw(st.integers(0, int(alloc[i, 1]) + GI))
        used[i, 2] = draw(st.integers(0, int(alloc[i, 2]) + 1))
        used[i, 4] = draw(st.integers(0, int(alloc[i, 4])))
        nonzero[i, 0] = used[i, 0] + draw(st.integers(0, 1000))
        nonzero[i, 1] = used[i, 1] + draw(st.integers(0, GI))
        mask[i] = draw(st.booleans()) or draw(st.booleans())
    return Arrays(alloc, used, nonzero, mask)


@st.composite
def pod_request(draw: st.DrawFn) -> npt.NDArray[np.int64]:
    return np.array(
        [
            draw(st.sampled_from([0, 100, 1000, 4000]) | st.integers(0, 130000)),
            draw(st.sampled_from([0, GI, 8 * GI]) | st.integers(0, 600 * GI)),
            0,
            0,
            draw(st.sampled_from([0, 0, 1, 2, 8, 9])),
        ],
        np.int64,
    )
