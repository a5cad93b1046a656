"""The simulator's metrics on small cases computed by hand (no step noise, so times are exact)."""

import asyncio
import dataclasses
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pysched.api.annotations import ProgressReport, ProgressStamp, progress_of
from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import PluginRef, SchedulerConfig
from pysched.framework.cycle_state import CycleState
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SUCCESS, Code, Status
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.sim.runner import EPOCH, PolicyResult, run_policy
from pysched.sim.scenario import Scenario, cpu_nodes, parse_cluster
from pysched.workload.job import Job
from pysched.workload.segment import start_run
from pysched.workload.speed import Amdahl

REGISTRY = default_registry()
CONFIG = builtin_config(REGISTRY)


def _run(scenario: Scenario, policy: str) -> PolicyResult:
    return asyncio.run(run_policy(scenario, CONFIG, policy, REGISTRY, step_noise=0.0))


def _two_jobs() -> Scenario:
    # A: 1 s per step whatever its 2 CPUs (p_max 1), 1000 steps, deadline 1100.
    # B: 3 CPUs, 1 s per step (b = 3, p_max 3), 500 steps, deadline 600. Only one fits at a time.
    a = Job("a", 0.0, 1000, 2000, "1Gi", Amdahl(0.0, 1.0, 1), deadline=1100.0)
    b = Job("b", 0.0, 500, 3000, "1Gi", Amdahl(0.0, 3.0, 3), deadline=600.0)
    return Scenario("two", cpu_nodes(1, "4", "8Gi"), (a, b))


def test_fifo_metrics_by_hand() -> None:
    r = _run(_two_jobs(), "default")  # FIFO: a (queued first) runs 0-1000, b 1000-1500
    assert (r.jobs, r.deadline_jobs, r.deadline_met, r.deadline_met_ratio) == (2, 2, 1, 0.5)
    assert r.mean_jct_s == pytest.approx((1000 + 1500) / 2)
    assert r.mean_queue_s == pytest.approx((0 + 1000) / 2)
    assert r.makespan_s == pytest.approx(1500)
    # used: a 1000 steps x 1 CPU-s, b 500 x 3; allocated: 2 x 1000 + 3 x 500
    assert r.cpu_utilization == pytest.approx(2500 / 3500, abs=1e-4)
    assert (r.rescales, r.skipped, r.unfinished) == (0, 0, 0)


def test_edf_runs_the_earlier_deadline_first() -> None:
    r = _run(_two_jobs(), "edf")  # b 0-500 (met), a 500-1500 (missed)
    assert r.deadline_met == 1
    assert r.mean_queue_s == pytest.approx(250)
    assert r.mean_jct_s == pytest.approx((500 + 1500) / 2)


def test_seed_restarts_a_late_job_with_linear_speed_up() -> None:
    # 1000 steps of 1 s on 1 CPU, deadline 600 on a 16-CPU node. At t=300 (300 steps, progress
    # written every 60 s) T = 300/300 x 1000 x 1.2 = 1200 > 600: restart with ceil(1 x 1200 / 300)
    # = 4 CPUs, 30 s restart, then 1000 steps of 0.25 s: finishes at 580.
    job = Job("late", 0.0, 1000, 1000, "1Gi", Amdahl(0.0, 1.0, 16), deadline=600.0)
    r = _run(Scenario("seed", cpu_nodes(1, "16", "32Gi"), (job,)), "seed")
    assert (r.deadline_met, r.rescales) == (1, 1)
    assert r.mean_jct_s == pytest.approx(580)
    # allocated 1 x 300 + 4 x (30 + 250); used 300 lost steps + 1000 steps of 1 CPU-s
    assert r.cpu_utilization == pytest.approx(1300 / 1420, abs=1e-4)
    # the same job under edf misses its deadline without a rescale
    plain = _run(Scenario("edf", cpu_nodes(1, "16", "32Gi"), (job,)), "edf")
    assert (plain.deadline_met, plain.rescales) == (0, 0) and plain.mean_jct_s == pytest.approx(1000)


def test_seed_leaves_jobs_on_time_and_without_deadline_alone() -> None:
    fine = Job("fine", 0.0, 1000, 1000, "1Gi", Amdahl(0.0, 1.0, 16), deadline=2000.0)
    free = Job("free", 0.0, 1000, 1000, "1Gi", Amdahl(0.0, 1.0, 16))
    r = _run(Scenario("seed", cpu_nodes(1, "16", "32Gi"), (fine, free)), "seed")
    assert (r.rescales, r.deadline_jobs, r.deadline_met) == (0, 1, 1)


def test_progress_is_published_only_when_a_reconcile_reads_it() -> None:
    async def run() -> None:
        clock = VirtualClock(0.0)
        cluster = SimulatedCluster(clock)
        cluster.add_node(node_dict("n"))
        cluster.create_pod(pod_dict("p"))
        updated = cluster.set_annotations(PodKey("default/p"), {"pysched.io/progress": "5@1970-01-01T00:01:00Z"})
        assert progress_of(updated) == (5, 60.0)
        assert updated.raw["metadata"]["annotations"]["pysched.io/progress"] == "5@1970-01-01T00:01:00Z"

    asyncio.run(run())


def test_simulated_training_progress_is_kept_beside_its_pod_and_not_inherited() -> None:
    clock = VirtualClock(0.0)
    cluster = SimulatedCluster(clock)
    key = PodKey("default/p")
    cluster.create_pod(pod_dict("p"))
    before = cluster.pods[key]
    cluster.write_progress(key, ProgressReport.written(7, 60.5))
    assert cluster.pods[key] is before  # no pod update: nothing to deliver through the informer path
    written = cluster.progress(before)
    assert written is not None and written.stamp == ProgressStamp(7, 60.0)
    assert written.text == "7@1970-01-01T00:01:00Z"
    cluster.set_annotations(key, {"pysched.io/progress": "9@1970-01-01T00:02:00Z"})  # a client's write wins
    patched = cluster.progress(cluster.pods[key])
    assert patched is not None and patched.stamp == ProgressStamp(9, 120.0)
    cluster.write_progress(key, ProgressReport.written(11, 180.0))
    cluster.delete_pod(key)
    raw = pod_dict("p")
    raw["metadata"]["uid"] = "another"
    cluster.create_pod(raw)  # recreated under its name: it has written nothing yet
    assert cluster.progress(cluster.pods[key]) is None


def test_cluster_spec_forms(tmp_path: Path) -> None:
    nodes = parse_cluster("nodes=3,cpu=16,memory=64Gi,gpu=4")
    assert len(nodes) == 3 and nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    groups = tmp_path / "cluster.yaml"
    groups.write_text("groups:\n  - {count: 2, cpu: 16}\n  - {count: 1, cpu: 64, memory: 512Gi, gpu: 8}\n")
    nodes = parse_cluster(str(groups))
    assert [n["metadata"]["name"] for n in nodes] == ["g0-node-0", "g0-node-1", "g1-node-0"]
    assert nodes[2]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    for bad in ("nodes=0", "cpu=abc", "nodes=2,colour=red", "garbage"):
        with pytest.raises(ValueError, match="accepted"):
            parse_cluster(bad)


def test_progress_writes_happen_only_for_reconcile_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[ProgressReport] = []
    original = SimulatedCluster.write_progress

    def counting(self: SimulatedCluster, key: PodKey, report: ProgressReport) -> None:
        writes.append(report)
        original(self, key, report)

    monkeypatch.setattr(SimulatedCluster, "write_progress", counting)
    job = Job("j", 0.0, 1000, 1000, "1Gi", Amdahl(0.0, 1.0, 16), deadline=5000.0)
    _run(Scenario("one", cpu_nodes(1, "16", "32Gi"), (job,)), "edf")
    assert writes == []  # nobody reads progress: no write at all
    _run(Scenario("one", cpu_nodes(1, "16", "32Gi"), (job,)), "seed")
    # one write per reconcile tick (60 s) while the 1000 s job runs, as the helper would write
    assert len(writes) == 16 and writes[0].text == "60@2026-01-01T00:01:00Z"


@given(
    st.floats(0.0, 1.0),
    st.floats(0.01, 5.0),
    st.integers(1, 64),
    st.integers(1, 100_000),
    st.integers(1, 64),
    st.integers(0, 1000),
)
def test_a_segment_finishes_exactly_when_its_steps_are_done(
    a: float, b: float, p_max: int, steps: int, cpu: int, seed: int
) -> None:
    job = Job("j", 0.0, steps, cpu * 1000, "1Gi", Amdahl(a, b, p_max))
    run = start_run(job, float(cpu), 100.0, random.Random(seed))
    end = run.finish_time()
    assert run.steps_at(end + 1e-6 * end) == steps
    assert run.steps_at(100.0) == 0
    assert 0.5 * steps * job.truth.step_seconds(cpu, 0) <= end - 100.0 <= 1.5 * steps * job.truth.step_seconds(cpu, 0)
    times = sorted(random.Random(seed).uniform(100.0, end) for _ in range(5))
    done = [run.steps_at(t) for t in times]
    assert done == sorted(done) and all(0 <= d <= steps for d in done)
    # On the simulator's epoch clock too, a segment's own end counts every step.
    late = start_run(job, float(cpu), EPOCH, random.Random(seed))
    assert late.steps_at(late.finish_time()) == steps


def test_cpu_use_never_exceeds_what_was_held() -> None:
    """A step's noise may make it shorter than its a + b CPU-seconds on one CPU: what a job used is
    still at most what it held, and its last step counts."""
    job = Job("j", 0.0, 1, 1000, "1Gi", Amdahl(0.012, 0.588, 16))
    ratios = [
        asyncio.run(run_policy(Scenario("one", cpu_nodes(1, "4", "8Gi"), (job,)), CONFIG, "default", REGISTRY, seed=s))
        for s in range(1, 7)
    ]
    assert all(0.9 < r.cpu_utilization <= 1.0 for r in ratios), [r.cpu_utilization for r in ratios]


@dataclass
class SecondTry:
    """Permit: the first attempt of every pod waits 90 s (and times out), later ones pass."""

    NAME: ClassVar[str] = "SecondTry"
    seen: set[str] = field(default_factory=set)

    def permit(self, state: CycleState, pod: PodInfo, node: NodeName) -> tuple[Status, float]:
        if pod.name in self.seen:
            return SUCCESS, 0.0
        self.seen.add(pod.name)
        return Status(Code.WAIT), 90.0


def test_a_permit_wait_runs_out_in_virtual_time_after_the_last_event() -> None:
    """The only job arrives, waits at Permit with nothing else to happen: the simulator moves its
    clock to the wait's end, the pod is retried after its backoff, passes and finishes."""
    plugin = SecondTry()
    registry = default_registry()
    registry.register(PluginSpec("SecondTry", NoArgs, lambda args, handle: plugin, SecondTry))
    (base,) = builtin_config(registry).only("default").profiles
    plugins = {**base.plugins, "permit": (PluginRef("SecondTry"),)}
    config = SchedulerConfig((dataclasses.replace(base, plugins=plugins),))
    job = Job("a", 0.0, 100, 1000, "1Gi", Amdahl(0.0, 1.0, 1))
    scenario = Scenario("held", cpu_nodes(1, "4", "8Gi"), (job,))
    result = asyncio.run(run_policy(scenario, config, "default", registry, step_noise=0.0))
    assert (result.jobs, result.unfinished) == (1, 0)
    assert result.mean_queue_s == pytest.approx(90 + 1)  # the wait, then the first backoff (1 s)
    assert result.makespan_s == pytest.approx(90 + 1 + 100)
