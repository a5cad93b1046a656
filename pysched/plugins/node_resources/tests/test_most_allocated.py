import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.resources import nonzero_requests
from pysched.plugins.node_resources.reference import most_allocated
from pysched.scheduler.selection import KernelWeights, score_all
from pysched.testing.strategies import Arrays, node_arrays, pod_request


def test_fuller_nodes_score_higher_and_cap_at_100() -> None:
    alloc = np.array([[4000, 8 * 2**30, 110, 0, 0]] * 3, np.int64)
    nonzero = np.array([[1000, 2**30], [3000, 6 * 2**30], [9000, 16 * 2**30]], np.int64)
    scores = most_allocated(1000, 2**30, alloc, nonzero)
    assert scores[1] > scores[0]
    assert scores[2] == 100  # requested beyond capacity is clamped to capacity


@settings(max_examples=150, deadline=None)
@given(node_arrays(), pod_request(), st.integers(0, 5), st.integers(1, 5))
def test_kernel_matches_reference(nodes: Arrays, request: np.ndarray, cpu_w: int, mem_w: int) -> None:
    nz_cpu, nz_mem = nonzero_requests({"cpu": int(request[0]), "memory": int(request[1])})
    weights = KernelWeights(most_allocated=1, cpu_weight=cpu_w, memory_weight=mem_w)
    out = np.empty(len(nodes.mask), np.int64)
    shape = np.array([nz_cpu, nz_mem, request[0], request[1]], np.int64)
    score_all(shape, weights.params(), nodes.allocatable, nodes.requested, nodes.nonzero_requested, out)
    expected = most_allocated(nz_cpu, nz_mem, nodes.allocatable, nodes.nonzero_requested, cpu_w, mem_w)
    np.testing.assert_array_equal(out, expected)
