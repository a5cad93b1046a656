"""`pysched bench`: the full scheduling loop on a large simulated cluster.

M pending pods onto N simulated nodes through queue, plugins, kernel, assume and bind (the
simulated backend binds at once). `seconds` excludes start-up and the JIT warm-up; p50/p99 time
one scheduling cycle, from pop to assume.
"""

from __future__ import annotations

import asyncio
import copy
import random
import resource
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from pysched.api.builders import keep_apart, node_dict, pod_dict, zone_spread
from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS
from pysched.api.labels import ZONE_LABEL
from pysched.api.storage_builders import pvc_dict, storage_class_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.cmd.heap import settled
from pysched.framework.clock import VirtualClock
from pysched.framework.config import SchedulerConfig
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler
from pysched.scheduler.selection import warm_up
from pysched.workload.job import GPU_TAINT

ZONES = ("zone-a", "zone-b", "zone-c")
MAX_BENCH_PODS = 200_000  # every pod is held in memory at once: about 6 KB each, 1.2 GB at the cap
INFRA_TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}


@dataclass(frozen=True, slots=True)
class BenchResult:
    nodes: int
    pods: int
    mix: str
    scheduled: int
    seconds: float
    pods_per_second: float
    p50_ms: float
    p99_ms: float
    peak_rss_mb: float


def bench_nodes(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """32 CPU / 128 GiB / 110 pods; a quarter with 8 GPUs (tainted), some infra-tainted, all zoned."""
    nodes = []
    for i in range(count):
        gpu = i % 4 == 3
        infra = not gpu and i % 20 == 0
        labels = {ZONE_LABEL: ZONES[i % 3]}
        taints = []
        extended = None
        if gpu:
            labels["accelerator"] = "nvidia-a100"
            taints.append(GPU_TAINT)
            extended = {"nvidia.com/gpu": "8"}
        if infra:
            labels["dedicated"] = "infra"
            taints.append(INFRA_TAINT)
        nodes.append(node_dict(f"node-{i:05d}", labels=labels, taints=taints, extended=extended))
    return nodes


def bench_pods(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """A seeded mix: 10% GPU pods, 10% pinned to a zone, 3% for infra nodes."""
    pods = []
    for j in range(count):
        cpu = rng.choice(("250m", "500m", "1", "2", "4"))
        memory = rng.choice(("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi"))
        kind = rng.random()
        kwargs: dict[str, Any] = {}
        if kind < 0.10:
            kwargs = {
                "extended": {"nvidia.com/gpu": str(rng.choice((1, 1, 2, 4, 8)))},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "node_selector": {"accelerator": "nvidia-a100"},
            }
        elif kind < 0.20:
            kwargs = {"node_selector": {ZONE_LABEL: rng.choice(ZONES)}}
        elif kind < 0.23:
            kwargs = {"tolerations": [INFRA_TAINT], "node_selector": {"dedicated": "infra"}}
        pods.append(pod_dict(f"pod-{j:06d}", namespace="bench", cpu=cpu, memory=memory, created=float(j), **kwargs))
    return pods


BENCH_STORAGE_CLASS = "bench-local"  # WaitForFirstConsumer, provisioned on the node chosen


def constrain(pods: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """The constrained mix: a fifth of the pods, in groups of 10-50 replicas that select each
    other, keep apart by hostname (required anti-affinity) or spread over zones (maxSkew 1,
    DoNotSchedule); every replica after the first of its group is refused by some node. A tenth
    of all pods mount a claim of their own, provisioned where the pod goes. Returns the claims."""
    target = len(pods) // 5
    chosen = sorted(rng.sample(range(len(pods)), target))
    group = 0
    while chosen:
        size = min(len(chosen), rng.randint(10, 50))
        members, chosen = chosen[:size], chosen[size:]
        app = f"group-{group:05d}"
        selector = {"matchLabels": {"app": app}}
        for index in members:
            spec = pods[index]["spec"]
            pods[index]["metadata"].setdefault("labels", {})["app"] = app
            if group % 2 == 0:
                spec["affinity"] = keep_apart(selector)
            else:
                spec["topologySpreadConstraints"] = zone_spread(selector)
        group += 1
    claims = []
    for index in rng.sample(range(len(pods)), len(pods) // 10):
        pod = pods[index]
        claim = f"data-{pod['metadata']['name']}"
        claims.append(pvc_dict(claim, namespace=pod["metadata"]["namespace"], storage_class=BENCH_STORAGE_CLASS))
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return claims


GANG_SIZE = 8
GANG_SHARE = 4 / 9  # with --pods 18000: 1,000 jobs of 8 pods and 10,000 single pods


def gang(pods: list[dict[str, Any]], rng: random.Random) -> int:
    """The gang mix: 4/9 of the pods, drawn at random, in jobs of 8 that must be placed all
    together (`pysched.io/job`, `pysched.io/min-members`); a job's members share its first
    member's shape (requests, selector, tolerations), as a DDP job's workers do. Returns the jobs."""
    chosen = rng.sample(range(len(pods)), int(len(pods) * GANG_SHARE) // GANG_SIZE * GANG_SIZE)
    jobs = 0
    for start in range(0, len(chosen), GANG_SIZE):
        members = [pods[index] for index in chosen[start : start + GANG_SIZE]]
        shape = {
            key: members[0]["spec"][key]
            for key in ("containers", "nodeSelector", "tolerations")
            if key in members[0]["spec"]
        }
        for pod in members:
            for key in ("nodeSelector", "tolerations"):
                pod["spec"].pop(key, None)
            pod["spec"].update(copy.deepcopy(shape))
            pod["metadata"].setdefault("labels", {})[JOB_LABEL] = f"job-{jobs:05d}"
            pod["metadata"].setdefault("annotations", {})[MIN_MEMBERS] = str(GANG_SIZE)
        jobs += 1
    return jobs


async def run_bench(
    nodes: int,
    pods: int,
    seed: int = 1,
    mix: str = "plain",
    config: SchedulerConfig | None = None,
    profile: str = "default",
    configure: Callable[[Scheduler], None] | None = None,
    settle: bool = True,
) -> BenchResult:
    """One bench run; `configure` may adjust the scheduler before the clock starts (perf/ uses it
    to compare variants side by side). With `settle`, the loaded cluster and pending pods are kept
    out of the garbage collector's walks as `pysched run` keeps what its informers listed."""
    rng = random.Random(seed)
    registry = default_registry()
    config = config or builtin_config(registry).only(profile)
    clock = VirtualClock(1_700_000_000.0)
    cluster = SimulatedCluster(clock, record_events=False)
    for node in bench_nodes(nodes, rng):
        cluster.add_node(node)
    manifests = bench_pods(pods, rng)
    if mix == "gangs":
        gang(manifests, rng)
    if mix == "constrained":
        cluster.add_storage_class(storage_class_dict(BENCH_STORAGE_CLASS, provisioner="bench.csi/local"))
        for claim in constrain(manifests, rng):
            cluster.add_pvc(claim)
    for manifest in manifests:
        manifest["spec"]["schedulerName"] = profile
    warm_up()
    scheduler = Scheduler(config, cluster, clock, registry, record_cycle_times=True)
    if configure is not None:
        configure(scheduler)
    await scheduler.start()
    for manifest in manifests:
        cluster.create_pod(manifest)
    with settled() if settle else nullcontext():
        started = time.perf_counter()
        await scheduler.run_until_idle()
        seconds = time.perf_counter() - started
    await scheduler.stop()
    cycles = np.array(scheduler.stats.cycle_seconds) * 1000.0
    return BenchResult(
        nodes=nodes,
        pods=pods,
        mix=mix,
        scheduled=scheduler.stats.scheduled,
        seconds=round(seconds, 3),
        pods_per_second=round(pods / seconds, 1),
        p50_ms=round(float(np.percentile(cycles, 50)), 4) if cycles.size else 0.0,
        p99_ms=round(float(np.percentile(cycles, 99)), 4) if cycles.size else 0.0,
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
    )


def bench(nodes: int, pods: int, seed: int = 1, mix: str = "plain") -> dict[str, Any]:
    return asdict(asyncio.run(run_bench(nodes, pods, seed, mix=mix)))
