"""What LearnedQueueSort adds to a scheduling cycle: `pysched bench` rounds alternating the
`pysched-noscale` profile (DeadlineLaxity's queue order) and `learned` (the same profile with the
learned order), on one interpreter; the added microseconds per pod from each pair, and their median.

    python perf/learned_sort.py --nodes 5000 --pods 20000 --rounds 6
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics

from pysched.cmd.bench import run_bench


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    asyncio.run(run_bench(200, 500, profile="learned"))  # compile and load once before timing
    added: list[float] = []
    rates: dict[str, list[float]] = {"pysched-noscale": [], "learned": []}
    for _ in range(args.rounds):
        seconds = {}
        for profile in ("pysched-noscale", "learned"):
            result = asyncio.run(run_bench(args.nodes, args.pods, profile=profile))
            seconds[profile] = result.seconds
            rates[profile].append(result.pods_per_second)
        added.append((seconds["learned"] - seconds["pysched-noscale"]) / args.pods * 1e6)
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "pods": args.pods,
                "added_us_per_pod": [round(a, 1) for a in added],
                "median_added_us_per_pod": round(statistics.median(added), 1),
                "median_pods_per_second": {p: statistics.median(r) for p, r in rates.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
