import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.resources import nonzero_requests
from pysched.plugins.node_resources.reference import least_allocated
from pysched.scheduler.selection import KernelWeights, score_all
from pysched.testing.strategies import Arrays, node_arrays, pod_request


def test_matches_kube_scheduler_arithmetic() -> None:
    # 32 cores, 8 used + 2 requested: cpu (32000-10000)*100//32000 = 68; memory (128-64-0.2Gi) ~ 49; mean 58
    alloc = np.array([[32000, 128 * 2**30, 110, 0, 0]], np.int64)
    nonzero = np.array([[8000, 64 * 2**30]], np.int64)
    cpu, memory = nonzero_requests({"cpu": 2000})  # memory falls back to 200Mi
    assert least_allocated(cpu, memory, alloc, nonzero)[0] == (68 + 49) // 2


def test_overcommitted_and_missing_resources() -> None:
    alloc = np.array([[1000, 0, 110, 0, 0], [0, 0, 110, 0, 0]], np.int64)
    nonzero = np.array([[900, 0], [0, 0]], np.int64)
    scores = least_allocated(200, 100, alloc, nonzero)
    assert scores[0] == 0  # cpu would be overcommitted; memory absent is left out
    assert scores[1] == 0  # no resource at all


@settings(max_examples=150, deadline=None)
@given(node_arrays(), pod_request(), st.integers(0, 5), st.integers(0, 5))
def test_kernel_matches_reference(nodes: Arrays, request: np.ndarray, cpu_w: int, mem_w: int) -> None:
    if cpu_w == 0 and mem_w == 0:
        cpu_w = 1
    nz_cpu, nz_mem = nonzero_requests({"cpu": int(request[0]), "memory": int(request[1])})
    weights = KernelWeights(least_allocated=1, cpu_weight=cpu_w, memory_weight=mem_w)
    out = np.empty(len(nodes.mask), np.int64)
    shape = np.array([nz_cpu, nz_mem, request[0], request[1]], np.int64)
    score_all(shape, weights.params(), nodes.allocatable, nodes.requested, nodes.nonzero_requested, out)
    expected = least_allocated(nz_cpu, nz_mem, nodes.allocatable, nodes.nonzero_requested, cpu_w, mem_w)
    np.testing.assert_array_equal(out, expected)
