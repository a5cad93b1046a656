import numpy as np
from hypothesis import given, settings

from pysched.api.builders import make_node, make_pod
from pysched.framework.cycle_state import CycleState
from pysched.framework.nodetable import NodeTable
from pysched.plugins.node_resources.fit import NodeResourcesFit
from pysched.plugins.node_resources.reference import fits, insufficient
from pysched.scheduler.kernel import select_node
from pysched.testing.strategies import Arrays, node_arrays, pod_request

NAMES = ("cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu")


def test_reasons_name_each_insufficient_resource_like_kube_scheduler() -> None:
    table = NodeTable()
    table.add(make_node("small", cpu="1", memory="1Gi"))
    table.add(make_node("full", cpu="8", memory="8Gi", pods=0))
    table.add(make_node("gpu", cpu="8", memory="8Gi", extended={"nvidia.com/gpu": "1"}))
    pod = make_pod("p", cpu="2", memory="2Gi", extended={"nvidia.com/gpu": "2"})
    result = NodeResourcesFit().filter_batch(CycleState(), pod, table)
    assert not result.feasible.any()
    assert list(result.reasons["Insufficient cpu"]) == [True, False, False]
    assert list(result.reasons["Insufficient memory"]) == [True, False, False]
    assert list(result.reasons["Too many pods"]) == [False, True, False]
    assert list(result.reasons["Insufficient nvidia.com/gpu"]) == [True, True, True]


def test_zero_requests_check_only_the_pod_count() -> None:
    alloc = np.array([[0, 0, 1, 0, 0]], np.int64)
    assert fits(np.zeros(5, np.int64), alloc, np.zeros_like(alloc), NAMES)[0]
    assert not fits(np.zeros(5, np.int64), alloc, np.array([[0, 0, 1, 0, 0]], np.int64), NAMES)[0]


@settings(max_examples=200, deadline=None)
@given(node_arrays(), pod_request())
def test_kernel_fit_matches_reference(nodes: Arrays, request: np.ndarray) -> None:
    n = len(nodes.mask)
    columns = np.array([c for c in np.flatnonzero(request) if c != 2], np.int64)
    out = np.empty(n, np.int64)
    scores = (np.arange(n, dtype=np.int64) * 7) % 5  # with ties
    candidates = np.flatnonzero(nodes.mask).astype(np.int64)
    best, feasible = select_node(
        request, columns, True, nodes.allocatable, nodes.requested, candidates, scores, out, True
    )
    expected = fits(request, nodes.allocatable, nodes.requested, NAMES) & nodes.mask
    np.testing.assert_array_equal(out >= 0, expected)
    np.testing.assert_array_equal(out[expected], scores[expected])
    assert feasible == int(expected.sum())
    if expected.any():
        top = scores[expected].max()
        assert best == int(np.flatnonzero(expected & (scores == top))[0])  # highest score, lowest row on ties
    else:
        assert best == -1
    reasons = insufficient(request, nodes.allocatable, nodes.requested, NAMES)
    assert all(not (rows & expected).any() for rows in reasons.values())
