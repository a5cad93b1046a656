"""Multi-pod training jobs: their member pods and the throughput truths that read every member.

A job of several pods makes progress only while all of them run (synchronous training); its speed
depends on what every member holds. Three kinds, with the fixed truths of docs/architecture.md
("Simulator truths"):

- parameter-server CPU jobs: servers and workers; global steps/s = W * e(W) / t(c), t(c) the model's
  Amdahl step time on the slowest worker's CPUs, e(W) = 1 / (1 + s (W - 1)); servers need
  ceil(W / 4) CPUs in total, and with less the rate scales by held / needed;
- all-reduce CPU jobs (workers only; the kubelet emulator's DDP gangs): the same rate, no servers;
- data-parallel GPU jobs: the measured rate at the total GPU count g times the job's factor, times
  0.9 per node beyond the fewest that can hold g GPUs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pysched.workload.speed import SpeedModel

PS = "ps"
WORKER = "worker"
WORKERS_PER_SERVER_CPU = 4  # servers need ceil(W / 4) CPUs in total
# Synchronisation cost per extra worker, by model; each job draws s x U(0.5, 1.5).
CONTENTION: Mapping[str, float] = {"lstm": 0.06, "gan": 0.10, "autoencoder": 0.04}
NODE_PENALTY = 0.9  # a GPU gang's throughput per node beyond the fewest possible


@dataclass(frozen=True, slots=True)
class Member:
    """One pod of a multi-pod job, at its request."""

    name: str
    role: str  # PS, WORKER, or "" for a data-parallel GPU member
    cpu_milli: int
    memory: str
    gpu: int = 0


@dataclass(frozen=True, slots=True)
class Held:
    """What one running member holds."""

    role: str
    cpu: float
    gpu: int
    node: str


def efficiency(workers: int, s: float) -> float:
    return 1.0 / (1.0 + s * (workers - 1))


def server_cpus_needed(workers: int) -> int:
    return math.ceil(workers / WORKERS_PER_SERVER_CPU)


@dataclass(frozen=True, slots=True)
class ParameterServer:
    """Synchronous data parallelism through parameter servers; `s` is this job's contention."""

    s: float

    def steps_per_s(self, worker: SpeedModel, held: Sequence[Held]) -> float:
        workers = [h.cpu for h in held if h.role == WORKER]
        if not workers:
            return 0.0
        step_s = max(worker.step_seconds(cpu, 0) for cpu in workers)  # the slowest worker sets the pace
        if math.isinf(step_s):
            return 0.0
        needed = server_cpus_needed(len(workers))
        servers = sum(h.cpu for h in held if h.role == PS)
        return len(workers) * efficiency(len(workers), self.s) / step_s * min(1.0, servers / needed)

    def used_cpu_s(self, worker: SpeedModel, steps: int, seconds: float, held: Sequence[Held]) -> float:
        """A global step is one worker step of `a + b` CPU-seconds; servers use what they need of
        what they hold."""
        per_step = worker.cpu_seconds_per_step() or 0.0
        workers = sum(1 for h in held if h.role == WORKER)
        servers = sum(h.cpu for h in held if h.role == PS)
        return steps * per_step + min(servers, server_cpus_needed(workers)) * seconds


@dataclass(frozen=True, slots=True)
class AllReduce:
    """CPU workers that synchronise among themselves (PyTorch DDP on CPUs): the parameter-server
    rate with every member a worker and no server CPUs to hold. The kubelet emulator's truth for a
    CPU gang that has no `ps` member; the simulator's CPU gangs always have servers."""

    s: float

    def steps_per_s(self, worker: SpeedModel, held: Sequence[Held]) -> float:
        if not held:
            return 0.0
        step_s = max(worker.step_seconds(h.cpu, 0) for h in held)
        if math.isinf(step_s):
            return 0.0
        return len(held) * efficiency(len(held), self.s) / step_s

    def used_cpu_s(self, worker: SpeedModel, steps: int, seconds: float, held: Sequence[Held]) -> float:
        return steps * (worker.cpu_seconds_per_step() or 0.0)


@dataclass(frozen=True, slots=True)
class DataParallel:
    """A GPU table's rate at the total GPU count, this job's factor, and the spread penalty."""

    factor: float
    gpus_per_node: int

    def steps_per_s(self, table: SpeedModel, held: Sequence[Held]) -> float:
        gpus = sum(h.gpu for h in held)
        step_s = table.step_seconds(0.0, gpus)
        if gpus <= 0 or math.isinf(step_s):
            return 0.0
        spread = len({h.node for h in held}) - math.ceil(gpus / self.gpus_per_node)
        return self.factor / step_s * NODE_PENALTY ** max(0, spread)

    def used_cpu_s(self, table: SpeedModel, steps: int, seconds: float, held: Sequence[Held]) -> float | None:
        return None  # GPU tables carry no CPU use: not counted in CPU utilisation


GangSpeed = ParameterServer | AllReduce | DataParallel


@dataclass(frozen=True, slots=True)
class Gang:
    members: tuple[Member, ...]  # rank 0 first: the member that reports progress
    speed: GangSpeed

    def at_request(self) -> tuple[Held, ...]:
        """Every member at its request, on as few nodes as the GPUs allow (CPU members: node unused)."""
        per_node = self.speed.gpus_per_node if isinstance(self.speed, DataParallel) else 0
        held, node, room = [], 0, per_node
        for m in self.members:
            if per_node and m.gpu > room:
                node, room = node + 1, per_node
            room -= m.gpu
            held.append(Held(m.role, m.cpu_milli / 1000, m.gpu, f"node-{node}"))
        return tuple(held)


def contention(model: str, rng: random.Random) -> float:
    """One parameter-server job's `s`; ValueError for a model with no contention truth."""
    base = CONTENTION.get(model)
    if base is None:
        raise ValueError(f"model {model} has no parameter-server truth (known: {', '.join(sorted(CONTENTION))})")
    return base * rng.uniform(0.5, 1.5)


def ps_members(job: str, workers: int, worker_cpu_milli: int, memory: str, servers: int = 1) -> tuple[Member, ...]:
    """Workers first (rank 0 is the first worker), then servers sharing ceil(W / 4) CPUs."""
    server_milli = math.ceil(1000 * server_cpus_needed(workers) / servers)
    return tuple(Member(f"{job}-worker-{i}", WORKER, worker_cpu_milli, memory) for i in range(workers)) + tuple(
        Member(f"{job}-ps-{i}", PS, server_milli, memory) for i in range(servers)
    )


def gpu_members(job: str, gpus: int, cpu_milli: int, memory_bytes: int, gpus_per_node: int) -> tuple[Member, ...]:
    """ceil(g / GPUs per node) pods, GPUs (and the job's CPUs and memory with them) split as evenly
    as whole GPUs allow."""
    count = math.ceil(gpus / gpus_per_node)
    shares = [gpus // count + (1 if i < gpus % count else 0) for i in range(count)]
    return tuple(
        Member(
            f"{job}-{i}",
            "",
            math.ceil(cpu_milli * share / gpus),
            str(math.ceil(memory_bytes * share / gpus)),
            share,
        )
        for i, share in enumerate(shares)
    )
