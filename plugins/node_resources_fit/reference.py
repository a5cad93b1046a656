"""Numpy reference of the fit check (kube-scheduler's `fitsRequest`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

POD_COLUMN = 2


def insufficient(
    request: npt.NDArray[np.int64],
    allocatable: npt.NDArray[np.int64],
    requested: npt.NDArray[np.int64],
    names: Sequence[str],
) -> dict[str, npt.NDArray[np.bool_]]:
    """Reason -> rows failing for it. The pod count is always checked; any other resource only
    when the pod asks for it, against allocatable minus what is already requested."""
    out = {"Too many pods": requested[:, POD_COLUMN] + 1 > allocatable[:, POD_COLUMN]}
    for column, name in enumerate(names):
        if column == POD_COLUMN or request[column] == 0:
            continue
        out[f"Insufficient {name}"] = request[column] > allocatable[:, column] - requested[:, column]
    return out


def fits(
    request: npt.NDArray[np.int64],
    allocatable: npt.NDArray[np.int64],
    requested: npt.NDArray[np.int64],
    names: Sequence[str],
) -> npt.NDArray[np.bool_]:
    ok = np.ones(allocatable.shape[0], np.bool_)
    for rows in insufficient(request, allocatable, requested, names).values():
        ok &= ~rows
    return ok
