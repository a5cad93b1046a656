"""Multi-pod jobs built from workloads: a GPU job too large for one node becomes a data-parallel
gang, and a CPU model's job a parameter-server job."""

from __future__ import annotations

import dataclasses
import random

from pysched.api.resources import MEMORY, to_scheduler_units
from pysched.workload.catalogue import CpuModel
from pysched.workload.gang import DataParallel, Gang, ParameterServer, contention, gpu_members, ps_members
from pysched.workload.job import Job
from pysched.workload.traces import DeadlineRule, job_name, make_job


def gpu_gang(job: Job, gpus_per_node: int, rng: random.Random) -> Job:
    """The job as ceil(g / GPUs per node) member pods; its steps and deadline are kept, its
    throughput drawn around the table (U(0.9, 1.1))."""
    members = gpu_members(job.name, job.gpu, job.cpu_milli, to_scheduler_units(MEMORY, job.memory), gpus_per_node)
    return dataclasses.replace(job, gang=Gang(members, DataParallel(rng.uniform(0.9, 1.1), gpus_per_node)))


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
