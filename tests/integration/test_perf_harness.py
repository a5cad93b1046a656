"""The throughput harness on a tiny live workload, so that it cannot rot: each scheduler kind
(pysched, the stock kube-scheduler, the raw binder) binds every pod of a fresh dev cluster once,
with no node overcommitted, and the round reports its rates and the processes' CPU; a rate
arrival measures creation to bind."""

from __future__ import annotations

from pathlib import Path

import pytest

from perf.harness.live import SCHEDULERS, run_round
from perf.harness.workload import parse_workload

pytestmark = pytest.mark.integration

TINY = {
    "name": "tiny",
    "nodes": {"count": 4, "cpu": "2", "memory": "8Gi", "pods": 10},
    "pods": [{"count": 30, "cpu": "200m"}],
}


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_each_scheduler_kind_binds_a_tiny_batch_correctly(
    scheduler: str, control_plane_bin_dir: str, tmp_path: Path
) -> None:
    result = run_round(parse_workload(TINY), scheduler, tmp_path / "plane", bin_dir=Path(control_plane_bin_dir))
    assert result.correct, result.problems
    assert result.bound == 30 and result.pods_per_second > 0 and result.pods_per_second_from_start > 0
    assert result.cpu_s > 0 and result.peak_rss_mb > 0 and result.apiserver_cpu_s > 0
    assert result.p50_ms is None  # batch: no creation-to-bind
    # every bind announced within the grace period (the binder posts none)
    assert result.scheduled_events == (0 if scheduler == "raw-bind" else 30)


def test_a_rate_arrival_measures_creation_to_bind(control_plane_bin_dir: str, tmp_path: Path) -> None:
    # 4 nodes x 2 CPUs hold 40 pods of 200m: 30 fit; the pods cap (10 a node) holds 40 too.
    workload = parse_workload({**TINY, "arrival": {"rate": 30}})
    result = run_round(workload, "raw-bind", tmp_path / "plane", bin_dir=Path(control_plane_bin_dir))
    assert result.correct, result.problems
    assert result.p50_ms is not None and result.p99_ms is not None and 0 < result.p50_ms <= result.p99_ms


SHAPED = {
    "name": "shaped",
    "nodes": {"count": 6, "cpu": "4", "memory": "16Gi", "pods": 20, "zones": 3},
    "profile": "pysched",
    "pods": [
        {"count": 6, "antiAffinity": 6},
        {"count": 6, "spread": 6},
        {"count": 8, "gang": 4},
        {"count": 2, "deadline": "1h", "totalSteps": 100},
    ],
}


@pytest.mark.parametrize("scheduler", ["pysched", "kube-scheduler"])
def test_shaped_pods_are_placed_within_their_constraints(
    scheduler: str, control_plane_bin_dir: str, tmp_path: Path
) -> None:
    # Spread pods are refused by nodes without the zone label (DoNotSchedule), and six replicas
    # that keep apart need all six nodes: a correct round means zoned nodes and kept constraints.
    result = run_round(parse_workload(SHAPED), scheduler, tmp_path / "plane", bin_dir=Path(control_plane_bin_dir))
    assert result.correct, result.problems
    assert result.bound == 22


@pytest.mark.parametrize("scheduler", ["pysched", "raw-bind"])
def test_churn_makes_and_deletes_nodes_and_pods_while_the_pods_are_scheduled(
    scheduler: str, control_plane_bin_dir: str, tmp_path: Path
) -> None:
    # Pods at 10 a second for 3 s, churn every 0.5 s: several cycles land while they arrive.
    workload = parse_workload({**TINY, "arrival": {"rate": 10}, "churn": {"interval": 0.5, "nodes": 1, "pods": 3}})
    result = run_round(workload, scheduler, tmp_path / "plane", bin_dir=Path(control_plane_bin_dir))
    assert result.correct, result.problems
    assert result.bound == 30 and result.churn_cycles >= 3


@pytest.mark.parametrize("scheduler", ["pysched", "kube-scheduler"])
def test_with_kwok_the_nodes_stay_ready_and_every_bound_pod_runs(
    scheduler: str, control_plane_bin_dir: str, kwok_bin_dir: Path, tmp_path: Path
) -> None:
    workload = parse_workload(TINY)
    plane = tmp_path / "plane"
    result = run_round(
        workload, scheduler, plane, bin_dir=Path(control_plane_bin_dir), kwok=True, kwok_bin_dir=kwok_bin_dir
    )
    assert result.correct, result.problems
    assert result.bound == result.running == 30
