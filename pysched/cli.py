"""The `pysched` command: simulate, bench, dev-cluster, version.

Bad input ends with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, NoReturn, cast

from pysched import __version__


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _fail(message: str) -> int:
    print(f"pysched: error: {message}", file=sys.stderr)
    return 2


def _write_json(path: str, data: Any) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n")


def cmd_version(args: argparse.Namespace) -> int:
    print(f"pysched {__version__}")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from pysched.framework.config import ConfigError, load_config, merge
    from pysched.plugins import default_registry
    from pysched.profiles import builtin_config
    from pysched.sim.runner import simulate
    from pysched.sim.scenario import builtin_scenario

    registry = default_registry()
    config = builtin_config(registry)
    if args.config:
        try:
            config = merge(config, load_config(args.config, registry))
        except ConfigError as err:
            return _fail(str(err))
    policies = args.policy or [p.scheduler_name for p in config.profiles]
    known = [p.scheduler_name for p in config.profiles]
    for policy in policies:
        if policy not in known:
            return _fail(f"--policy: unknown policy {policy!r} (known: {', '.join(known)})")
    scenario = builtin_scenario(seed=args.seed)
    started = time.perf_counter()
    results = simulate(scenario, config, policies, registry)
    elapsed = time.perf_counter() - started

    title = f"{scenario.name} scenario: {len(scenario.jobs)} jobs on {len(scenario.nodes)} nodes, seed {args.seed}"
    table = Table(title=title, box=box.SIMPLE_HEAD)
    headers = ("policy", "met", "ratio", "JCT s", "queue s", "makespan s", "rescales", "skipped", "left")
    for column in headers:
        table.add_column(column, justify="left" if column == "policy" else "right")
    for name, r in results.items():
        table.add_row(
            name,
            f"{r.deadline_met}/{r.deadline_jobs}",
            f"{r.deadline_met_ratio:.1%}",
            f"{r.mean_jct_s:,.0f}",
            f"{r.mean_queue_s:,.0f}",
            f"{r.makespan_s:,.0f}",
            str(r.rescales),
            str(r.skipped),
            str(r.unfinished),
        )
    console = Console(width=None if sys.stdout.isatty() else 100)
    console.print(table)
    console.print(f"simulated in {elapsed:.1f} s wall time")
    if args.json:
        _write_json(
            args.json,
            {
                "cluster": {"nodes": len(scenario.nodes)},
                "workload": {"name": scenario.name, **scenario.description},
                "policies": {name: r.as_json() for name, r in results.items()},
            },
        )
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from pysched.bench import bench

    if args.nodes < 1 or args.pods < 1:
        return _fail("--nodes and --pods must be positive")
    result = bench(args.nodes, args.pods, args.seed)
    print(json.dumps(result))
    if args.json:
        _write_json(args.json, result)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pysched", description="Deadline-aware scheduler and autoscaler for training jobs on Kubernetes."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=cmd_version)

    simulate = sub.add_parser("simulate", help="replay a workload on the simulated cluster with the real scheduler")
    simulate.add_argument(
        "--config", metavar="FILE", help="a profile file; its profiles become policies by schedulerName"
    )
    simulate.add_argument(
        "--policy", metavar="NAME", action="append", help="a policy (profile) to run; repeatable; default: all"
    )
    simulate.add_argument("--json", metavar="OUT", help="write the simulate JSON here")
    simulate.add_argument("--seed", type=int, default=7, help="seed of the built-in scenario (default 7)")
    simulate.set_defaults(func=cmd_simulate)

    bench = sub.add_parser("bench", help="schedule M pending pods onto N simulated nodes through the full loop")
    bench.add_argument("--nodes", type=int, required=True)
    bench.add_argument("--pods", type=int, required=True)
    bench.add_argument("--seed", type=int, default=1)
    bench.add_argument("--json", metavar="OUT")
    bench.set_defaults(func=cmd_bench)

    from pysched.devcluster import register

    register(cast("argparse._SubParsersAction[argparse.ArgumentParser]", sub))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
