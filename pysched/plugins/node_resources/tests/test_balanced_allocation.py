import numpy as np
from hypothesis import given, settings

from pysched.api.resources import nonzero_requests
from pysched.plugins.node_resources.reference import balanced_allocation
from pysched.scheduler.selection import KernelWeights, score_all
from pysched.testing.strategies import Arrays, node_arrays, pod_request


def test_balanced_node_scores_100_and_skewed_lower() -> None:
    alloc = np.array([[4000, 4 * 2**30, 110, 0, 0]] * 2, np.int64)
    requested = np.array([[1000, 2**30, 0, 0, 0], [3000, 0, 0, 0, 0]], np.int64)
    scores = balanced_allocation(1000, 2**30, alloc, requested)
    assert scores[0] == 100  # 50% cpu, 50% memory
    assert scores[1] == int((1 - abs(1.0 - 0.25) / 2) * 100)  # 100% cpu, 25% memory -> 62


def test_pod_without_requests_is_skipped() -> None:
    alloc = np.array([[4000, 4 * 2**30, 110, 0, 0]], np.int64)
    assert balanced_allocation(0, 0, alloc, np.zeros_like(alloc))[0] == 0


@settings(max_examples=150, deadline=None)
@given(node_arrays(), pod_request())
def test_kernel_matches_reference(nodes: Arrays, request: np.ndarray) -> None:
    nz_cpu, nz_mem = nonzero_requests({"cpu": int(request[0]), "memory": int(request[1])})
    out = np.empty(len(nodes.mask), np.int64)
    shape = np.array([nz_cpu, nz_mem, request[0], request[1]], np.int64)
    score_all(
        shape,
        KernelWeights(balanced_allocation=1).params(),
        nodes.allocatable,
        nodes.requested,
        nodes.nonzero_requested,
        out,
    )
    expected = balanced_allocation(int(request[0]), int(request[1]), nodes.allocatable, nodes.requested)
    np.testing.assert_array_equal(out, expected)
