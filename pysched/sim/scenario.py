"""Workloads for the simulator: jobs (one pod each) arriving over time on a cluster.

In this first form a job runs for a fixed time once bound; the training workload model
(steps, hidden speed curves, progress) replaces that with steps and speeds.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from pysched.builders import node_dict, pod_dict

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    submit: float  # seconds from the start of the run
    run_seconds: float
    cpu: str
    memory: str
    gpu: int = 0
    deadline: float | None = None  # absolute, same clock as `submit`
    priority: int = 0

    def manifest(self, scheduler_name: str, epoch: float) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.gpu:
            extra = {"extended": {"nvidia.com/gpu": str(self.gpu)}, "tolerations": [GPU_TOLERATION]}
        return pod_dict(
            self.name,
            namespace="sim",
            cpu=self.cpu,
            memory=self.memory,
            scheduler_name=scheduler_name,
            priority=self.priority,
            created=epoch + self.submit,
            **extra,
        )


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    nodes: tuple[dict[str, Any], ...]
    jobs: tuple[Job, ...]
    description: dict[str, Any] = field(default_factory=dict)


def builtin_scenario(seed: int = 7, jobs: int = 300) -> Scenario:
    """A small mixed cluster and a seeded day of jobs with fixed run times.

    6 CPU nodes (16 CPU, 64 GiB) and 2 GPU nodes (32 CPU, 256 GiB, 8 GPUs, tainted); jobs arrive
    as a Poisson stream over four hours, run log-normally 5 to 120 minutes, 15% ask for GPUs and
    70% carry a deadline of 1.2 to 3 times their run time after submission.
    """
    rng = random.Random(seed)
    nodes = [node_dict(f"cpu-{i}", cpu="16", memory="64Gi", labels={"pool": "cpu"}) for i in range(6)]
    nodes += [
        node_dict(
            f"gpu-{i}",
            cpu="32",
            memory="256Gi",
            extended={"nvidia.com/gpu": "8"},
            labels={"pool": "gpu"},
            taints=[GPU_TAINT],
        )
        for i in range(2)
    ]
    out = []
    now = 0.0
    rate = jobs / (4 * 3600.0)
    for j in range(jobs):
        now += rng.expovariate(rate)
        run = min(max(rng.lognormvariate(math.log(1200), 0.8), 300.0), 7200.0)
        gpu = rng.choice((1, 1, 1, 2, 4, 8)) if rng.random() < 0.15 else 0
        cpu = str(rng.choice((1, 2, 2, 4, 4, 8)))
        memory = rng.choice(("2Gi", "4Gi", "8Gi", "16Gi"))
        deadline = now + run * rng.uniform(1.2, 3.0) if rng.random() < 0.7 else None
        out.append(Job(f"job-{j:04d}", round(now, 3), round(run, 3), cpu, memory, gpu, deadline))
    return Scenario(
        "builtin",
        tuple(nodes),
        tuple(out),
        {"seed": seed, "jobs": jobs, "nodes": len(nodes), "arrivals": "poisson over 4h"},
    )
