"""The `pysched` command: simulate, bench, run, status, explain, dev-cluster, version (also `kubectl pysched`).

Bad input ends with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from pysched import __version__
from pysched.cmd.errors import bad_input
from pysched.cmd.flags import (
    clash_problem,
    dns_problem,
    empty_problem,
    extra_problem,
    first_problem,
    not_a_file,
    number_problem,
    output_problem,
    parse_seed,
    write_output,
    write_problem,
)
from pysched.cmd.logs import configure_logging
from pysched.workload.progress import MAX_PROGRESS_INTERVAL_S, MIN_PROGRESS_INTERVAL_S

if TYPE_CHECKING:  # rich and the simulator are imported only by the commands that use them
    from rich.table import Table

    from pysched.sim.runner import PolicyResult


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _fail(message: str) -> int:
    return bad_input("pysched", message)


INTERRUPTED = 130  # the shell's exit code for a process ended by SIGINT


def _write_json(path: str, data: Any) -> None:
    write_output(path, json.dumps(data, indent=2) + "\n")


def _plot_files(folder: str | None) -> list[tuple[str, str | None]]:
    """The files `--plot DIR` writes: another output may go in DIR, just not on one of them."""
    from pysched.sim.plots import PLOT_FILES

    return [("--plot", str(Path(folder) / name)) for name in PLOT_FILES] if folder else []


def cmd_version(args: argparse.Namespace) -> int:
    print(f"pysched {__version__}")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pysched.plugins import default_registry
    from pysched.sim.command import (
        BadInput,
        cluster_summary,
        load_policies,
        load_scenario,
        report_problems,
        run_with_progress,
    )
    from pysched.sim.runner import PolicyStartError
    from pysched.workload.traces import MAX_TRACE_SECONDS as MAX_HORIZON_S

    problem = first_problem(
        empty_problem("--config", args.config, "a file name"),
        empty_problem("--scenario", args.scenario, "a scenario name"),
        empty_problem("--trace", args.trace, "a file name"),
        empty_problem("--catalogue", args.catalogue, "a file name"),
        number_problem("--progress-interval", args.progress_interval, MIN_PROGRESS_INTERVAL_S, MAX_PROGRESS_INTERVAL_S),
        number_problem("--horizon", args.horizon, 1, MAX_HORIZON_S) if args.horizon is not None else None,
        output_problem("--json", args.json) if args.json is not None else None,
        output_problem("--plot", args.plot, folder=True) if args.plot is not None else None,
        *(output_problem(flag, path) for flag, path in _plot_files(args.plot) if path),  # each file too
        extra_problem("--plot", "matplotlib", "matplotlib", "plot") if args.plot else None,
        output_problem("--jobs-csv", args.jobs_csv) if args.jobs_csv is not None else None,
        clash_problem(
            [("--json", args.json), ("--jobs-csv", args.jobs_csv), *_plot_files(args.plot)],
            [
                ("--trace", args.trace),
                ("--config", args.config),
                ("--catalogue", args.catalogue),
                ("--cluster", args.cluster if args.cluster and "=" not in args.cluster else None),
            ],
        ),
    )
    if problem:
        return _fail(problem)
    registry = default_registry()
    config = load_policies(registry, args.config, args.policy)
    if isinstance(config, BadInput):
        return _fail(config.message)
    policies = args.policy or [p.scheduler_name for p in config.profiles]
    scenario = load_scenario(
        scenario=args.scenario,
        trace=args.trace,
        cluster=args.cluster,
        seed=args.seed,
        deadline_rule=args.deadline_rule,
        catalogue_file=args.catalogue,
    )
    if isinstance(scenario, BadInput):
        return _fail(scenario.message)
    report_problems(scenario, args.seed, elastic=args.elastic)
    bad_rows = len(scenario.problems)  # each a job of the workload, its deadline missed
    rows = f" (and {bad_rows} bad row{'s' if bad_rows > 1 else ''})" if bad_rows else ""
    title = f"{scenario.name}: {len(scenario.jobs)} jobs{rows} on {len(scenario.nodes)} nodes, seed {args.seed}"
    console = Console(width=None if sys.stdout.isatty() else 120)
    try:
        results, elapsed = run_with_progress(
            scenario, config, policies, registry, args.seed, args.progress_interval, args.horizon, args.elastic
        )
    except PolicyStartError as err:  # the policies that ran are shown; no output file is half written
        if err.finished:
            console.print(_results_table(title, err.finished))
        return _fail(f"{err} (it was accepted when the run began: did the file change since?)")
    written: list[Path] = []
    try:  # the files first: a reader of the table that stops early (`| head`) must not lose them
        if args.json:
            _write_json(
                args.json,
                {
                    "cluster": cluster_summary(scenario),
                    "workload": {
                        "name": scenario.name,
                        "jobs": len(scenario.jobs),
                        "bad_rows": bad_rows,
                        **scenario.description,
                    },
                    "policies": {name: r.as_json() for name, r in results.items()},
                },
            )
        if args.jobs_csv:
            _write_jobs_csv(args.jobs_csv, results)
        if args.plot:
            from pysched.sim.plots import write_plots

            capacity = cluster_summary(scenario)["cpu"]
            written = list(write_plots(results, args.plot, title, capacity))
    except OSError as err:  # a full disk, a folder removed during the run
        return _fail(write_problem(err))
    console.print(_results_table(title, results))
    console.print(f"simulated in {elapsed:.1f} s wall time")
    for path in written:
        console.print(f"wrote {path}")
    failed = {name: r.internal_errors for name, r in results.items() if r.internal_errors}
    for name, count in failed.items():
        print(
            f"pysched simulate: policy {name} hit {count} internal error{'s' if count > 1 else ''} (logged above), "
            "each contained to its pod: its figures are not to be trusted",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _results_table(title: str, results: Mapping[str, PolicyResult]) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD)
    headers = ("policy", "met", "ratio", "CPU util", "JCT s", "queue s", "makespan s", "rescales", "skipped", "left")
    for column in headers:
        table.add_column(column, justify="left" if column == "policy" else "right")
    for name, r in results.items():
        table.add_row(
            name,
            f"{r.deadline_met}/{r.deadline_jobs}",
            f"{r.deadline_met_ratio:.1%}" if r.deadline_jobs else "-",  # no deadline job: nothing missed
            f"{r.cpu_utilization:.1%}",
            f"{r.mean_jct_s:,.0f}",
            f"{r.mean_queue_s:,.0f}",
            f"{r.makespan_s:,.0f}",
            str(r.rescales),
            str(r.skipped),
            str(r.unfinished),
        )
    return table


def _write_jobs_csv(path: str, results: Mapping[str, Any]) -> None:
    """One row per policy and job (`JobOutcome.CSV_FIELDS` after the policy)."""
    import csv

    from pysched.sim.runner import JobOutcome

    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["policy", *JobOutcome.CSV_FIELDS])
    for name, result in results.items():
        writer.writerows([name, *o.csv_row()] for o in result.outcomes)
    write_output(path, text.getvalue())


def cmd_bench(args: argparse.Namespace) -> int:
    from pysched.cmd.bench import MAX_BENCH_PODS, bench
    from pysched.sim.scenario import MAX_CLUSTER_NODES

    problem = first_problem(
        number_problem("--nodes", args.nodes, 1, MAX_CLUSTER_NODES),
        number_problem("--pods", args.pods, 1, MAX_BENCH_PODS),
        output_problem("--json", args.json) if args.json is not None else None,
    )
    if problem:
        return _fail(problem)
    result = bench(args.nodes, args.pods, args.seed, args.mix)
    if args.json:
        try:
            _write_json(args.json, result)
        except OSError as err:
            return _fail(write_problem(err))
    print(json.dumps(result))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    import asyncio

    from pysched.cmd.status import StatusError, context_namespace, default_kubeconfig, status

    problem = first_problem(
        _client_flags_problem(args),
        number_problem("--interval", args.interval, 0.5, 3600),
        "--namespace and --all-namespaces exclude each other" if args.namespace and args.all_namespaces else None,
        dns_problem("--namespace", args.namespace) if args.namespace is not None else None,
        # a pod's spec.schedulerName is a DNS-1123 subdomain: another name would match no pod
        *(dns_problem("--scheduler", name, subdomain=True) for name in args.scheduler or ()),
    )
    if problem:
        return _fail(problem)
    kubeconfig = (args.kubeconfig,) if args.kubeconfig else default_kubeconfig()
    for path in kubeconfig:
        if wrong := not_a_file(path):
            return bad_input("pysched status", f"kubeconfig {path}: {wrong}")
    namespace = None if args.all_namespaces else args.namespace or context_namespace(kubeconfig, args.context)
    problem = dns_problem("the kubeconfig context's namespace", namespace) if namespace is not None else None
    if problem:
        return _fail(problem)
    schedulers = frozenset(args.scheduler or ("pysched",))
    try:
        return asyncio.run(
            status(kubeconfig, args.context, namespace, schedulers, args.output, args.interval if args.watch else None)
        )
    except StatusError as err:
        return bad_input("pysched status", str(err))
    except KeyboardInterrupt:  # how --watch is ended; before a one-off answer, an interruption
        if args.watch:
            return 0
        print("pysched status: interrupted", file=sys.stderr)
        return INTERRUPTED


def _client_flags_problem(args: argparse.Namespace) -> str | None:
    """`status` and `explain`: an empty --kubeconfig would fall back to $KUBECONFIG, an empty
    --context to the current one."""
    return first_problem(
        empty_problem("--kubeconfig", args.kubeconfig, "a file name"),
        empty_problem("--context", args.context, "a context name"),
    )


def cmd_explain(args: argparse.Namespace) -> int:
    import asyncio

    from pysched.cmd.status import StatusError, context_namespace, default_kubeconfig, explain

    problem = first_problem(
        _client_flags_problem(args),
        dns_problem("POD", args.pod, subdomain=True),
        dns_problem("--namespace", args.namespace) if args.namespace is not None else None,
    )
    if problem:
        return bad_input("pysched explain", problem)
    kubeconfig = (args.kubeconfig,) if args.kubeconfig else default_kubeconfig()
    for path in kubeconfig:
        if wrong := not_a_file(path):
            return bad_input("pysched explain", f"kubeconfig {path}: {wrong}")
    namespace = args.namespace or context_namespace(kubeconfig, args.context)
    problem = dns_problem("the kubeconfig context's namespace", namespace)
    if problem:
        return bad_input("pysched explain", problem)
    try:
        return asyncio.run(explain(kubeconfig, args.context, namespace, args.pod))
    except StatusError as err:
        return bad_input("pysched explain", str(err))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pysched", description="Deadline-aware scheduler and autoscaler for training jobs on Kubernetes."
    )
    parser.add_argument("--version", action="version", version=f"pysched {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=cmd_version)

    simulate = sub.add_parser("simulate", help="replay a workload on the simulated cluster with the real scheduler")
    simulate.add_argument(
        "--config", metavar="FILE", help="a profile file; its profiles become policies by schedulerName"
    )
    simulate.add_argument(
        "--policy", metavar="NAME", action="append", help="a policy (profile) to run; repeatable; default: all"
    )
    workload = simulate.add_mutually_exclusive_group()
    workload.add_argument(
        "--scenario",
        metavar="NAME",
        help="a built-in scenario: small (default), seed-insufficient, seed-sufficient, gpu-mixed, seed-ps, gpu-philly",
    )
    workload.add_argument(
        "--trace",
        metavar="FILE",
        help="a CSV trace (job_id, submission_time, duration or num_iteration, ...) or an .swf file",
    )
    simulate.add_argument(
        "--cluster", metavar="SPEC", help="nodes=8,cpu=32,memory=128Gi,gpu=0 or a YAML of node groups"
    )
    simulate.add_argument("--catalogue", metavar="FILE", help="a model catalogue (YAML) over the built-in one")
    simulate.add_argument(
        "--deadline-rule",
        metavar="LO,HI",
        default="0.5,1.5",
        help="deadline for trace jobs without one: submission + U(LO,HI) x duration, or none (default 0.5,1.5)",
    )
    simulate.add_argument(
        "--progress-interval",
        metavar="SECONDS",
        type=float,
        default=60.0,
        help="how often simulated training writes pysched.io/progress, "
        f"{MIN_PROGRESS_INTERVAL_S:g} to {MAX_PROGRESS_INTERVAL_S:g} (default 60)",
    )
    simulate.add_argument(
        "--horizon",
        metavar="SECONDS",
        type=float,
        help="cut each run off this many virtual seconds after the first submission (jobs still running "
        "count as unfinished); default: run until every job has finished or can never run",
    )
    simulate.add_argument(
        "--elastic",
        action="store_true",
        help="run every GPU job as an elastic job: one-GPU workers of an Indexed Job, 1 to as many as its "
        "model's table offers (within the cluster), starting at its requested GPUs",
    )
    simulate.add_argument("--json", metavar="OUT", help="write the simulate JSON here")
    simulate.add_argument(
        "--plot",
        metavar="DIR",
        help="write PNG charts here (deadline met, CPU over time, JCT CDF); needs pysched[plot]",
    )
    simulate.add_argument(
        "--jobs-csv", metavar="OUT",
        help="write one row per policy and job: submitted, started, finished, deadline, met, request, "
        "rescales, CPU segments (start-end:CPUs, seconds on the workload's clock, a trace's own)",
    )  # fmt: skip
    simulate.add_argument(
        "--seed", type=parse_seed, default=7, help="seed of the workload draws, 0 to 2**32-1 (default 7)"
    )
    simulate.set_defaults(func=cmd_simulate)

    bench = sub.add_parser("bench", help="schedule M pending pods onto N simulated nodes through the full loop")
    bench.add_argument("--nodes", type=int, required=True, help="simulated nodes")
    bench.add_argument("--pods", type=int, required=True, help="pending pods, all created before the first cycle")
    bench.add_argument(
        "--seed", type=parse_seed, default=1, help="seed of the pod and node draws, 0 to 2**32-1 (default 1)"
    )
    bench.add_argument(
        "--mix",
        choices=("plain", "constrained", "gangs"),
        default="plain",
        help="plain: requests, GPUs, selectors, taints; constrained: also a fifth of the pods in groups "
        "with hostname anti-affinity or zone spread; gangs: 4/9 of the pods in jobs of 8 placed all together",
    )
    bench.add_argument("--json", metavar="OUT", help="also write the result here")
    bench.set_defaults(func=cmd_bench)

    status = sub.add_parser(
        "status", help="one row per training job: progress, predicted finish, deadline, slack, state (reads the API)"
    )
    status.add_argument("--kubeconfig", metavar="FILE", help="default: $KUBECONFIG, ~/.kube/config, else in-cluster")
    status.add_argument("--context", help="kubeconfig context (default: the current one)")
    status.add_argument("-n", "--namespace", help="the namespace (default: the context's, else default)")
    status.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    status.add_argument(
        "-o", "--output", choices=("table", "wide", "json", "yaml"), default="table", help="format (default table)"
    )
    status.add_argument("-w", "--watch", action="store_true", help="print again every --interval seconds")
    status.add_argument("--interval", type=float, default=5.0, metavar="SECONDS", help="for --watch (default 5)")
    status.add_argument(
        "--scheduler", action="append", metavar="NAME",
        help="the schedulerName of pysched's pods; repeatable (default pysched)",
    )  # fmt: skip
    status.set_defaults(func=cmd_status)

    explain = sub.add_parser(
        "explain", help="the decision history of a pod's job: its conditions, measured speed and events"
    )
    explain.add_argument("pod", metavar="POD", help="any pod of the job")
    explain.add_argument("--kubeconfig", metavar="FILE", help="default: $KUBECONFIG, ~/.kube/config, else in-cluster")
    explain.add_argument("--context", help="kubeconfig context (default: the current one)")
    explain.add_argument("-n", "--namespace", help="the pod's namespace (default: the context's, else default)")
    explain.set_defaults(func=cmd_explain)

    from pysched.cmd.devcluster import register

    register(cast("argparse._SubParsersAction[argparse.ArgumentParser]", sub))
    from pysched.cmd.learn import register as register_learn

    register_learn(cast("argparse._SubParsersAction[argparse.ArgumentParser]", sub))
    from pysched.cmd.run import register as register_run

    register_run(cast("argparse._SubParsersAction[argparse.ArgumentParser]", sub))
    return parser


def main(argv: list[str] | None = None) -> int:
    if sys.stdout is None:  # started with stdout closed (`>&-`): what it prints goes nowhere
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the whole process
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `pysched`: what it can do
        parser.print_help()
        return 0
    if args.command != "run":  # `run` has its own --log-level and --log-format
        configure_logging("auto", "warning")
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's code for SIGINT, no traceback
        print(f"pysched {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # the reader of stdout left (`| head`): the files were written first
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the exit's flush does not fail again
        return 1  # as rich's console ends then
    return code


def kubectl_main() -> int:
    """`kubectl pysched ...` (kubectl runs `kubectl-pysched` from PATH with the rest of the line)."""
    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
