"""Side-by-side: incremental selection (tournament trees for hot keys) against a plain scan of
every candidate node, on the `pysched bench` workload. Runs alternate so machine noise hits both.

    .venv/bin/python perf/compare_selection.py [--nodes 5000] [--pods 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from pysched.cmd.bench import BenchResult, run_bench
from pysched.scheduler.scheduler import Scheduler


def scan_only(scheduler: Scheduler) -> None:
    for framework in scheduler.frameworks.values():
        framework.algorithm.selection.min_rows = 1 << 62  # never build a tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[BenchResult]] = {"incremental": [], "scan": []}
    for _ in range(args.rounds):
        results["incremental"].append(asyncio.run(run_bench(args.nodes, args.pods)))
        results["scan"].append(asyncio.run(run_bench(args.nodes, args.pods, configure=scan_only)))
    medians = {
        name: (
            statistics.median(r.pods_per_second for r in runs),
            statistics.median(r.p50_ms for r in runs),
            statistics.median(r.p99_ms for r in runs),
        )
        for name, runs in results.items()
    }
    for name, (pps, p50, p99) in medians.items():
        print(f"{name:12s} median {pps:9.1f} pods/s  p50 {p50:.4f} ms  p99 {p99:.4f} ms")
    print(f"ratio incremental/scan: {medians['incremental'][0] / medians['scan'][0]:.2f}x pods/s")


if __name__ == "__main__":
    main()
