"""Multi-pod jobs built from workloads: a GPU job too large for one node becomes a data-parallel
gang, and a CPU model's job a parameter-server job."""

from __future__ import annotations

import dataclasses
import math
import random

from pysched.api.limits import MAX_STEPS
from pysched.api.resources import MEMORY, to_scheduler_units
from pysched.workload.catalogue import CpuModel
from pysched.workload.gang import DataParallel, Gang, Member, ParameterServer, contention, gpu_members, ps_members
from pysched.workload.job import Job
from pysched.workload.traces import DeadlineRule, job_name, make_job


def gpu_gang(job: Job, gpus_per_node: int, rng: random.Random) -> Job:
    """The job as ceil(g / GPUs per node) member pods; its deadline is kept, its throughput drawn
    around the table (U(0.9, 1.1)), and its steps kept unless they came from a duration
    (`recounted`)."""
    members = gpu_members(job.name, job.gpu, job.cpu_milli, to_scheduler_units(MEMORY, job.memory), gpus_per_node)
    return recounted(dataclasses.replace(job, gang=Gang(members, DataParallel(rng.uniform(0.9, 1.1), gpus_per_node))))


def recounted(job: Job) -> Job:
    """A gang whose steps a trace gave as a duration at its request: that duration at the speed
    the gang now has at its request (its drawn factor included), as any job from a duration runs."""
    if not job.from_duration or job.gang is None or job.expected_s is None:
        return job
    rate = job.gang.speed.steps_per_s(job.truth, job.gang.at_request())
    if not rate > 0:
        return job
    return dataclasses.replace(job, steps=min(MAX_STEPS, max(1, round(job.expected_s * rate))))


def worker(job: Job, index: int) -> Member:
    """Worker `index` of an elastic GPU job: one GPU, and the job's CPUs and memory per GPU."""
    memory = to_scheduler_units(MEMORY, job.memory)
    return Member(f"{job.name}-{index}", "", math.ceil(job.cpu_milli / job.gpu), str(math.ceil(memory / job.gpu)), 1)


def elastic_gpu_job(job: Job, gpus_per_node: int, most_workers: int, rng: random.Random, least_workers: int = 1) -> Job:
    """The job as one-GPU workers of an Indexed Job, as many as its GPUs at first, elastic from
    `least_workers` to `most_workers` (the fewest and the most GPUs its model offers, the most within
    the cluster: it never runs on a count it has no speed for); its deadline is kept, its
    throughput drawn around the table (U(0.9, 1.1)), its steps as `gpu_gang`'s."""
    members = tuple(worker(job, i) for i in range(job.gpu))
    gang = Gang(members, DataParallel(rng.uniform(0.9, 1.1), gpus_per_node))
    elastic = (min(job.gpu, least_workers), max(job.gpu, most_workers))
    return recounted(dataclasses.replace(job, gang=gang, elastic=elastic))


def ps_job(
    index: int,
    *,
    submit: float,
    model: CpuModel,
    workers: int,
    worker_cpu_milli: int,
    memory: str,
    rule: DeadlineRule | None,
    rng: random.Random,
    source: str,
) -> Job:
    """One parameter server and `workers` workers training the model's steps (global steps)."""
    truth = model.truth(rng)
    members = ps_members(job_name(index), workers, worker_cpu_milli, memory)
    gang = Gang(members, ParameterServer(contention(model.name, rng)))
    return make_job(
        index,
        submit=submit,
        gpus=0,
        cpu_milli=sum(m.cpu_milli for m in members),
        memory=memory,
        model=model,
        truth=truth,
        steps=model.steps,
        duration=None,
        deadline=None,
        rule=rule,
        rng=rng,
        source=source,
        gang=gang,
    )
