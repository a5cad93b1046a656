"""The fused filter-and-score kernel: one pod against every node, compiled with numba.

Filters and scores that depend only on resources and precomputed node masks are fused
(`pysched.framework.fused` declares them). The meaning of each term is defined by the numpy reference of the plugin
that owns it (pysched/plugins/*/reference.py); hypothesis tests hold the kernel to those references.
Integer results follow kube-scheduler's arithmetic so that scores agree to the unit.

Only compiled functions live here; the caches that call them incrementally are in
`pysched.scheduler.selection`.
"""

from __future__ import annotations

import numpy as np

from pysched.compiled import CACHE_FOLDER as CACHE_FOLDER
from pysched.compiled import compiled as _kernel
from pysched.framework.fused import URGENT_CLASS
from pysched.framework.nodetable import I64, MAX_NODE_SCORE, POD_COLUMN, Bools


@_kernel(inline="always")
def _floor_div(num: np.int64, den: np.int64) -> np.int64:  # pragma: no cover - compiled
    # A float division corrected to the exact integer floor: cheaper than an int64 division.
    q = np.int64(num / den)
    if q * den > num:
        q -= 1
    elif (q + 1) * den <= num:
        q += 1
    return q


@_kernel()
def score_rows(  # pragma: no cover - compiled; covered through the parity tests
    rows: I64, shape: I64, params: I64, allocatable: I64, requested: I64, nonzero_requested: I64, scores: I64
) -> None:
    """Weighted sum of the fused score terms for the given rows. shape = (nz_cpu, nz_mem, cpu, mem,
    gpu, gpu column or -1, score class); the last three are read only for URGENCY_PLACEMENT."""
    w_least, w_most, w_balanced, cpu_weight, memory_weight = params[0], params[1], params[2], params[3], params[4]
    nz_cpu, nz_mem, cpu, mem = shape[0], shape[1], shape[2], shape[3]
    balanced_on = w_balanced != 0 and (cpu != 0 or mem != 0)
    balance_after = params[10] != 0
    # URGENCY_PLACEMENT (its plugin's reference.py defines it): the weighted mean of the cpu term
    # (urgent: headroom to grow, relaxed: best fit) and, for GPU pods, the GPU best fit.
    w_urgency = params[5]
    gpu = np.int64(0)
    gpu_col = np.int64(-1)
    urgent = False
    if w_urgency != 0 and shape.shape[0] >= 7:
        gpu, gpu_col, urgent = shape[4], shape[5], shape[6] == URGENT_CLASS
    else:
        w_urgency = np.int64(0)
    w_cpu_term = params[6] if urgent else params[7]
    w_gpu_term = params[8] if gpu > 0 and gpu_col >= 0 else np.int64(0)
    urgency_den = w_cpu_term + w_gpu_term
    urgency_on = w_urgency != 0 and urgency_den != 0
    want = nz_cpu * params[9]  # the free cpu at which an urgent pod's headroom score saturates
    for k in range(rows.shape[0]):
        i = rows[k]
        total = np.int64(0)
        cap_cpu = allocatable[i, 0]
        cap_mem = allocatable[i, 1]
        if w_least != 0 or w_most != 0:
            used_cpu = nonzero_requested[i, 0] + nz_cpu
            used_mem = nonzero_requested[i, 1] + nz_mem
            least = np.int64(0)
            most = np.int64(0)
            weight_sum = np.int64(0)
            if cap_cpu != 0:
                weight_sum += cpu_weight
                if used_cpu <= cap_cpu:
                    least += _floor_div((cap_cpu - used_cpu) * MAX_NODE_SCORE, cap_cpu) * cpu_weight
                    most += _floor_div(used_cpu * MAX_NODE_SCORE, cap_cpu) * cpu_weight
                else:
                    most += MAX_NODE_SCORE * cpu_weight
            if cap_mem != 0:
                weight_sum += memory_weight
                if used_mem <= cap_mem:
                    least += _floor_div((cap_mem - used_mem) * MAX_NODE_SCORE, cap_mem) * memory_weight
                    most += _floor_div(used_mem * MAX_NODE_SCORE, cap_mem) * memory_weight
                else:
                    most += MAX_NODE_SCORE * memory_weight
            if weight_sum != 0:
                total += w_least * _floor_div(least, weight_sum) + w_most * _floor_div(most, weight_sum)
        if balanced_on:
            # The balance with the pod; kube-scheduler v1.36 scores how much the pod improves it,
            # 50..100 (75: no change), unless the profile asks for the balance after alone.
            with_pod = np.int64(MAX_NODE_SCORE)
            without_pod = np.int64(MAX_NODE_SCORE)
            if cap_cpu != 0 and cap_mem != 0:
                f_cpu = min((requested[i, 0] + cpu) / cap_cpu, 1.0)
                f_mem = min((requested[i, 1] + mem) / cap_mem, 1.0)
                with_pod = np.int64((1.0 - abs(f_cpu - f_mem) / 2.0) * MAX_NODE_SCORE)
                if not balance_after:
                    f_cpu = min(requested[i, 0] / cap_cpu, 1.0)
                    f_mem = min(requested[i, 1] / cap_mem, 1.0)
                    without_pod = np.int64((1.0 - abs(f_cpu - f_mem) / 2.0) * MAX_NODE_SCORE)
            if balance_after:
                total += w_balanced * with_pod
            else:
                half = np.int64(MAX_NODE_SCORE // 2)
                total += w_balanced * (half + _floor_div(half + with_pod - without_pod, np.int64(2)))
        if urgency_on:
            acc = np.int64(0)
            if w_cpu_term != 0 and cap_cpu != 0:
                free = max(cap_cpu - requested[i, 0] - cpu, np.int64(0))
                if urgent:
                    acc += w_cpu_term * (_floor_div(min(free, want) * MAX_NODE_SCORE, want) if want > 0 else 0)
                else:
                    acc += w_cpu_term * _floor_div(nz_cpu * MAX_NODE_SCORE, nz_cpu + free)
            if w_gpu_term != 0:
                cap_gpu = allocatable[i, gpu_col]
                if cap_gpu != 0:
                    free_gpu = max(cap_gpu - requested[i, gpu_col] - gpu, np.int64(0))
                    acc += w_gpu_term * _floor_div(gpu * MAX_NODE_SCORE, gpu + free_gpu)
            total += w_urgency * _floor_div(acc, urgency_den)
        scores[i] = total


@_kernel()
def select_node(  # pragma: no cover - compiled; covered through the parity tests
    request: I64,
    columns: I64,
    resource_fit: bool,
    allocatable: I64,
    requested: I64,
    candidates: I64,
    scores: I64,
    out: I64,
    write_out: bool,
) -> tuple[int, int]:
    """Fit check and arg-max over the candidate rows (those the node masks let through).

    Returns (best row or -1, feasible count). With `write_out`, `out[i]` becomes row i's score,
    or -1 when the row is infeasible or not a candidate. Ties go to the lowest row, which keeps
    runs reproducible.
    """
    if write_out:
        out[:] = -1
    best = -1
    best_score = np.int64(-1)
    feasible = 0
    for k in range(candidates.shape[0]):
        i = candidates[k]
        if resource_fit:
            if requested[i, POD_COLUMN] + 1 > allocatable[i, POD_COLUMN]:
                continue
            ok = True
            for j in range(columns.shape[0]):
                c = columns[j]
                if request[c] > allocatable[i, c] - requested[i, c]:
                    ok = False
                    break
            if not ok:
                continue
        feasible += 1
        s = scores[i]
        if write_out:
            out[i] = s
        if s > best_score:  # candidates ascend, so ties keep the lowest row
            best_score = s
            best = i
    return best, feasible


@_kernel()
def charge_row(  # pragma: no cover - compiled
    requested: I64, nonzero_requested: I64, row: int, charge: I64, nonzero: I64, sign: int
) -> None:
    """Add (sign 1) or remove (sign -1) a pod's request on its node's row: one call instead of
    two numpy slice operations on the assume/confirm path."""
    for c in range(charge.shape[0]):
        requested[row, c] += sign * charge[c]
    nonzero_requested[row, 0] += sign * nonzero[0]
    nonzero_requested[row, 1] += sign * nonzero[1]


@_kernel()
def _fill_leaves(  # pragma: no cover - compiled
    rows: I64,
    request: I64,
    columns: I64,
    resource_fit: bool,
    allocatable: I64,
    requested: I64,
    mask: Bools,
    scores: I64,
    tree: I64,
) -> int:
    """Write the leaves of the given rows: -1 when the row cannot take the pod, else its score
    with the row folded into the low bits so that the max prefers the lowest row on ties.
    Returns the change in the number of feasible leaves."""
    scale = tree.shape[0] // 2
    delta = 0
    for k in range(rows.shape[0]):
        i = rows[k]
        leaf = np.int64(-1)
        if mask[i]:
            ok = True
            if resource_fit:
                if requested[i, POD_COLUMN] + 1 > allocatable[i, POD_COLUMN]:
                    ok = False
                else:
                    for j in range(columns.shape[0]):
                        c = columns[j]
                        if request[c] > allocatable[i, c] - requested[i, c]:
                            ok = False
                            break
            if ok:
                leaf = scores[i] * scale + (scale - 1 - i)
        old = tree[scale + i]
        delta += (1 if leaf >= 0 else 0) - (1 if old >= 0 else 0)
        tree[scale + i] = leaf
    return delta


@_kernel()
def build_tree(  # pragma: no cover - compiled
    request: I64,
    columns: I64,
    resource_fit: bool,
    allocatable: I64,
    requested: I64,
    mask: Bools,
    scores: I64,
    tree: I64,
) -> int:
    """Fill a max tournament tree over every row; returns how many rows are feasible."""
    scale = tree.shape[0] // 2
    tree[:] = -1
    count = _fill_leaves(
        np.arange(mask.shape[0]), request, columns, resource_fit, allocatable, requested, mask, scores, tree
    )
    for j in range(scale - 1, 0, -1):
        tree[j] = max(tree[2 * j], tree[2 * j + 1])
    return count


@_kernel()
def update_tree(  # pragma: no cover - compiled
    rows: I64,
    request: I64,
    columns: I64,
    resource_fit: bool,
    allocatable: I64,
    requested: I64,
    mask: Bools,
    scores: I64,
    tree: I64,
) -> int:
    """Refresh the leaves of changed rows and their paths to the root; returns the change in the
    feasible count."""
    scale = tree.shape[0] // 2
    delta = _fill_leaves(rows, request, columns, resource_fit, allocatable, requested, mask, scores, tree)
    for k in range(rows.shape[0]):
        j = (scale + rows[k]) // 2
        while j >= 1:
            best = max(tree[2 * j], tree[2 * j + 1])
            if tree[j] == best:
                break  # this subtree's max did not change, so no ancestor's did
            tree[j] = best
            j //= 2
    return delta


@_kernel()
def refresh_tree(  # pragma: no cover - compiled
    rows: I64,
    shape: I64,
    params: I64,
    nonzero_requested: I64,
    request: I64,
    columns: I64,
    resource_fit: bool,
    allocatable: I64,
    requested: I64,
    mask: Bools,
    scores: I64,
    tree: I64,
) -> int:
    """Rescore the changed rows, then refresh their leaves and paths: one call per pod."""
    score_rows(rows, shape, params, allocatable, requested, nonzero_requested, scores)
    return update_tree(rows, request, columns, resource_fit, allocatable, requested, mask, scores, tree)
