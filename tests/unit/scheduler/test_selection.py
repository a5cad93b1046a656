"""The incremental selection must answer exactly what a full scan of every node answers."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import make_node, make_pod
from pysched.api.ids import NodeName
from pysched.api.resources import nonzero_requests
from pysched.scheduler.cache import Cache
from pysched.scheduler.kernel import select_node
from pysched.scheduler.selection import KernelWeights, ScoreCache, SelectionCache, reference_scores

WEIGHTS = KernelWeights(least_allocated=1, balanced_allocation=2)
REQUESTS = [{"cpu": 500, "memory": 2**30}, {"cpu": 2000}, {"cpu": 1000, "nvidia.com/gpu": 1}, {}]


def _shape(request: dict[str, int]) -> tuple[int, int, int, int]:
    nz_cpu, nz_mem = nonzero_requests(request)
    return (nz_cpu, nz_mem, request.get("cpu", 0), request.get("memory", 0))


def _full_scan(cache: Cache, request: dict[str, int], mask: np.ndarray) -> tuple[int, int]:
    table = cache.nodes
    vector = table.vector(request)
    scores = reference_scores(WEIGHTS, _shape(request), table)
    size = table.size
    out = np.empty(size, np.int64)
    candidates = np.flatnonzero(mask).astype(np.int64)
    columns = table.request_shape(request).columns
    best, count = select_node(
        vector, columns, True, table.allocatable[:size], table.requested[:size], candidates, scores, out, True
    )
    return int(best), int(count)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(["place", "finish", "node", "probe"]), st.integers(0, 11)),
        max_size=80,
    ),
    st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_trees_match_a_full_scan(ops: list[tuple[int, str, int]], mask_bits: list[bool]) -> None:
    cache = Cache()
    for i in range(12):
        cache.add_node(
            make_node(f"n{i}", cpu=str(2 + i % 5), memory=f"{4 + i}Gi", pods=4, extended={"nvidia.com/gpu": str(i % 3)})
        )
    selection = SelectionCache(ScoreCache(WEIGHTS), min_rows=0)
    mask = np.array(mask_bits, np.bool_)
    placed: list[object] = []
    for step, (which, op, index) in enumerate(ops):
        request = REQUESTS[which]
        table = cache.nodes
        if op == "place":
            cpu = f"{request.get('cpu', 0)}m"
            gpu = {"nvidia.com/gpu": "1"} if "nvidia.com/gpu" in request else None
            pod = make_pod(f"p{step}", cpu=cpu, memory=None, extended=gpu, node_name=f"n{index}")
            cache.add_pod(pod)
            placed.append(pod)
        elif op == "finish" and placed:
            cache.remove_pod(placed.pop(index % len(placed)))  # type: ignore[arg-type]
        elif op == "node":
            cache.update_node(
                make_node(f"n{index}", cpu=str(1 + index), memory="8Gi", pods=4, extended={"nvidia.com/gpu": "2"})
            )
        vector = table.vector(request)
        candidates = np.flatnonzero(mask).astype(np.int64)
        got = selection.select(
            ("sig", which),
            table,
            mask,
            candidates,
            vector,
            table.request_shape(request).columns,
            True,
            _shape(request),
        )
        assert got == _full_scan(cache, request, mask), (step, op)


def test_a_hot_key_is_served_by_a_tree() -> None:
    cache = Cache()
    for i in range(200):
        cache.add_node(make_node(f"n{i}", cpu="8", memory="16Gi"))
    selection = SelectionCache(ScoreCache(WEIGHTS))
    table = cache.nodes
    request = {"cpu": 1000, "memory": 2**30}
    mask = np.ones(table.size, np.bool_)
    candidates = np.arange(table.size, dtype=np.int64)
    for step in range(5):
        best, _ = selection.select(
            "k",
            table,
            mask,
            candidates,
            table.vector(request),
            table.request_shape(request).columns,
            True,
            (1000, 2**30, 1000, 2**30),
        )
        assert (best, _) == _full_scan(cache, request, mask)
        cache.add_pod(make_pod(f"p{step}", cpu="1", memory="1Gi", node_name=NodeName(f"n{best}")))
    assert selection.trees == 1  # the one key, used repeatedly with few changes in between
