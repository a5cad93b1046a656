import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import make_node, make_pod
from pysched.api.ids import NodeName
from pysched.scheduler.cache import Cache
from pysched.scheduler.selection import KernelWeights, ScoreCache, reference_scores


def _cpu(cache: Cache, node: str) -> int:
    return int(cache.nodes.requested[cache.nodes.row[NodeName(node)], 0])


def test_assume_confirm_forget() -> None:
    cache = Cache()
    cache.add_node(make_node("n"))
    pod = make_pod("p", cpu="2")
    cache.assume(pod, NodeName("n"))
    assert cache.is_assumed(pod.key) and _cpu(cache, "n") == 2000
    cache.add_pod(make_pod("p", cpu="2", node_name="n"))  # the informer confirms
    assert not cache.is_assumed(pod.key) and _cpu(cache, "n") == 2000
    other = make_pod("q", cpu="1")
    cache.assume(other, NodeName("n"))
    cache.forget(other)
    assert _cpu(cache, "n") == 2000 and cache.pod_node(other.key) is None
    cache.check_consistency()


def test_assumed_pods_never_expire_and_cannot_be_assumed_twice() -> None:
    cache = Cache()
    cache.add_node(make_node("n"))
    pod = make_pod("p", cpu="2")
    cache.assume(pod, NodeName("n"))
    with pytest.raises(ValueError, match="already in the cache"):
        cache.assume(pod, NodeName("n"))
    assert cache.is_assumed(pod.key)  # no timer anywhere: still there


def test_confirm_on_another_node_moves_the_charge() -> None:
    cache = Cache()
    cache.add_node(make_node("a"))
    cache.add_node(make_node("b"))
    cache.assume(make_pod("p", cpu="2"), NodeName("a"))
    cache.add_pod(make_pod("p", cpu="2", node_name="b"))
    assert _cpu(cache, "a") == 0 and _cpu(cache, "b") == 2000
    cache.check_consistency()


def test_terminated_and_deleted_pods_free_their_resources() -> None:
    cache = Cache()
    cache.add_node(make_node("n"))
    bound = make_pod("p", cpu="3", node_name="n")
    cache.add_pod(bound)
    cache.update_pod(bound.evolve(phase="Succeeded"))
    assert _cpu(cache, "n") == 0
    cache.add_pod(make_pod("q", cpu="1", node_name="n"))
    cache.remove_pod(make_pod("q", cpu="1", node_name="n"))
    assert _cpu(cache, "n") == 0 and len(cache) == 0


def test_pods_seen_before_their_node_are_counted_when_it_arrives() -> None:
    cache = Cache()
    cache.add_pod(make_pod("p", cpu="2", node_name="late"))
    cache.add_node(make_node("late"))
    assert _cpu(cache, "late") == 2000
    cache.remove_node(make_node("late"))
    cache.add_node(make_node("late"))  # node flapped: its bound pods still count
    assert _cpu(cache, "late") == 2000
    cache.check_consistency()


def test_a_pod_assumed_on_a_node_that_leaves_and_comes_back_counts_again() -> None:
    """A node deleted and re-created under its name (a kubelet re-registering) while a bind to it
    is in flight: the bind can still succeed, so the assumed pod counts again when the node is
    back, until its bind is confirmed or forgotten; before, its room was given away twice."""
    cache = Cache()
    cache.add_node(make_node("n", cpu="4"))
    a, b = make_pod("a", cpu="3"), make_pod("b", cpu="2")
    cache.assume(a, NodeName("n"))
    cache.assume(b, NodeName("n"))
    cache.remove_node(make_node("n", cpu="4"))
    cache.add_node(make_node("n", cpu="4"))
    assert cache.is_assumed(a.key) and cache.is_assumed(b.key) and _cpu(cache, "n") == 5000
    cache.forget(b)  # its bind failed
    cache.add_pod(make_pod("a", cpu="3", node_name="n"))  # a's bind is confirmed
    assert not cache.is_assumed(a.key) and _cpu(cache, "n") == 3000
    cache.check_consistency()
    # Forgotten, or confirmed, while the node is away: never counted twice, nor left behind.
    c, d = make_pod("c", cpu="1"), make_pod("d", cpu="1")
    cache.assume(c, NodeName("n"))
    cache.assume(d, NodeName("n"))
    cache.remove_node(make_node("n", cpu="4"))
    cache.forget(c)
    cache.add_pod(make_pod("d", cpu="1", node_name="n"))
    cache.add_node(make_node("n", cpu="4"))
    assert _cpu(cache, "n") == 3000 + 1000 and cache.pod_node(c.key) is None and not cache.is_assumed(d.key)
    cache.check_consistency()


def test_new_extended_resources_widen_the_arrays() -> None:
    cache = Cache()
    cache.add_node(make_node("n", extended={"example.com/fpga": "2"}))
    cache.add_pod(make_pod("p", cpu="1", extended={"example.com/fpga": "1", "vendor.io/nic": "1"}, node_name="n"))
    table = cache.nodes
    assert table.requested[0, table.column["example.com/fpga"]] == 1
    assert table.allocatable[0, table.column["vendor.io/nic"]] == 0
    cache.check_consistency()


def test_deleted_node_rows_are_reused_and_masked() -> None:
    cache = Cache()
    for name in ("a", "b"):
        cache.add_node(make_node(name))
    cache.remove_node(make_node("a"))
    assert not cache.nodes.present[0] and cache.nodes.count == 1
    cache.add_node(make_node("c"))
    assert cache.nodes.row[NodeName("c")] == 0 and cache.nodes.size == 2


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "remove", "node"]), st.integers(0, 5), st.sampled_from(["0", "100m", "1", "3"])
        ),
        max_size=60,
    )
)
def test_score_cache_stays_equal_to_a_full_rescore(ops: list[tuple[str, int, str]]) -> None:
    """The incremental score cache must never serve a stale score, whatever changed between pods."""
    cache = Cache()
    for i in range(6):
        cache.add_node(make_node(f"n{i}", cpu=str(4 + i), memory=f"{8 + i}Gi"))
    weights = KernelWeights(least_allocated=2, most_allocated=1, balanced_allocation=1)
    scores = ScoreCache(weights)
    shapes = [(100, 200 * 2**20, 0, 0), (1000, 2**30, 1000, 2**30)]
    placed: list[object] = []
    for step, (op, index, cpu) in enumerate(ops):
        node = NodeName(f"n{index % 6}")
        if op == "add":
            pod = make_pod(f"p{step}", cpu=cpu, node_name=node)
            cache.add_pod(pod)
            placed.append(pod)
        elif op == "remove" and placed:
            cache.remove_pod(placed.pop(index % len(placed)))  # type: ignore[arg-type]
        elif op == "node":
            cache.update_node(make_node(node, cpu=str(2 + index), memory="16Gi"))
        for shape in shapes:
            np.testing.assert_array_equal(
                scores.scores(shape, cache.nodes), reference_scores(weights, shape, cache.nodes)
            )


def test_heartbeat_updates_keep_cached_masks_and_resource_updates_touch_the_row() -> None:
    cache = Cache()
    cache.add_node(make_node("n", cpu="8", labels={"zone": "a"}))
    table = cache.nodes
    generation, seq = table.generation, table.change_seq
    cache.update_node(make_node("n", cpu="8", labels={"zone": "a"}))  # e.g. a status heartbeat
    assert (table.generation, table.change_seq) == (generation, seq)
    cache.update_node(make_node("n", cpu="16", labels={"zone": "a"}))  # allocatable grew
    assert table.generation == generation and table.change_seq == seq + 1
    assert table.allocatable[0, 0] == 16000 and table.capacity[0, 0] == 16000
    cache.update_node(make_node("n", cpu="16", labels={"zone": "b"}))  # labels: masks must go
    assert table.generation == generation + 1
