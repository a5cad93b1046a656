"""RSS of the scheduler core under pod churn, in-process on the simulated backend.

The soak (`perf/soak.py`) measures the whole live process. This isolates what the queue, the
cache, the kernel caches and the deadline plugins keep per pod: the `pysched` profile schedules a
steady stream of deadline pods of varied shapes onto simulated nodes, running pods report
progress, the oldest are deleted, and RSS and the kernel caches' sizes are printed as it goes.

    python perf/churn_memory.py --nodes 500 --pods 15000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random

from pysched.api.annotations import format_progress
from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler

PER_STEP = 5  # pods created per simulated second


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


async def churn(nodes: int, pods: int, alive: int, seed: int) -> None:
    registry = default_registry()
    clock = VirtualClock(1.8e9)
    cluster = SimulatedCluster(clock, record_events=False)
    scheduler = Scheduler(builtin_config(registry).only("pysched"), cluster, clock, registry)
    for i in range(nodes):
        cluster.add_node(node_dict(f"n{i}", cpu="32", memory="128Gi"))
    await scheduler.start()
    rng = random.Random(seed)
    keys: list[PodKey] = []
    notes = {"pysched.io/deadline": "2h", "pysched.io/total-steps": "10000"}
    for created in range(0, pods, PER_STEP):
        for n in range(created, created + PER_STEP):
            cpu, memory = f"{rng.randint(5, 40) * 100}m", f"{rng.randint(1, 64) * 64}Mi"
            cluster.create_pod(pod_dict(f"p{n}", cpu=cpu, memory=memory, created=clock.now(), annotations=notes))
            keys.append(PodKey(f"default/p{n}"))
        await scheduler.run_until_idle()
        for key in keys[-alive // 2 :: 37]:  # some running pods report progress
            if cluster.pods[key].node_name:
                steps = int(clock.now() - cluster.pods[key].created)
                cluster.set_annotations(key, {"pysched.io/progress": format_progress(steps, clock.now())})
        while len(keys) > alive:
            cluster.delete_pod(keys.pop(0))
        clock.advance(1.0)
        if (created + PER_STEP) % (pods // 10) == 0:
            gc.collect()
            selection = next(iter(scheduler.frameworks.values())).algorithm.selection
            row = {"pods": created + PER_STEP, "rss_mb": round(rss_mb(), 1), "trees": selection.trees}
            print(json.dumps(row), flush=True)
    await scheduler.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=15_000, help="pods created over the run")
    parser.add_argument("--alive", type=int, default=600, help="pods kept before the oldest are deleted")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(churn(args.nodes, args.pods, args.alive, args.seed))


if __name__ == "__main__":
    main()
