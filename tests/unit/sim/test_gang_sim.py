"""Multi-pod jobs on the simulated cluster: progress only while every member runs."""

import asyncio
import csv
import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from pysched.api.ids import PodKey
from pysched.backend.simulated import SimulatedCluster
from pysched.cmd.cli import main
from pysched.framework.clock import VirtualClock
from pysched.framework.config import SchedulerConfig
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler
from pysched.sim.runner import EPOCH, PolicyResult, Replay, run_policy, split_fitting
from pysched.sim.scenario import Scenario, builtin_scenario, cpu_nodes, gpu_pool, parse_cluster
from pysched.workload.accounting import Accounting
from pysched.workload.catalogue import builtin_catalogue
from pysched.workload.gang import PS, WORKER, Gang, Held, ParameterServer, ps_members
from pysched.workload.gang_run import GangRun
from pysched.workload.job import Job
from pysched.workload.segment import RESTART_SECONDS
from pysched.workload.speed import Amdahl, Throughput
from pysched.workload.traces import read_csv

REGISTRY = default_registry()
CONFIG = builtin_config(REGISTRY)
WORKER_TRUTH = Amdahl(0.0, 1.0, 16)  # t(c) = 1 / c


def _ps_job(name: str, steps: int, workers: int = 2, deadline: float | None = None, restart: bool = False) -> Job:
    members = ps_members(name, workers, 2000, "1Gi")
    gang = Gang(members, ParameterServer(0.0))
    cpu = sum(m.cpu_milli for m in members)
    return Job(name, 0.0, steps, cpu, "1Gi", WORKER_TRUTH, deadline=deadline, restart_on_resize=restart, gang=gang)


def _run(scenario: Scenario, policy: str = "default") -> PolicyResult:
    return asyncio.run(run_policy(scenario, CONFIG, policy, REGISTRY, step_noise=0.0))


def test_a_full_gang_runs_at_its_global_rate_and_ends_together() -> None:
    # 2 workers on 2 CPUs, s = 0: 2 / 0.5 = 4 global steps/s; 1000 steps take 250 s.
    r = _run(Scenario("ps", cpu_nodes(1, "8", "16Gi"), (_ps_job("j", 1000, deadline=300.0),)))
    assert (r.jobs, r.deadline_met, r.unfinished) == (1, 1, 0)
    assert r.mean_jct_s == pytest.approx(250, abs=0.5) and r.mean_queue_s == 0.0
    # used: 1000 steps x 1 CPU-s + the server's 1 CPU x 250 s; allocated: 5 CPUs x 250 s
    assert r.cpu_utilization == pytest.approx(1250 / 1250, abs=1e-3)


def test_a_partially_placed_gang_holds_its_members_and_makes_no_progress() -> None:
    # A long job holds 3 of the node's 7 CPUs: of the gang's 5 CPUs of members the two workers
    # bind (4), the server never fits while the long job runs.
    hog = Job("hog", 0.0, 10**6, 3000, "1Gi", WORKER_TRUTH)
    gang = dataclasses.replace(_ps_job("j", 100, deadline=1000.0), submit=10.0)
    scenario = Scenario("ps", cpu_nodes(1, "7", "16Gi"), (hog, gang))
    r = asyncio.run(run_policy(scenario, CONFIG, "default", REGISTRY, step_noise=0.0, horizon=2000.0))
    assert (r.deadline_met, r.unfinished, r.skipped) == (0, 2, 0)
    outcome = next(o for o in r.outcomes if o.job == "j")
    assert (outcome.started, outcome.finished, outcome.cpu_segments) == (None, None, ())  # held, never ran


def test_queue_time_runs_until_the_last_member_starts() -> None:
    # The first job's server waits until a one-pod job frees 2 CPUs at t = 100.
    solo = Job("solo", 0.0, 100, 2000, "1Gi", Amdahl(0.0, 2.0, 2))  # 1 s per step
    gang = _ps_job("j", 400)  # 4 steps/s
    r = _run(Scenario("ps", cpu_nodes(1, "6", "16Gi"), (solo, gang)))
    assert r.unfinished == 0
    assert r.mean_queue_s == pytest.approx((0 + 100) / 2, abs=0.5)
    assert r.mean_jct_s == pytest.approx((100 + 200) / 2, abs=0.5)


def test_progress_is_reported_on_rank_0_only() -> None:
    async def run() -> SimulatedCluster:
        clock = VirtualClock(EPOCH)
        cluster = SimulatedCluster(clock, record_events=False)
        for node in cpu_nodes(1, "8", "16Gi"):
            cluster.add_node(node)
        profile = CONFIG.profile("pysched")
        assert profile is not None
        scheduler = Scheduler(SchedulerConfig((profile,), CONFIG.source), cluster, clock, REGISTRY)
        await scheduler.start()
        replay = Replay("pysched", scheduler, cluster, clock, [_ps_job("j", 100_000)], 7, 60.0, 0.0)
        await replay.run(None)  # 25,000 s at 4 global steps/s
        await scheduler.stop()
        return cluster

    cluster = asyncio.run(run())
    rank0 = cluster.pods[PodKey("sim/j-worker-0")]
    report = cluster.progress(rank0)
    stamp = None if report is None else report.stamp
    steps, when = (0, 0.0) if stamp is None else (stamp.steps, stamp.at)
    assert steps > 0 and steps == pytest.approx(4 * (when - EPOCH), abs=4)  # 4 global steps/s
    assert cluster.progress(cluster.pods[PodKey("sim/j-worker-1")]) is None
    assert cluster.progress(cluster.pods[PodKey("sim/j-ps-0")]) is None


def _bound(job: Job) -> tuple[GangRun, Accounting, random.Random]:
    assert job.gang is not None
    gang, books, rng = GangRun(job, job.gang), Accounting(), random.Random(0)
    for i, m in enumerate(job.gang.members):
        gang.bind(i, Held(m.role, m.cpu_milli / 1000, 0, "n"), 0.0, rng, 0.0)
    return gang, books, rng


def test_a_member_leaving_loses_the_steps_since_the_last_checkpoint() -> None:
    gang, books, _ = _bound(_ps_job("j", 100_000))  # 4 steps/s
    assert gang.run is not None and gang.run.steps_at(400.0) == 1600
    gang.leave(1, 400.0, books)  # checkpoint at 300 s of training: 1200 steps
    assert (gang.steps, gang.checkpoint, gang.complete) == (1200, 1200, False)
    assert books.allocated_cpu_s == pytest.approx(5 * 400)


def test_checkpoints_count_training_time_across_segments() -> None:
    gang, books, rng = _bound(_ps_job("j", 100_000))
    gang.resize(0, 4.0, 200.0, books, rng, 0.0)  # in place: 800 steps kept, no checkpoint yet
    assert gang.checkpoint == 0 and gang.run is not None and gang.run.seg_steps == 800
    gang.leave(2, 250.0, books)  # 250 s of training: still before the first checkpoint
    assert gang.steps == 0 and gang.run is None


def test_resizing_a_worker_in_place_changes_its_step_time_and_the_slowest_sets_the_pace() -> None:
    gang, books, rng = _bound(_ps_job("j", 100_000))
    gang.resize(0, 4.0, 100.0, books, rng, 0.0)  # worker 1 stays on 2 CPUs: still 0.5 s per step
    assert gang.run is not None and gang.run.step_s == pytest.approx(1 / 4)
    gang.resize(1, 4.0, 200.0, books, rng, 0.0)
    assert gang.run is not None and gang.run.step_s == pytest.approx(1 / 8)
    assert books.rescales == 2


def test_a_restarting_member_takes_the_job_back_to_its_checkpoint() -> None:
    gang, books, rng = _bound(_ps_job("j", 100_000, restart=True))
    gang.resize(0, 4.0, 400.0, books, rng, 0.0)
    assert gang.run is not None and gang.run.seg_steps == 1200
    assert gang.run.seg_start == 400.0 + RESTART_SECONDS


def test_a_gpu_job_larger_than_a_node_becomes_a_gang_of_node_sized_pods() -> None:
    table = Throughput((8, 16), (10.0, 20.0))
    big = Job("big", 0.0, 2000, 64_000, "128Gi", table, gpu=16, deadline=200.0, source="t.csv:7")
    nodes = parse_cluster("nodes=2,cpu=64,memory=256Gi,gpu=8")
    kept, skipped, problems = split_fitting((big,), nodes)
    assert (skipped, problems) == ([], [])
    (gang,) = kept
    assert gang.gang is not None and [m.gpu for m in gang.gang.members] == [8, 8]
    r = _run(Scenario("gpu", nodes, (big,)))
    assert (r.jobs, r.skipped, r.unfinished, r.deadline_met) == (1, 0, 0, 1)
    assert 2000 / 22.0 <= r.mean_jct_s <= 2000 / 18.0  # 20 steps/s x U(0.9, 1.1)


def test_a_gpu_job_with_no_gpu_node_is_skipped_and_counts_as_missed() -> None:
    big = Job("big", 0.0, 10, 1000, "1Gi", Throughput((1,), (1.0,)), gpu=1, deadline=100.0, source="t.csv:3")
    small = Job("small", 0.0, 10, 1000, "1Gi", WORKER_TRUTH, deadline=100.0)
    nodes = cpu_nodes(1, "4", "8Gi")
    kept, skipped, problems = split_fitting((big, small), nodes)
    assert (kept, skipped) == ([small], [big])
    assert problems == ["t.csv:3: needs 1 GPUs and no node holds any: skipped"]
    r = _run(Scenario("cpu", nodes, (big, small)))
    assert (r.jobs, r.deadline_jobs, r.deadline_met, r.skipped) == (2, 2, 1, 1)


def test_roles_of_ps_members() -> None:
    assert [m.role for m in ps_members("j", 2, 1000, "1Gi")] == [WORKER, WORKER, PS]


def test_one_pod_jobs_give_the_results_they_gave_before_gangs() -> None:
    """The default scenario's pysched run (step noise on), pinned: as since its GPU jobs are
    planned (admission demotes some of them) and the interval from a bind is an estimate (a job is
    scaled down only once its speed is measured between two reports)."""
    r = asyncio.run(run_policy(builtin_scenario(7, "small"), CONFIG, "pysched", REGISTRY, seed=7))
    assert r.as_json() == {
        "jobs": 200,
        "deadline_jobs": 200,
        "deadline_met": 105,
        "deadline_met_ratio": 0.525,
        "cpu_utilization": 0.7933,
        "mean_jct_s": 2089.4,
        "mean_queue_s": 577.4,
        "makespan_s": 23179.6,
        "rescales": 57,
        "skipped": 0,
        "unfinished": 0,
    }


def test_a_16_gpu_trace_row_on_8_gpu_nodes_runs_as_two_pods_of_8(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submission_time,num_iteration,model_name,batch_size,num_gpu\n1,0,1000,resnet50,,16\n")
    loaded = read_csv(trace, builtin_catalogue(), rule=None)
    nodes = gpu_pool(2)
    kept, skipped, _ = split_fitting(loaded.jobs, nodes)
    assert skipped == []
    (job,) = kept
    assert job.gang is not None
    assert [(m.name, m.gpu) for m in job.gang.members] == [("job-00000-0", 8), ("job-00000-1", 8)]
    r = _run(Scenario("trace", nodes, loaded.jobs))
    assert (r.jobs, r.skipped, r.unfinished) == (1, 0, 0)


def test_a_preempted_member_sends_its_job_back_to_the_checkpoint_and_comes_back() -> None:
    # The gang (5 CPUs, 4 steps/s) has run 400 s when a higher-priority job needs 3 of the 6 CPUs:
    # one worker is preempted, the job keeps its 300-s checkpoint (1200 steps) and resumes when the
    # intruder ends at 500 s: 98,800 steps left at 4 steps/s (without the preemption: 25,000 s).
    gang = _ps_job("j", 100_000)
    intruder = Job("vip", 400.0, 100, 3000, "1Gi", Amdahl(0.0, 3.0, 3), priority=1000)  # 1 s per step
    r = _run(Scenario("ps", cpu_nodes(1, "6", "16Gi"), (gang, intruder)))
    assert r.unfinished == 0
    vip, gang_jct = sorted(r.jct)  # both a second late: the preemptor's retry after its victim goes
    assert vip == pytest.approx(100, abs=2)
    assert gang_jct == pytest.approx(500 + 98_800 / 4, abs=2)


def test_a_cpu_job_larger_than_every_node_is_skipped_and_counts_as_missed() -> None:
    big = Job("big", 0.0, 10, 6000, "1Gi", WORKER_TRUTH, deadline=100.0, source="t.csv:2")
    gang = _ps_job("gang", 10)  # two workers of 2 CPUs and a server: every pod fits a 4-CPU node
    nodes = cpu_nodes(2, "4", "8Gi")
    kept, skipped, problems = split_fitting((big, gang), nodes)
    assert (kept, skipped) == ([gang], [big])
    assert problems == ["t.csv:2: a pod of it needs 6 CPUs and the largest node has 4: skipped"]
    r = _run(Scenario("cpu", nodes, (big,)))
    assert (r.jobs, r.deadline_jobs, r.deadline_met, r.skipped, r.unfinished) == (1, 1, 0, 1, 0)


def test_memory_in_a_skip_message_is_shown_in_the_unit_it_fills_never_rounded_up() -> None:
    job = Job("j", 0.0, 10, 1000, "1Gi", WORKER_TRUTH, deadline=100.0, source="t.csv:2")
    shown = []
    for memory in ("1Ki", "1000", "1500000", str(2**30 - 1)):
        problems = split_fitting((job,), cpu_nodes(1, "4", memory))[2]
        shown.append(problems[0].split("the largest node has ")[1])
    assert shown == ["1Ki: skipped", "1000: skipped", "1.43Mi: skipped", "1023.99Mi: skipped"]


def test_a_pod_no_node_holds_on_every_resource_or_a_gang_bigger_than_the_cluster_is_skipped() -> None:
    bert = Throughput((1, 2, 4, 8), (1.0, 2.0, 4.0, 8.0))
    hungry = Job("hungry", 0.0, 10, 1000, "100Gi", WORKER_TRUTH, deadline=100.0, source="t.csv:2")
    gpus = gpu_pool(1, gpus=8, cpu="16", memory="64Gi")  # GPUs with few CPUs, CPUs without GPUs
    wide = Job("wide", 0.0, 10, 32_000, "8Gi", bert, gpu=8, deadline=100.0, source="t.csv:3")
    fine = Job("fine", 0.0, 10, 8000, "8Gi", bert, gpu=8, deadline=100.0)
    kept, skipped, problems = split_fitting((hungry, wide, fine), (*cpu_nodes(1, "64", "32Gi"), *gpus))
    assert (kept, skipped) == ([fine], [hungry, wide])
    assert problems == [
        "t.csv:2: a pod of it needs 100Gi memory and the largest node has 64Gi: skipped",
        "t.csv:3: a pod of it needs 32 CPUs, 8Gi memory, 8 GPUs and no node has all of them: skipped",
    ]
    big = Job("big", 0.0, 10, 16_000, "16Gi", bert, gpu=16, deadline=100.0, source="t.csv:4")
    small_nodes = parse_cluster("nodes=3,cpu=16,memory=64Gi,gpu=4")
    kept, skipped, problems = split_fitting((big,), small_nodes)
    assert (kept, len(skipped)) == ([], 1)  # four pods of 4 GPUs on 12 GPUs: it could never start
    assert problems == ["t.csv:4: its 4 pods need 16 GPUs together and the cluster has 12: skipped"]
    r = _run(Scenario("unfit", small_nodes, (big,)))
    assert (r.jobs, r.deadline_jobs, r.deadline_met, r.skipped, r.unfinished) == (1, 1, 0, 1, 0)


def test_an_elastic_job_ranges_over_the_gpu_counts_its_model_has_a_speed_for() -> None:
    """A table without a 1-GPU rate: scaled to one worker, the job would never progress (and the
    run would end with it unfinished)."""
    table = Throughput((2, 4, 8), (10.0, 18.0, 30.0))
    jobs = [
        Job(f"j{i}", 10.0 * i, 20_000, 4000, "8Gi", table, gpu=4, deadline=10.0 * i + 900.0, source=f"t.csv:{i + 2}")
        for i in range(12)
    ]
    nodes = parse_cluster("nodes=2,cpu=64,memory=256Gi,gpu=8")
    kept, skipped, problems = split_fitting(jobs, nodes, elastic=True)
    assert (skipped, problems) == ([], [])
    assert {job.elastic for job in kept} == {(2, 8)}
    r = asyncio.run(run_policy(Scenario("elastic", nodes, tuple(jobs)), CONFIG, "pysched", REGISTRY, elastic=True))
    assert (r.jobs, r.skipped, r.unfinished) == (12, 0, 0)


def test_a_gang_whose_pods_only_one_node_holds_is_skipped() -> None:
    """Enough GPUs in total, but only one node has the CPUs for a member: it could never start."""
    table = Throughput((8, 16), (10.0, 20.0))
    big = Job("big", 0.0, 2000, 64_000, "128Gi", table, gpu=16, deadline=900.0, source="t.csv:2")
    wide, narrow = gpu_pool(1, gpus=8, cpu="64", memory="256Gi")[0], gpu_pool(1, gpus=8, cpu="4", memory="256Gi")[0]
    nodes = [wide, {**narrow, "metadata": {**narrow["metadata"], "name": "narrow"}}]
    kept, skipped, problems = split_fitting((big,), nodes)
    assert (kept, len(skipped)) == ([], 1)
    assert problems == [
        "t.csv:2: 2 of its pods need 32 CPUs, 64Gi memory, 8 GPUs each and the nodes hold 1 at once: skipped"
    ]
    r = _run(Scenario("unfit", tuple(nodes), (big,)))
    assert (r.jobs, r.skipped, r.unfinished) == (1, 1, 0)
    # With a second node like the first, it runs.
    another = {**wide, "metadata": {**wide["metadata"], "name": "wide"}}
    kept, skipped, problems = split_fitting((big,), [*nodes, another])
    assert (len(kept), skipped, problems) == (1, [], [])


def test_an_elastic_job_whose_first_workers_the_nodes_cannot_hold_at_once_is_skipped() -> None:
    """It starts with all of them (its requested GPUs), placed together: 4 workers of 9 CPUs on
    three 16-CPU nodes never start (48 CPUs in all, one worker a node), though its fewest would."""
    table = Throughput((2, 4, 8), (10.0, 18.0, 30.0))
    job = Job("j", 0.0, 20_000, 36_000, "8Gi", table, gpu=4, deadline=5000.0, source="t.csv:2")
    nodes = parse_cluster("nodes=3,cpu=16,memory=256Gi,gpu=8")
    kept, skipped, problems = split_fitting([job], nodes, elastic=True)
    assert (kept, len(skipped)) == ([], 1)
    assert problems == [
        "t.csv:2: 4 of its pods need 9 CPUs, 2Gi memory, 1 GPUs each and the nodes hold 3 at once: skipped"
    ]
    r = asyncio.run(run_policy(Scenario("e", nodes, (job,)), CONFIG, "pysched", REGISTRY, elastic=True))
    assert (r.jobs, r.skipped, r.unfinished) == (1, 1, 0)


def test_skipped_trace_rows_count_as_jobs_and_missed_deadlines() -> None:
    job = Job("a", 0.0, 10, 1000, "1Gi", WORKER_TRUTH, deadline=100.0)
    rows = ("t.csv:3: job_id 'a' repeats line 2", "t.csv:4: malformed")
    r = _run(Scenario("rows", cpu_nodes(1, "4", "8Gi"), (job,), problems=rows, skipped_deadlines=1))
    assert (r.jobs, r.deadline_jobs, r.deadline_met, r.skipped, r.deadline_met_ratio) == (3, 2, 1, 2, 0.5)


def test_a_trace_that_starts_late_is_replayed_and_a_horizon_cuts_it_where_asked() -> None:
    # Submitted on day 43 (as ElasticFlow's testbed trace is): no cut-off counted from time zero.
    late = 43 * 86400.0
    job = Job("late", late, 100, 1000, "1Gi", WORKER_TRUTH, deadline=late + 200.0)  # 1 s a step
    nodes = cpu_nodes(1, "4", "8Gi")
    r = _run(Scenario("late", nodes, (job,)))
    assert (r.deadline_met, r.unfinished) == (1, 0) and r.mean_jct_s == pytest.approx(100, abs=0.5)
    cut = asyncio.run(run_policy(Scenario("late", nodes, (job,)), CONFIG, "default", REGISTRY, horizon=50.0))
    assert (cut.deadline_met, cut.unfinished, cut.deadline_jobs) == (0, 1, 1)  # cut 50 s after it arrived
    assert [(u.start - EPOCH, u.end - EPOCH) for u in cut.usage] == [(late, late + 50)]  # charged up to the cut
    # The horizon counts from the workload's first submission, a job skipped as too big included.
    big = Job("big", late - 1000, 10, 64_000, "1Gi", WORKER_TRUTH, deadline=late, source="t.csv:2")
    cut = asyncio.run(run_policy(Scenario("late", nodes, (big, job)), CONFIG, "default", REGISTRY, horizon=1050.0))
    assert (cut.deadline_met, cut.unfinished, cut.skipped) == (0, 1, 1)


def test_an_empty_cluster_skips_its_reconciles_until_the_next_arrival(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace whose clock starts late (epoch seconds) or a quiet night: the reconciles of a
    stretch with no pod to look at are skipped on their grid, and the run is the same as with
    every one of them (the gap is off the grid, so a skip that moved the grid would show)."""
    jobs = tuple(
        Job(n, t, 3000, 1000, "1Gi", WORKER_TRUTH, deadline=t + 2500.0)
        for n, t in (("a", 0.0), ("b", 50_000.37), ("c", 50_100.0), ("d", 1.2e6 + 7.5))
    )
    scenario = Scenario("quiet", cpu_nodes(1, "4", "8Gi"), jobs)
    results, reconciles = [], []
    for skipping in (True, False):
        if not skipping:
            monkeypatch.setattr(Scheduler, "skip_reconciles_before", lambda self, until: None)
        seen: list[float] = []

        def count(scheduler: Scheduler, _: Replay, seen: list[float] = seen) -> None:
            original = scheduler.reconcile_if_due

            async def counted() -> None:
                due = scheduler.next_reconcile()
                if due is not None and scheduler.clock.now() >= due:
                    seen.append(scheduler.clock.now())
                await original()

            scheduler.reconcile_if_due = counted  # type: ignore[method-assign]

        r = asyncio.run(run_policy(scenario, CONFIG, "pysched", REGISTRY, step_noise=0.0, prepare=count))
        results.append((r.deadline_met, r.jct, r.rescales, r.cpu_utilization, r.usage))
        reconciles.append(len(seen))
    assert results[0] == results[1] and results[0][0] == 4
    assert reconciles[1] > 20_000 and reconciles[0] < 200  # not one a minute through the empty days


@pytest.mark.parametrize("run_s", [7233.0, 7236.0, 7539.0])
def test_a_pod_in_backoff_when_the_last_job_ends_an_hour_after_the_last_bind_still_runs(run_s: float) -> None:
    # `b` waits (in backoff at times) for `a`'s 4 CPUs; `a` ends more than an hour after the last bind.
    a = Job("a", 0.0, int(run_s * 4), 4000, "1Gi", WORKER_TRUTH)  # 0.25 s a step on 4 CPUs
    b = Job("b", 10.0, 100, 4000, "1Gi", WORKER_TRUTH)
    r = _run(Scenario("queue", cpu_nodes(1, "4", "8Gi"), (a, b)))
    assert (r.unfinished, len(r.jct)) == (0, 2)


def test_a_replay_gives_the_same_result_whatever_the_processs_string_hashes(tmp_path: Path) -> None:
    """Python salts string hashes per process: a decision that follows a set of pod names (the
    order in which a gang's members are let through Permit, hence bound) would make the same run
    differ between two processes. `seed-ps` seed 1 under `pysched` did (makespan 14,981 s with one
    salt, 15,001 s with another)."""
    results = []
    for salt in ("0", "1"):
        out = tmp_path / f"salt-{salt}.json"
        command = [sys.executable, "-m", "pysched", "simulate", "--scenario", "seed-ps", "--seed", "1"]
        command += ["--policy", "pysched", "--json", str(out)]
        done = subprocess.run(command, env={**os.environ, "PYTHONHASHSEED": salt}, capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr
        results.append(json.loads(out.read_text())["policies"])
    assert results[0] == results[1]


def test_a_gpu_job_a_trace_gives_as_a_duration_runs_that_long_at_its_request_as_a_gang(tmp_path: Path) -> None:
    """Steps from a duration are counted at the job's speed at its request, the factor a gang
    draws included: made a gang by the cluster (or elastic), it still runs the duration there;
    steps a trace gives are kept."""
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,submission_time,duration,num_iteration,model_name,num_gpu,deadline\n"
        "one,0,3600,,resnet50,1,100000\nwide,0,3600,,resnet50,16,100000\nwider,5000,3600,,vgg16,32,100000\n"
        "given,0,3600,1000,resnet50,16,100000\n"
    )
    rows = tmp_path / "jobs.csv"
    argv = ["simulate", "--trace", str(trace), "--policy", "default", "--jobs-csv", str(rows)]
    assert main([*argv, "--cluster", "nodes=4,cpu=64,memory=512Gi,gpu=8"]) == 0
    runs = {r["trace_id"]: float(r["finished_s"]) - float(r["started_s"]) for r in csv.DictReader(rows.open())}
    assert all(abs(runs[name] - 3600) < 36 for name in ("one", "wide", "wider")), runs  # the noise, not the factor
    loaded = read_csv(trace, builtin_catalogue())
    nodes = parse_cluster("nodes=4,cpu=64,memory=512Gi,gpu=8")
    for elastic in (False, True):
        kept = {job.trace_id: job for job in split_fitting(loaded.jobs, nodes, elastic=elastic)[0]}
        for name in ("wide", "wider"):
            job = kept[name]
            assert job.gang is not None
            rate = job.gang.speed.steps_per_s(job.truth, job.gang.at_request())
            assert job.steps == round(3600 * rate), (name, elastic)
        assert kept["given"].steps == 1000
