"""`python -m perf run WORKLOAD`: the workload's rounds, schedulers alternating (A B C A B C), then
medians, ratios measured in the same rounds, a markdown table and (with `--json`) the JSON.

    python -m perf run perf/workloads/basic-1000.yaml --backend live --rounds 3 --json out.json

`python -m perf curve` measures time per pod against node count (perf/harness/curve.py).
`--backend sim` runs pysched alone in process on the simulated cluster (kube-scheduler and the raw
binder need an API server). A bad workload file or scheduler name is one line and exit 2; a round
that fails still reports what it measured, and every process it started is stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from perf.harness.live import SCHEDULERS, RoundResult, run_round
from perf.harness.workload import Workload, WorkloadError, load_workload

FIELDS = (
    "pods_per_second", "pods_per_second_from_start", "p50_ms", "p99_ms", "cpu_s", "peak_rss_mb",
    "apiserver_cpu_s", "etcd_cpu_s", "scheduled_events",
)  # fmt: skip


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def summarise(workload: Workload, backend: str, rounds: dict[str, list[RoundResult]]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for scheduler, runs in rounds.items():
        summary: dict[str, Any] = {key: _median([getattr(r, key) for r in runs]) for key in FIELDS}
        summary["correct"] = all(r.correct for r in runs)
        summary["rounds"] = [{**asdict(r), "correct": r.correct} for r in runs]
        results[scheduler] = summary
    ratios = {}
    if "pysched" in rounds:
        for other in rounds:
            if other != "pysched":
                # per round, then the median: both measured under the same conditions
                same_rounds = zip(rounds["pysched"], rounds[other], strict=False)
                pairs = [a.pods_per_second / b.pods_per_second for a, b in same_rounds if b.pods_per_second > 0]
                ratios[f"pysched/{other}"] = round(statistics.median(pairs), 3) if pairs else None
    return {
        "workload": workload.name,
        "backend": backend,
        "nodes": workload.nodes.count,
        "pods": workload.pod_count,
        "arrival": "batch" if workload.rate is None else f"{workload.rate:g}/s",
        "results": results,
        "ratios": ratios,
    }


def markdown(report: dict[str, Any]) -> str:
    head = (
        f"{report['workload']} ({report['backend']}, {report['nodes']} nodes, {report['pods']} pods, "
        f"{report['arrival']})"
    )
    columns = ("scheduler", "pods/s", "from start", "p50 ms", "p99 ms", "CPU s", "peak RSS MB", "apiserver CPU s",
               "Scheduled events")  # fmt: skip
    lines = [head, "", "| " + " | ".join((*columns, "correct")) + " |", "|---" * (len(columns) + 1) + "|"]

    def cell(value: object) -> str:
        return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

    for name, r in report["results"].items():
        values = [r["pods_per_second"], r["pods_per_second_from_start"], r["p50_ms"], r["p99_ms"], r["cpu_s"],
                  r["peak_rss_mb"], r["apiserver_cpu_s"], r["scheduled_events"], r["correct"]]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(cell(v) for v in values) + " |")
    if report["ratios"]:
        lines += [
            "",
            "ratios (median of per-round ratios): " + ", ".join(f"{k} {cell(v)}" for k, v in report["ratios"].items()),
        ]
    return "\n".join(lines)


def _sim_round(workload: Workload) -> RoundResult:
    from perf.harness.live import constraint_problems, pods_of, zone_of
    from pysched.api.builders import node_dict
    from pysched.api.labels import ZONE_LABEL
    from pysched.backend.simulated import SimulatedCluster
    from pysched.cmd.heap import settled
    from pysched.framework.clock import VirtualClock
    from pysched.plugins import default_registry
    from pysched.plugins.builtin import builtin_config
    from pysched.scheduler.scheduler import Scheduler
    from pysched.scheduler.selection import warm_up

    async def run() -> RoundResult:
        warm_up()  # the kernels compiled or loaded before the clock starts, as `pysched bench` does
        registry = default_registry()
        clock = VirtualClock(1_700_000_000.0)
        cluster = SimulatedCluster(clock, record_events=False)
        extended = {"nvidia.com/gpu": str(workload.nodes.gpu)} if workload.nodes.gpu else None
        zones: dict[str, str | None] = {}
        for i in range(workload.nodes.count):
            zone = zones[f"n{i}"] = zone_of(i, workload.nodes.zones)
            cluster.add_node(node_dict(f"n{i}", cpu=workload.nodes.cpu, memory=workload.nodes.memory,
                                       pods=workload.nodes.pods, extended=extended,
                                       labels={ZONE_LABEL: zone} if zone else None))  # fmt: skip
        scheduler = Scheduler(builtin_config(registry).only(workload.profile), cluster, clock, registry)
        await scheduler.start()
        for pod in pods_of(workload, workload.profile):
            pod["metadata"] = {**pod["metadata"], "namespace": "perf"}
            cluster.create_pod(pod)
        with settled():  # as `pysched bench` and `pysched run` schedule
            started = time.perf_counter()
            await scheduler.run_until_idle()
            seconds = time.perf_counter() - started
        bound = scheduler.stats.scheduled
        await scheduler.stop()
        problems = constraint_problems(
            ((p.labels, p.raw.get("spec") or {}, p.node_name) for p in cluster.pods.values()), zones
        )
        rate = bound / seconds if seconds > 0 else 0.0
        return RoundResult("pysched", workload.pod_count, bound, rate, rate, None, None, 0.0, 0.0, 0.0, 0.0,
                           tuple(problems))  # fmt: skip

    return asyncio.run(run())


def _say(line: str) -> None:
    print(f"  {line}", file=sys.stderr)


def _live_round(workload: Workload, scheduler: str, workdir: Path, **options: Any) -> RoundResult:
    """A round; one that fails midway (its processes stopped by the plane) still reports, as incorrect."""
    try:
        return run_round(workload, scheduler, workdir, **options)
    except Exception as err:  # a broken round must not lose the others' figures
        problem = f"round failed: {type(err).__name__}: {' '.join(str(err).split())[:300]}"
        return RoundResult(scheduler, workload.pod_count, 0, 0.0, 0.0, None, None, 0.0, 0.0, 0.0, 0.0, (problem,))


def plot(report: dict[str, Any], out: Path) -> None:
    """Pods a second per scheduler: each round a dot, the median a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = list(report["results"])
    for i, name in enumerate(names):
        result = report["results"][name]
        ax.bar(i, result["pods_per_second"] or 0.0, color="#9ecae1", edgecolor="#3182bd")
        rates = [r["pods_per_second"] for r in result["rounds"]]
        ax.plot([i] * len(rates), rates, "o", color="#08519c", markersize=4)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("pods bound per second (first to last bind)")
    title = f"{report['workload']}: {report['nodes']} nodes, {report['pods']} pods ({report['backend']})"
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def _client_rates_ok(args: argparse.Namespace) -> bool:
    return bool(1 <= args.qps <= 100_000 and 1 <= args.burst <= 100_000)


def run(args: argparse.Namespace) -> int:
    try:
        workload = load_workload(Path(args.workload))
    except WorkloadError as err:
        print(f"perf: error: {err}", file=sys.stderr)
        return 2
    schedulers = [s for part in args.scheduler for s in part.split(",") if s] or list(SCHEDULERS)
    unknown = [s for s in schedulers if s not in SCHEDULERS]
    if unknown:
        print(f"perf: error: unknown scheduler {unknown[0]!r} (known: {', '.join(SCHEDULERS)})", file=sys.stderr)
        return 2
    if args.backend == "sim" and args.kwok:
        print("perf: error: KWOK runs against an API server only (--backend live)", file=sys.stderr)
        return 2
    if args.kwok and workload.churn is not None:
        # A churn node is made while KWOK runs: its stage may give it KWOK's own allocatable first.
        print("perf: error: churn and --kwok do not go together", file=sys.stderr)
        return 2
    if args.kwok:
        from pysched.testing.controlplane import BinariesNotFound
        from pysched.testing.kwok import find_kwok

        try:
            find_kwok()
        except BinariesNotFound as err:
            print(f"perf: error: {err}", file=sys.stderr)
            return 2
    if args.backend == "sim" and workload.churn is not None:
        print("perf: error: churn runs against an API server only (--backend live)", file=sys.stderr)
        return 2
    if args.backend == "sim" and schedulers != ["pysched"]:
        print("perf: error: --backend sim runs pysched alone (--scheduler pysched)", file=sys.stderr)
        return 2
    if not 1 <= args.rounds <= 50 or not _client_rates_ok(args):
        print("perf: error: --rounds 1 to 50, --qps and --burst 1 to 100000", file=sys.stderr)
        return 2
    rounds: dict[str, list[RoundResult]] = {s: [] for s in schedulers}
    base = Path(args.workdir or tempfile.mkdtemp(prefix="pysched-perf-"))
    for n in range(args.rounds):
        for scheduler in schedulers:  # alternating, so that drift on the machine hits each alike
            if args.backend == "sim":
                result = _sim_round(workload)
            else:
                workdir = base / f"round{n}-{scheduler}"
                result = _live_round(
                    workload, scheduler, workdir, qps=args.qps, burst=args.burst, kwok=args.kwok, log=_say
                )
            rounds[scheduler].append(result)
            verdict = "" if result.correct else f", NOT CORRECT: {'; '.join(result.problems[:3])}"
            said = f"{result.pods_per_second:.1f} pods/s, {result.bound}/{result.pods} bound{verdict}"
            print(f"round {n + 1} {scheduler}: {said}", file=sys.stderr)
    report = summarise(workload, "live-kwok" if args.kwok else args.backend, rounds)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if args.plot:
        plot(report, Path(args.plot))
    print(markdown(report))
    return 0 if all(r["correct"] for r in report["results"].values()) else 1


def curve(args: argparse.Namespace) -> int:
    from perf.harness import curve as scaling

    try:
        node_counts = scaling.sizes(args.nodes)
    except ValueError as err:
        print(f"perf: error: {err}", file=sys.stderr)
        return 2
    backends = [b for part in args.backend for b in part.split(",") if b] or ["sim"]
    schedulers = [s for part in args.scheduler for s in part.split(",") if s] or ["pysched"]
    bad = [b for b in backends if b not in ("sim", "live")] + [s for s in schedulers if s not in SCHEDULERS]
    if bad:
        print(f"perf: error: unknown backend or scheduler {bad[0]!r}", file=sys.stderr)
        return 2
    if not 1 <= args.rounds <= 50 or not 1 <= args.pods_per_node <= 100 or not _client_rates_ok(args):
        print("perf: error: --rounds 1 to 50, --pods-per-node 1 to 100, --qps and --burst 1 to 100000", file=sys.stderr)
        return 2
    # The simulated cluster has no API server for kube-scheduler or the raw binder.
    runs = [(b, s) for b in backends for s in schedulers if b == "live" or s == "pysched"]
    if not runs:
        print("perf: error: nothing to measure: the sim backend runs pysched alone", file=sys.stderr)
        return 2
    base = Path(args.workdir or tempfile.mkdtemp(prefix="pysched-curve-"))

    def one(workload: Workload, backend: str, scheduler: str, n: int) -> RoundResult:
        if backend == "sim":
            return _sim_round(workload)
        workdir = base / f"{workload.name}-round{n}-{scheduler}"
        return _live_round(workload, scheduler, workdir, qps=args.qps, burst=args.burst, log=_say)

    points = scaling.measure(node_counts, args.pods_per_node, runs, args.rounds, one, _say)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(scaling.report(points, args.pods_per_node), indent=2) + "\n")
    if args.plot:
        scaling.plot(points, Path(args.plot))
    print(scaling.markdown(points))
    return 0 if all(p.correct for p in points) else 1


def _live_options(p: argparse.ArgumentParser, rounds: str, writes: str, draws: str) -> None:
    p.add_argument("--rounds", type=int, default=1, help=f"rounds per {rounds}, 1 to 50 (default 1)")
    p.add_argument("--qps", type=int, default=5000, help="every scheduler's client QPS (default 5000)")
    p.add_argument("--burst", type=int, default=5000, help="every scheduler's client burst (default 5000)")
    p.add_argument("--json", metavar="OUT", help=f"write {writes} as JSON here")
    p.add_argument("--plot", metavar="PNG", help=f"write {draws} here (needs matplotlib)")
    p.add_argument("--workdir", metavar="DIR", help="where the dev clusters live (default: a new temporary folder)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf", description="pysched's throughput harness")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run one workload's rounds")
    p.add_argument("workload", help="a workload file (perf/workloads/*.yaml)")
    p.add_argument("--backend", choices=("live", "sim"), default="live", help="default live")
    p.add_argument(
        "--scheduler",
        action="append",
        default=[],
        help=f"repeatable or comma-separated; default: {','.join(SCHEDULERS)}",
    )
    _live_options(p, "scheduler", "the report", "a chart of the rates")
    p.add_argument("--kwok", action="store_true", help="KWOK manages the nodes and runs the bound pods (live)")
    c = sub.add_parser("curve", help="time per pod against node count (the basic shape)")
    c.add_argument("--nodes", default="1000,5000,10000,15000", help="node counts, comma-separated")
    c.add_argument("--pods-per-node", type=int, default=2, help="pods per node, 1 to 100 (default 2)")
    c.add_argument("--backend", action="append", default=[], help="sim and/or live, repeatable (default sim)")
    c.add_argument("--scheduler", action="append", default=[], help="live schedulers (default pysched)")
    _live_options(c, "point", "the points", "the curve")
    args = parser.parse_args(argv)
    return curve(args) if args.command == "curve" else run(args)
