"""ElasticFlow's own simulator and `pysched simulate` on the same trace, in one table.

ElasticFlow (ASPLOS'23) is not part of this repository: point ELASTICFLOW_DIR at a checkout of
its artifact (the directory holding ElasticFlow/scheduler/scheduler.py) and, if its dependencies
(numpy, cvxpy, grpcio, protobuf 3.x) are not in the default python3, ELASTICFLOW_PYTHON (or
--ef-python) at an interpreter that has them. Each ElasticFlow policy runs as its own process
(`scheduler.py --simulation=True ...` in its scheduler directory), pysched as `python -m pysched
simulate --json`:

    ELASTICFLOW_DIR=/path/to/elasticflow ELASTICFLOW_PYTHON=/path/to/venv/bin/python \\
        .venv/bin/python perf/elasticflow_side_by_side.py --trace 195job [--pysched-arg=--elastic]

A job counts as met only if it finished by its deadline. ElasticFlow's own count (the closing
"accepted jobs: N" of its output) is shown beside the recount from its per-job log (job.csv:
end_time <= ddl), which is the figure the table ranks by; both use every trace job as the
denominator, as pysched's `jobs` does.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

ENV_DIR = "ELASTICFLOW_DIR"
ENV_PYTHON = "ELASTICFLOW_PYTHON"
TRACES = Path(__file__).resolve().parent / "traces" / "elasticflow"


@dataclass(frozen=True)
class Vendored:
    cluster: str  # pysched's --cluster
    slot: int  # ElasticFlow's --scheduling_slot, seconds, as its own scripts run this trace


# The vendored traces: ElasticFlow's cluster shapes; its testbed commands replay the 195-job trace
# with a 240 s slot, its simulation scripts the ITP cluster traces with 60 s.
VENDORED = {
    "195job.csv": Vendored("nodes=16,cpu=64,memory=256Gi,gpu=8", 240),
    "cluster10.csv": Vendored("nodes=32,cpu=64,memory=256Gi,gpu=8", 60),
}
DEFAULT_SLOT = 60
# ElasticFlow's scheduler.py policies (--schedule) and the placement (--scheme) each runs with.
EF_POLICIES = {
    "edf": "elastic",
    "edf-accessctrl": "elastic",
    "ef": "elastic",
    "ef-accessctrl": "elastic",
    "dlas-gpu": "elastic",
    "themis": "elastic",
    "gandiva": "gandiva",
}
DEFAULT_EF_POLICIES = ("edf", "ef-accessctrl")


class InputError(Exception):
    """Bad arguments or environment: one line, exit status 2."""


class RunError(Exception):
    """A simulator failed or wrote what this script cannot read: one line, exit status 1."""


class ElasticFlowFormatError(RunError):
    pass


@dataclass(frozen=True)
class Row:
    policy: str
    side: str
    met: int
    jobs: int
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.met / self.jobs if self.jobs else 0.0


@dataclass(frozen=True)
class ElasticFlowCounts:
    accepted: int  # its own count of jobs that met their deadline
    declined: int
    strict_met: int | None  # recounted from job.csv: end_time <= ddl; None without a job log

    @property
    def jobs(self) -> int:
        return self.accepted + self.declined


_COUNT = re.compile(r"^(accepted|declined) jobs: (-?\d+)\s*$", re.MULTILINE)


def parse_elasticflow_output(stdout: str, job_log: str | None = None) -> ElasticFlowCounts:
    """ElasticFlow's closing "accepted jobs: N" / "declined jobs: M" lines (it prints them every
    round; the last pair is the result), and, given its job.csv, the jobs that finished by their
    deadline (one row per finished job: job_id, end_time, ddl, ...)."""
    last: dict[str, int] = {}
    for match in _COUNT.finditer(stdout):
        last[match.group(1)] = int(match.group(2))
    if "accepted" not in last or "declined" not in last:
        raise ElasticFlowFormatError(
            "ElasticFlow's output is not in a recognised format: no 'accepted jobs: N' and 'declined jobs: N' lines"
        )
    strict: int | None = None
    if job_log is not None:
        reader = csv.DictReader(job_log.splitlines())
        missing = {"job_id", "end_time", "ddl"} - set(reader.fieldnames or ())
        if missing:
            raise ElasticFlowFormatError(
                f"ElasticFlow's job.csv is not in a recognised format: no {', '.join(sorted(missing))} column"
            )
        finished: dict[str, bool] = {}
        try:
            for row in reader:
                finished[row["job_id"]] = float(row["end_time"]) <= float(row["ddl"])
        except (TypeError, ValueError):
            raise ElasticFlowFormatError(
                f"ElasticFlow's job.csv is not in a recognised format: line {reader.line_num}"
            ) from None
        strict = sum(finished.values())
    return ElasticFlowCounts(last["accepted"], last["declined"], strict)


def rows_from_pysched(data: Any) -> list[Row]:
    policies = data.get("policies") if isinstance(data, dict) else None
    if not isinstance(policies, dict) or not policies:
        raise RunError("pysched's --json output has no 'policies' mapping")
    rows = []
    for name, result in policies.items():
        try:
            met, jobs, unfinished = int(result["deadline_met"]), int(result["jobs"]), int(result.get("unfinished", 0))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise RunError(f"pysched's --json output: policy {name}: no deadline_met and jobs counts") from None
        rows.append(Row(str(name), "pysched", met, jobs, f"{unfinished} unfinished" if unfinished else ""))
    return rows


def rigid_bound(trace: Path) -> int | None:
    """Jobs that meet their deadline alone at their requested GPUs, at the trace's own durations
    (submission_time + duration <= deadline); None if the trace lacks those columns."""
    try:
        with trace.open(newline="") as f:
            return sum(
                float(r["submission_time"]) + float(r["duration"]) <= float(r["deadline"]) for r in csv.DictReader(f)
            )
    except (KeyError, TypeError, ValueError, OSError):
        return None


def trace_jobs(trace: Path) -> int:
    try:
        with trace.open(newline="") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames:
                raise InputError(f"--trace: {trace}: no CSV header")
            return sum(1 for _ in reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise InputError(f"--trace: {trace}: {err}") from None


def resolve_trace(value: str) -> Path:
    for candidate in (Path(value), TRACES / value, TRACES / f"{value}.csv"):
        if candidate.is_file():
            return candidate.resolve()
    raise InputError(f"--trace: {value}: no such file (nor {', '.join(sorted(VENDORED))} under {TRACES})")


def elasticflow_scheduler_dir() -> Path:
    raw = os.environ.get(ENV_DIR, "")
    if not raw:
        raise InputError(f"{ENV_DIR} is not set: point it at a checkout of ElasticFlow (holding ElasticFlow/scheduler)")
    root = Path(raw).expanduser()
    for candidate in (root / "ElasticFlow" / "scheduler", root / "scheduler", root):
        if (candidate / "scheduler.py").is_file() and (candidate / "throughputs_A100").is_dir():
            return candidate.resolve()
    raise InputError(f"{ENV_DIR}={raw} is not a checkout of ElasticFlow: no ElasticFlow/scheduler/scheduler.py there")


def elasticflow_cluster(spec: str) -> str:
    """ElasticFlow's cluster_spec CSV for a homogeneous pysched --cluster."""
    from pysched.api.resources import parse_quantity
    from pysched.sim.scenario import parse_cluster

    try:
        nodes = parse_cluster(spec)
    except ValueError as err:
        raise InputError(str(err)) from None
    shapes = set()
    for node in nodes:
        alloc = node["status"]["allocatable"]
        shapes.add((alloc.get("nvidia.com/gpu", "0"), alloc["cpu"], alloc["memory"]))
    if len(shapes) != 1:
        raise InputError(f"--cluster: {spec}: ElasticFlow needs every node alike, this has {len(shapes)} shapes")
    ((gpu, cpu, memory),) = shapes
    gpus, cpus, mem_gb = int(parse_quantity(gpu)), int(parse_quantity(cpu)), int(parse_quantity(memory) / 2**30)
    if gpus < 1 or cpus < 1 or mem_gb < 1:
        raise InputError(f"--cluster: {spec}: ElasticFlow needs at least 1 GPU, 1 CPU and 1 GiB a node")
    header = "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node"
    return f"{header}\n1,{len(nodes)},{gpus},{cpus},{mem_gb}\n"


@dataclass(frozen=True)
class Plan:
    trace: Path
    cluster: str
    slot: int
    pysched_policies: list[str]
    pysched_args: list[str]
    ef_policies: list[str]
    ef_dir: Path
    ef_python: str
    timeout: float
    work: Path
    kept: bool  # the work directory outlives the run (--keep)


def run_pysched(plan: Plan) -> list[Row]:
    out = plan.work / "pysched.json"
    cmd = [sys.executable, "-m", "pysched", "simulate", "--trace", str(plan.trace), "--cluster", plan.cluster]
    for policy in plan.pysched_policies:
        cmd += ["--policy", policy]
    cmd += [*plan.pysched_args, "--json", str(out)]
    proc = _run(cmd, None, plan.work / "pysched.log", plan.timeout)
    if proc != 0:
        raise RunError(f"pysched simulate exited {proc}: {_last_line(plan.work / 'pysched.log')}")
    try:
        return rows_from_pysched(json.loads(out.read_text()))
    except (OSError, ValueError) as err:
        raise RunError(f"pysched's --json output {out}: {err}") from None


def run_elasticflow(plan: Plan, policy: str) -> Row:
    log_dir = plan.work / f"elasticflow-{policy}"
    log_dir.mkdir(parents=True, exist_ok=True)
    spec = plan.work / "elasticflow-cluster.csv"
    cmd = [
        plan.ef_python,
        "scheduler.py",
        f"--cluster_spec={spec}",
        f"--scheme={EF_POLICIES[policy]}",
        f"--trace_file={plan.trace}",
        f"--schedule={policy}",
        f"--log_path={log_dir}",
        "--simulation=True",
        f"--scheduling_slot={plan.slot}",
        "--gpu_type=A100",
    ]
    stdout = log_dir / "stdout.log"
    proc = _run(cmd, plan.ef_dir, stdout, plan.timeout)
    if proc != 0:
        where = f"log: {stdout}" if plan.kept else "--keep DIR keeps its log"
        raise RunError(f"ElasticFlow {policy} exited {proc}: {_last_line(stdout)} ({where})")
    job_csv = log_dir / "job.csv"
    counts = parse_elasticflow_output(
        stdout.read_text(errors="replace"), job_csv.read_text() if job_csv.is_file() else None
    )
    own = f"its own count {counts.accepted}" + (f" ({counts.accepted / counts.jobs:.3f})" if counts.jobs else "")
    if counts.strict_met is None:
        return Row(policy, "ElasticFlow", counts.accepted, counts.jobs, f"{own}; no job.csv to recount")
    late = counts.accepted - counts.strict_met
    if late > 0:
        own += f", {late} of them ended after their deadline in its job.csv"
    return Row(policy, "ElasticFlow", counts.strict_met, counts.jobs, own)


def _run(cmd: list[str], cwd: Path | None, log: Path, timeout: float) -> int:
    with log.open("wb") as out:
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            raise RunError(f"{Path(cmd[1]).name if len(cmd) > 1 else cmd[0]}: over --timeout {timeout:g} s") from None
        except OSError as err:
            raise RunError(f"{cmd[0]}: {err}") from None


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no output"
    return lines[-1].strip()[:300] if lines else "no output"


def format_table(rows: Sequence[Row]) -> str:
    header = ("policy", "side", "met", "jobs", "ratio", "")
    cells = [header] + [(r.policy, r.side, str(r.met), str(r.jobs), f"{r.ratio:.3f}", r.note) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    right = {2, 3, 4}
    lines = []
    for c in cells:
        parts = [c[i].rjust(widths[i]) if i in right else c[i].ljust(widths[i]) for i in range(len(header))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        if "--pysched-arg" in message:
            message += " (an argument that starts with - goes as --pysched-arg=--flag)"
        raise InputError(message)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="195job", help="a trace CSV, or 195job / cluster10 (vendored)")
    parser.add_argument("--cluster", help="pysched's --cluster (default for the vendored traces: ElasticFlow's shape)")
    parser.add_argument(
        "--pysched-policies",
        action="append",
        default=[],
        metavar="NAMES",
        help="pysched policies, comma-separated, repeatable (default: every built-in one)",
    )
    parser.add_argument(
        "--ef-policies",
        action="append",
        default=[],
        metavar="NAMES",
        help=f"ElasticFlow policies, comma-separated, repeatable: {', '.join(EF_POLICIES)} "
        f"(default: {','.join(DEFAULT_EF_POLICIES)})",
    )
    parser.add_argument(
        "--pysched-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for pysched simulate, repeatable: --pysched-arg=--elastic",
    )
    parser.add_argument(
        "--ef-slot",
        type=int,
        metavar="SECONDS",
        help=f"ElasticFlow's --scheduling_slot (default: 240 for 195job, else {DEFAULT_SLOT})",
    )
    parser.add_argument("--ef-python", help=f"the interpreter for ElasticFlow (default: ${ENV_PYTHON}, else python3)")
    parser.add_argument("--parallel", type=int, default=2, help="simulator processes at once (default 2)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds for each run (default 3600)")
    parser.add_argument("--keep", metavar="DIR", help="keep every run's logs and outputs here")
    parser.add_argument("--json", metavar="OUT", help="write the table as JSON here")
    return parser.parse_args(argv)


def _split(values: list[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def make_plan(args: argparse.Namespace, work: Path) -> Plan:
    trace = resolve_trace(args.trace)
    vendored = VENDORED.get(trace.name) if trace.parent == TRACES.resolve() else None
    cluster = args.cluster or (vendored.cluster if vendored else None)
    if not cluster:
        raise InputError(f"--cluster is required for {trace.name} (defaults exist for {', '.join(sorted(VENDORED))})")
    slot = args.ef_slot if args.ef_slot is not None else (vendored.slot if vendored else DEFAULT_SLOT)
    if slot < 1:
        raise InputError(f"--ef-slot: {slot}: must be at least 1")
    if args.parallel < 1:
        raise InputError(f"--parallel: {args.parallel}: must be at least 1")
    if args.timeout <= 0:
        raise InputError(f"--timeout: {args.timeout:g}: must be positive")
    ef_policies = _split(args.ef_policies) or list(DEFAULT_EF_POLICIES)
    unknown = [p for p in ef_policies if p not in EF_POLICIES]
    if unknown:
        raise InputError(f"--ef-policies: {', '.join(unknown)}: not one of {', '.join(EF_POLICIES)}")
    ef_dir = elasticflow_scheduler_dir()
    ef_python = args.ef_python or os.environ.get(ENV_PYTHON) or "python3"
    if shutil.which(ef_python) is None:
        raise InputError(f"--ef-python / {ENV_PYTHON}: {ef_python}: not an executable")
    trace_jobs(trace)  # readable, with a header
    (work / "elasticflow-cluster.csv").write_text(elasticflow_cluster(cluster))
    return Plan(
        trace,
        cluster,
        slot,
        _split(args.pysched_policies),
        list(args.pysched_arg),
        ef_policies,
        ef_dir,
        ef_python,
        args.timeout,
        work,
        kept=bool(args.keep),
    )


def run(plan: Plan, parallel: int) -> list[Row]:
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        ps = pool.submit(run_pysched, plan)
        ef = [pool.submit(run_elasticflow, plan, p) for p in plan.ef_policies]
        try:
            rows = ps.result()
            rows += [f.result() for f in ef]
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # runs not started yet never start
            raise
    bound = rigid_bound(plan.trace)
    if bound is not None:
        rows.append(Row("rigid bound", "trace", bound, trace_jobs(plan.trace), "alone at its requested GPUs"))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    prog = "elasticflow_side_by_side"
    try:
        args = parse_args(argv)
        with tempfile.TemporaryDirectory(prefix="ef-side-") as tmp:
            work = Path(args.keep).resolve() if args.keep else Path(tmp)
            try:
                work.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise InputError(f"--keep: {err}") from None
            plan = make_plan(args, work)
            rows = run(plan, args.parallel)
    except InputError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except RunError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 1
    print(
        f"{plan.trace.name}: pysched --cluster {plan.cluster}; ElasticFlow the same shape, "
        f"--scheduling_slot={plan.slot}, A100 throughputs; met = finished by its deadline"
    )
    print(format_table(rows))
    if args.json:
        payload = {
            "trace": str(plan.trace),
            "cluster": plan.cluster,
            "elasticflow_scheduling_slot": plan.slot,
            "pysched_args": plan.pysched_args,
            "rows": [
                {
                    "policy": r.policy,
                    "side": r.side,
                    "met": r.met,
                    "jobs": r.jobs,
                    "ratio": round(r.ratio, 4),
                    "note": r.note,
                }
                for r in rows
            ],
        }
        try:
            Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
        except OSError as err:
            print(f"{prog}: error: --json: {err}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
