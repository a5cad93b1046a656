"""Multi-pod jobs: the throughput truths and the member pods."""

import random

import pytest

from pysched.api.annotations import DEADLINE, TOTAL_STEPS
from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS, ROLE_LABEL
from pysched.workload.catalogue import CpuModel, builtin_catalogue
from pysched.workload.gang import (
    PS,
    WORKER,
    AllReduce,
    DataParallel,
    Gang,
    Held,
    ParameterServer,
    efficiency,
    gpu_members,
    ps_members,
)
from pysched.workload.gang_jobs import gpu_gang, ps_job
from pysched.workload.job import Job
from pysched.workload.speed import Amdahl, Throughput
from pysched.workload.traces import DeadlineRule

WORKER_TRUTH = Amdahl(0.0, 1.0, 16)  # t(c) = 1 / c
TABLE = Throughput((1, 8, 16), (1.0, 10.0, 18.0))


def _ps(*cpus: float, servers: float = 1.0) -> tuple[Held, ...]:
    return (*(Held(WORKER, c, 0, f"n{i}") for i, c in enumerate(cpus)), Held(PS, servers, 0, "n0"))


def test_efficiency_falls_with_each_worker() -> None:
    assert efficiency(1, 0.06) == 1.0
    assert efficiency(3, 0.06) == pytest.approx(1 / 1.12)
    assert efficiency(5, 0.10) == pytest.approx(1 / 1.4)


def test_ps_global_rate_is_w_times_e_over_t() -> None:
    # 3 workers on 2 CPUs: t = 0.5 s; e = 1 / 1.2; 1 server CPU is what 3 workers need.
    assert ParameterServer(0.1).steps_per_s(WORKER_TRUTH, _ps(2, 2, 2)) == pytest.approx(3 / 1.2 / 0.5)


def test_servers_short_of_cpus_scale_the_rate() -> None:
    # 5 workers need ceil(5 / 4) = 2 server CPUs; holding 0.5 gives a quarter of the rate.
    full = ParameterServer(0.0).steps_per_s(WORKER_TRUTH, _ps(1, 1, 1, 1, 1, servers=2.0))
    short = ParameterServer(0.0).steps_per_s(WORKER_TRUTH, _ps(1, 1, 1, 1, 1, servers=0.5))
    assert full == pytest.approx(5.0)
    assert short == pytest.approx(full / 4)
    assert ParameterServer(0.0).steps_per_s(WORKER_TRUTH, _ps(1, 1, 1, 1, 1, servers=3.0)) == pytest.approx(full)


def test_the_slowest_worker_sets_the_pace() -> None:
    # Synchronous steps: one worker on 1 CPU holds the others on 4 back to t = 1 s.
    assert ParameterServer(0.0).steps_per_s(WORKER_TRUTH, _ps(4, 4, 1)) == pytest.approx(3.0)
    assert ParameterServer(0.0).steps_per_s(WORKER_TRUTH, _ps(4, 4, 4)) == pytest.approx(12.0)


def test_ps_cpu_use_counts_worker_steps_and_needed_server_cpus() -> None:
    # 100 global steps of 1 CPU-s each, over 10 s; the server holds 2 CPUs but needs 1.
    assert ParameterServer(0.0).used_cpu_s(WORKER_TRUTH, 100, 10.0, _ps(2, 2, servers=2.0)) == pytest.approx(110.0)


def test_gpu_gang_rate_is_the_table_at_its_total_gpus_times_its_factor() -> None:
    on_two = (Held("", 0, 8, "a"), Held("", 0, 8, "b"))
    assert DataParallel(1.05, 8).steps_per_s(TABLE, on_two) == pytest.approx(18.0 * 1.05)


def test_gpu_gang_pays_0_9_per_node_beyond_the_fewest() -> None:
    # 16 GPUs fit on 2 nodes of 8: spread over 4 they lose 0.9 ** 2.
    on_four = tuple(Held("", 0, 4, f"n{i}") for i in range(4))
    assert DataParallel(1.0, 8).steps_per_s(TABLE, on_four) == pytest.approx(18.0 * 0.81)
    # On 16-GPU nodes the fewest is 1: the same two nodes cost one 0.9.
    on_two = (Held("", 0, 8, "a"), Held("", 0, 8, "b"))
    assert DataParallel(1.0, 16).steps_per_s(TABLE, on_two) == pytest.approx(18.0 * 0.9)


def test_gpus_split_as_evenly_as_the_node_size_allows() -> None:
    assert [m.gpu for m in gpu_members("j", 16, 64_000, 128 * 2**30, 8)] == [8, 8]
    assert [m.gpu for m in gpu_members("j", 12, 48_000, 96 * 2**30, 8)] == [6, 6]
    three = gpu_members("j", 20, 80_000, 160 * 2**30, 8)
    assert [m.gpu for m in three] == [7, 7, 6]
    assert [m.name for m in three] == ["j-0", "j-1", "j-2"]
    assert [m.cpu_milli for m in three] == [28_000, 28_000, 24_000]


def test_ps_members_put_the_first_worker_first_and_size_the_servers() -> None:
    members = ps_members("j", 5, 2000, "1Gi")
    assert [m.name for m in members] == ["j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3", "j-worker-4", "j-ps-0"]
    assert members[-1].cpu_milli == 2000  # ceil(5 / 4) CPUs


def _ps_job(index: int, model: CpuModel, workers: int, rule: DeadlineRule | None) -> Job:
    return ps_job(
        index,
        submit=0.0,
        model=model,
        workers=workers,
        worker_cpu_milli=2000,
        memory="1Gi",
        rule=rule,
        rng=random.Random(index),
        source="t",
    )


def test_every_member_pod_names_its_job_and_carries_its_deadline() -> None:
    model = builtin_catalogue().models["lstm"]
    assert isinstance(model, CpuModel)
    job = _ps_job(3, model, 2, None)
    job = Job(job.name, job.submit, job.steps, job.cpu_milli, job.memory, job.truth, deadline=900.0, gang=job.gang)
    pods = job.manifests("pysched", 0.0)
    assert [p["metadata"]["name"] for p in pods] == ["job-00003-worker-0", "job-00003-worker-1", "job-00003-ps-0"]
    for pod, role in zip(pods, (WORKER, WORKER, PS), strict=True):
        meta = pod["metadata"]
        assert meta["labels"] == {JOB_LABEL: "job-00003", ROLE_LABEL: role}
        assert meta["annotations"][MIN_MEMBERS] == "3"
        assert meta["annotations"][TOTAL_STEPS] == str(model.steps)
        assert meta["annotations"][DEADLINE] == "1970-01-01T00:15:00Z"
    assert [p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in pods] == ["2000m", "2000m", "1000m"]


def test_a_one_pod_job_has_one_manifest_without_job_labels() -> None:
    job = Job("solo", 0.0, 10, 1000, "1Gi", WORKER_TRUTH)
    (pod,) = job.manifests("pysched", 0.0)
    assert pod == job.manifest("pysched", 0.0)
    assert pod["metadata"]["labels"] == {} and MIN_MEMBERS not in pod["metadata"]["annotations"]


def test_ps_job_steps_are_global_and_the_deadline_follows_its_gang_speed() -> None:
    model = CpuModel("lstm", 1000, 0, 1.0, 0.0, 16)
    job = _ps_job(0, model, 4, DeadlineRule(1.0, 1.0))  # deadline: the run time at the request
    assert job.steps == 1000 and job.gang is not None and job.cpu_milli == 4 * 2000 + 1000
    assert isinstance(job.gang.speed, ParameterServer)
    assert 0.03 <= job.gang.speed.s <= 0.09  # lstm's 0.06 x U(0.5, 1.5)
    global_rate = 4 * efficiency(4, job.gang.speed.s) / job.truth.step_seconds(2.0, 0)
    assert job.deadline == pytest.approx(1000 / global_rate)


def test_a_gpu_gang_keeps_the_job_and_draws_its_factor() -> None:
    job = Job("big", 0.0, 100, 64_000, "128Gi", TABLE, gpu=16)
    gang = gpu_gang(job, 8, random.Random(3))
    assert gang.gang is not None and isinstance(gang.gang.speed, DataParallel)
    assert 0.9 <= gang.gang.speed.factor <= 1.1
    assert [(m.gpu, m.cpu_milli, m.memory) for m in gang.gang.members] == [(8, 32_000, str(64 * 2**30))] * 2
    assert (gang.steps, gang.gpu, gang.name) == (100, 16, "big")
    assert Gang(gang.gang.members, gang.gang.speed).at_request()[1].node == "node-1"


def test_all_reduce_is_the_server_rate_without_servers() -> None:
    workers = tuple(Held(WORKER, 2.0, 0, f"n{i}") for i in range(3))
    allreduce = AllReduce(0.06).steps_per_s(WORKER_TRUTH, workers)
    assert allreduce == pytest.approx(3 * efficiency(3, 0.06) / 0.5)
    # The same workers under a parameter server that holds what it needs: the same rate.
    assert allreduce == pytest.approx(ParameterServer(0.06).steps_per_s(WORKER_TRUTH, (*workers, Held(PS, 1, 0, "n0"))))
    slow = (*workers[:2], Held(WORKER, 1.0, 0, "n2"))  # the slowest worker sets the pace
    assert AllReduce(0.06).steps_per_s(WORKER_TRUTH, slow) == pytest.approx(3 * efficiency(3, 0.06) / 1.0)
    assert AllReduce(0.06).steps_per_s(WORKER_TRUTH, ()) == 0.0
    assert AllReduce(0.06).used_cpu_s(WORKER_TRUTH, 10, 5.0, workers) == pytest.approx(10.0)
