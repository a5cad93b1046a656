"""A bounded soak of `pysched run` with a trend check (perf/README.md, "Soak").

Starts its own etcd + kube-apiserver + kube-controller-manager, fake nodes, the kubelet emulator and
one `pysched run` on the built-in `pysched` profile; creates deadline pods at a steady rate (a share
of them emulated training jobs whose deadline makes Autoscale resize them in place) and deletes each
one once it finished. Every interval it prints one line: the scheduler's RSS and the sizes of its
queues, cache, informer store, Permit waits, event backlog and series and Autoscale's per-job state,
pods bound and alive (--out also writes each as a JSON row). After the churn it waits until every
pod is gone and the structures emptied, then fits a least-squares slope of each size against time
over the second half of the churn. Exit 1 when RSS rises beyond its noise (the counts' slopes are
reported; they are checked exactly after the drain), or when something was left over.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import IO

from pysched.testing.soak import JUDGED, TREND_SIGMAS, Sample, Soak, SoakConfig, Workload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python perf/soak.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=500, help="fake nodes of 8 CPU, 32 Gi, 110 pods (default 500)")
    parser.add_argument("--minutes", type=float, default=15.0, help="churn time (default 15)")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between samples (default 60)")
    parser.add_argument(
        "--rate",
        type=float,
        default=5.0,
        help="pods created per second (default 5: ~600 pods alive, roughly 30%% of 500 nodes' CPUs)",
    )
    parser.add_argument("--training-share", type=float, default=0.2, help="share of training jobs (default 0.2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pod mix (default 0)")
    parser.add_argument("--out", type=Path, metavar="FILE", help="also write every sample and the trends as JSON rows")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.minutes <= 0 or args.interval <= 0 or args.rate <= 0:
        parser.error("--nodes, --minutes, --interval and --rate must be positive")
    if not 0 <= args.training_share <= 1:
        parser.error("--training-share must be between 0 and 1")
    config = SoakConfig(
        nodes=args.nodes,
        churn_seconds=args.minutes * 60,
        interval=args.interval,
        workload=Workload(rate=args.rate, training_share=args.training_share, seed=args.seed),
    )
    out = args.out.open("w") if args.out else None
    try:
        return _soak(config, out)
    finally:
        if out is not None:
            out.close()


def _soak(config: SoakConfig, out: IO[str] | None) -> int:
    def report(sample: Sample) -> None:
        print(sample.line(), flush=True)
        if out is not None:
            print(json.dumps(sample.row()), file=out, flush=True)

    print(
        f"soak: {config.nodes} nodes, {config.workload.rate:g} pods/s for {config.churn_seconds / 60:g} min, "
        f"a sample every {config.interval:g} s",
        flush=True,
    )
    with Soak(config) as soak:
        print(f"started in {soak.started - soak.begun:.0f} s (control plane, nodes, scheduler ready)", flush=True)
        result = soak.run(report)
    print(
        f"\nRSS: {result.warm.rss_mb:.1f} MB after warm-up (t={result.warm.t:.0f} s), "
        f"{result.drained.rss_mb:.1f} MB drained"
    )
    print(
        f"trends over t >= {config.warmup_share * config.churn_seconds:.0f} s "
        f"(rising: slope > {TREND_SIGMAS:g} standard errors and a material rise):"
    )
    for trend in result.trends:
        print("  " + trend.line() + ("" if trend.name in JUDGED else "  (reported; checked exactly when drained)"))
    if out is not None:
        for trend in result.trends:
            print(json.dumps({"trend": dataclasses.asdict(trend)}), file=out)
    if result.errors:
        print(f"{len(result.errors)} failed API calls of the load generator, first: {result.errors[0]}")
    if not result.settled:
        print(f"LEFT OVER after the drain: {result.drained.line()}")
    rising = [t.name for t in result.rising]
    if rising:
        print(f"upward trend beyond noise: {', '.join(rising)}")
    else:
        print("no upward trend beyond noise")
    return 1 if rising or not result.settled else 0


if __name__ == "__main__":
    sys.exit(main())
