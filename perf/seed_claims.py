"""The founding paper's claims over many seeds, not only the built-in scenarios' default one.

For each seed, runs `seed-insufficient` (default and pysched-noscale: the ordering claim, bar 1.26x)
and `seed-sufficient` (pysched: every deadline met with spare capacity, bar 0.95), exactly as
`pysched simulate --scenario NAME --seed S` does, and prints the medians and how many seeds reach
each bar. Seeds 1000-1049 by default (never used to choose any default):

    python perf/seed_claims.py [--first 1000] [--count 50] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys

from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.sim.runner import run_policy
from pysched.sim.scenario import builtin_scenario

ORDERING_BAR = 1.26  # pysched-noscale / default on seed-insufficient
SUFFICIENT_BAR = 0.95  # pysched's deadline-met ratio on seed-sufficient


def ratio(scenario: str, policy: str, seed: int) -> float:
    registry = default_registry()
    config = builtin_config(registry)
    result = asyncio.run(run_policy(builtin_scenario(seed, scenario), config, policy, registry, seed=seed))
    return result.deadline_met_ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first", type=int, default=1000)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)
    if not 1 <= args.count <= 10_000:
        parser.error("--count: must be 1 to 10000")
    rows = []
    for seed in range(args.first, args.first + args.count):
        default = ratio("seed-insufficient", "default", seed)
        noscale = ratio("seed-insufficient", "pysched-noscale", seed)
        met = ratio("seed-sufficient", "pysched", seed)
        ordering = noscale / default if default > 0 else float("inf")
        rows.append({"seed": seed, "default": default, "noscale": noscale, "ordering": ordering, "pysched": met})
        print(f"seed {seed}: noscale/default {ordering:.3f}  pysched on seed-sufficient {met:.3f}", flush=True)
    orderings = [r["ordering"] for r in rows]
    sufficient = [r["pysched"] for r in rows]
    summary = {
        "seeds": f"{args.first}-{args.first + args.count - 1}",
        "ordering_median": round(statistics.median(orderings), 3),
        "ordering_reaching_bar": sum(1 for o in orderings if o >= ORDERING_BAR),
        "sufficient_median": round(statistics.median(sufficient), 3),
        "sufficient_reaching_bar": sum(1 for s in sufficient if s >= SUFFICIENT_BAR),
        "count": len(rows),
    }
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"summary": summary, "seeds": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
