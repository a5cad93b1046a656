import asyncio

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.resources import nonzero_requests
from pysched.framework.registry import ArgsError
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.node_resources.balanced_allocation import BalancedAllocationArgs
from pysched.plugins.node_resources.reference import balanced_allocation
from pysched.scheduler.selection import KernelWeights, score_all
from pysched.testing.simulated import default_world
from pysched.testing.strategies import Arrays, node_arrays, pod_request


def test_score_is_how_much_the_pod_improves_the_balance() -> None:
    """kube-scheduler v1.36 scores the change in balance, not the balance after: 75 when the pod
    leaves it as it was, above when it evens the node out, below when it skews it."""
    alloc = np.array([[4000, 4 * 2**30, 110, 0, 0]] * 4, np.int64)
    requested = np.array(
        [[1000, 2**30, 0, 0, 0], [3000, 0, 0, 0, 0], [0, 2 * 2**30, 0, 0, 0], [0, 0, 0, 0, 0]], np.int64
    )
    scores = balanced_allocation(2000, 0, alloc, requested)
    # 25%/25% -> 75%/25%: 100 -> 75; 75%/0 -> 100%/0: 62 -> 50; 0/50% -> 50%/50%: 75 -> 100; 0/0 -> 50%/0: 100 -> 75
    assert scores.tolist() == [50 + (50 + 75 - 100) // 2, 50 + (50 + 50 - 62) // 2, 50 + (50 + 100 - 75) // 2, 62]
    assert balanced_allocation(1000, 2**30, alloc, requested)[0] == 75  # 50%/50% from 25%/25%: no change


def test_default_profile_follows_the_improvement_not_the_balance_after() -> None:
    """Two 8-CPU / 8Gi nodes, a holding 1 CPU / 2Gi and b 2 CPU / 2Gi; a pod of 1 CPU / 1Gi leaves
    both balances as they were (75 each) and goes to the emptier a, as kube-scheduler v1.36 places
    it. Scored on the balance after the pod alone, b (perfectly even afterwards) won 162 to 161."""

    async def run() -> str | None:
        _, cluster, scheduler = default_world(*(node_dict(name, cpu="8", memory="8Gi") for name in ("a", "b")))
        cluster.create_pod(pod_dict("on-a", cpu="1", memory="2Gi", node_name="a", scheduler_name="default"))
        cluster.create_pod(pod_dict("on-b", cpu="2", memory="2Gi", node_name="b", scheduler_name="default"))
        await scheduler.start()
        cluster.create_pod(pod_dict("new", cpu="1", memory="1Gi", scheduler_name="default"))
        await scheduler.run_until_idle()
        return cluster.pods[PodKey("default/new")].node_name

    assert asyncio.run(run()) == "a"


def test_pod_without_requests_is_skipped() -> None:
    alloc = np.array([[4000, 4 * 2**30, 110, 0, 0]], np.int64)
    assert balanced_allocation(0, 0, alloc, np.zeros_like(alloc))[0] == 0


@settings(max_examples=150, deadline=None)
@given(node_arrays(), pod_request(), st.booleans())
def test_kernel_matches_reference(nodes: Arrays, request: np.ndarray, after: bool) -> None:
    nz_cpu, nz_mem = nonzero_requests({"cpu": int(request[0]), "memory": int(request[1])})
    out = np.empty(len(nodes.mask), np.int64)
    shape = np.array([nz_cpu, nz_mem, request[0], request[1]], np.int64)
    score_all(
        shape,
        KernelWeights(balanced_allocation=1, balance_after=after).params(),
        nodes.allocatable,
        nodes.requested,
        nodes.nonzero_requested,
        out,
    )
    expected = balanced_allocation(int(request[0]), int(request[1]), nodes.allocatable, nodes.requested, after)
    np.testing.assert_array_equal(out, expected)


def test_balance_after_is_the_score_before_kube_v1_36() -> None:
    """`scoreBy: balanceAfter` scores the balance once the pod is placed, as kube-scheduler did up
    to v1.35 (the pysched profile keeps it beside UrgencyPlacement)."""
    alloc = np.array([[4000, 4 * 2**30, 110, 0, 0]] * 2, np.int64)
    requested = np.array([[1000, 2**30, 0, 0, 0], [3000, 0, 0, 0, 0]], np.int64)
    scores = balanced_allocation(1000, 2**30, alloc, requested, after=True)
    assert scores.tolist() == [100, int((1 - abs(1.0 - 0.25) / 2) * 100)]  # 50%/50%; 100%/25% -> 62
    config = builtin_config(default_registry())
    args = {p.scheduler_name: p.plugin_args.get("BalancedAllocation") for p in config.profiles}
    assert args.pop("pysched") == {"scoreBy": "balanceAfter"} and not any(args.values())


def test_score_by_is_validated() -> None:
    with pytest.raises(ArgsError, match="scoreBy: must be one of improvement, balanceAfter, got 'after'"):
        BalancedAllocationArgs(score_by="after").validate()
