"""The founding paper's claims, reproduced and beaten with `pysched simulate`.

Built-in scenarios at seed 7, exactly what `pysched simulate --scenario NAME` runs (step noise
included). Each scenario runs once per module; the assertions are the claims, not the measured
numbers (README shows those).
"""

import asyncio
from functools import cache

import pytest

from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.sim.runner import PolicyResult, run_policy
from pysched.sim.scenario import builtin_scenario

REGISTRY = default_registry()
CONFIG = builtin_config(REGISTRY)


@cache
def _result(scenario: str, policy: str) -> PolicyResult:
    return asyncio.run(run_policy(builtin_scenario(7, scenario), CONFIG, policy, REGISTRY, seed=7))


def test_seed_insufficient_ordering_beats_the_default_by_26_percent() -> None:
    default = _result("seed-insufficient", "default").deadline_met_ratio
    noscale = _result("seed-insufficient", "pysched-noscale").deadline_met_ratio
    assert default >= 0.2  # a baseline that meets nothing proves nothing
    assert noscale >= 1.26 * default


def test_seed_insufficient_pysched_beats_seed_and_edf() -> None:
    pysched = _result("seed-insufficient", "pysched").deadline_met_ratio
    assert pysched > _result("seed-insufficient", "seed").deadline_met_ratio
    assert pysched > _result("seed-insufficient", "edf").deadline_met_ratio


def test_seed_sufficient_autoscaling_meets_every_deadline_and_keeps_cpus_busy() -> None:
    pysched = _result("seed-sufficient", "pysched")
    assert pysched.deadline_met_ratio == 1.0
    assert pysched.cpu_utilization >= 0.90
    # Only meaningful if jobs left at their requested CPUs miss deadlines.
    assert _result("seed-sufficient", "pysched-noscale").deadline_met_ratio < 0.8


def test_seed_sufficient_pysched_beats_seed_and_edf() -> None:
    pysched, seed = _result("seed-sufficient", "pysched"), _result("seed-sufficient", "seed")
    assert pysched.deadline_met_ratio > _result("seed-sufficient", "edf").deadline_met_ratio
    # Both meet every deadline here: pysched does it with fewer wasted CPUs.
    assert pysched.deadline_met_ratio >= seed.deadline_met_ratio
    assert pysched.cpu_utilization > seed.cpu_utilization


def test_gpu_mixed_pysched_beats_edf_and_default() -> None:
    pysched = _result("gpu-mixed", "pysched").deadline_met_ratio
    assert pysched > _result("gpu-mixed", "edf").deadline_met_ratio
    assert pysched > _result("gpu-mixed", "default").deadline_met_ratio


def test_seed_ps_every_gang_finishes_and_the_baseline_meets_deadlines() -> None:
    for policy in ("default", "edf", "seed", "pysched-noscale", "pysched"):
        assert _result("seed-ps", policy).unfinished == 0
    assert _result("seed-ps", "default").deadline_met_ratio >= 0.2


def test_seed_ps_pysched_beats_seed_edf_and_default() -> None:
    """Parameter-server gangs placed all-or-nothing, ordered, and autoscaled as one job each."""
    pysched = _result("seed-ps", "pysched").deadline_met_ratio
    for baseline in ("default", "edf", "seed"):
        assert pysched > _result("seed-ps", baseline).deadline_met_ratio


@pytest.mark.xfail(
    strict=True,
    reason="laxity order alone meets 31 against default's 42 on seed-ps: with no prior step time it is EDF, "
    "which under overload starts the jobs nearest their deadline and then misses them; needs admission control",
)
def test_seed_ps_ordering_meets_more_deadlines_than_default() -> None:
    assert _result("seed-ps", "pysched-noscale").deadline_met_ratio > _result("seed-ps", "default").deadline_met_ratio
