"""``pysched dev-cluster up|down``: a local control plane left running in the background.

``up`` starts etcd, kube-apiserver and kube-controller-manager (unless
``--no-controller-manager``) on loopback (see :mod:`pysched.testing.controlplane`),
writes ``DIR/kubeconfig``, creates fake Ready nodes (with the controller manager,
a heartbeat process renews their Leases so they stay Ready), starts the JobSet
controller (unless ``--no-jobset``; :mod:`pysched.testing.jobset`), optionally starts
the stock kube-scheduler and the kubelet emulator, records every pid in
``DIR/pids.json`` and returns. ``down`` stops every recorded process by pid and
leaves nothing running.

Bad input (busy DIR, missing binaries, port clash, a crashing process) ends with
one line on stderr and exit code 2, after stopping whatever had been started.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from pysched.api.limits import clip
from pysched.cmd.errors import bad_input

PIDS_FILE = "pids.json"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dev-cluster up`` and ``dev-cluster down`` to the CLI."""
    dev = subparsers.add_parser(
        "dev-cluster", help="run a local Kubernetes control plane for development (needs pysched[dev])"
    )
    sub = dev.add_subparsers(dest="dev_cluster_command", required=True)

    up = sub.add_parser(
        "up",
        help="start etcd, kube-apiserver, kube-controller-manager, JobSet and fake nodes in the background",
    )
    up.add_argument("--dir", required=True, help="state folder (kubeconfig, logs, pids)")
    up.add_argument("--nodes", type=int, default=3, help="fake Ready nodes to create (default 3)")
    up.add_argument("--node-cpu", default="8", help="allocatable cpu per node (default 8)")
    up.add_argument("--node-memory", default="32Gi", help="allocatable memory per node (default 32Gi)")
    up.add_argument("--node-gpu", default="0", help="allocatable nvidia.com/gpu per node (default 0)")
    up.add_argument("--node-pods", default="110", help="allocatable pods per node (default 110)")
    up.add_argument("--kube-scheduler", action="store_true", help="also run the stock kube-scheduler")
    up.add_argument(
        "--no-controller-manager",
        action="store_true",
        help="no kube-controller-manager (no Job, Deployment, PV binding or garbage collection; no node heartbeat)",
    )
    up.add_argument(
        "--no-jobset",
        action="store_true",
        help="no JobSet controller (jobset.x-k8s.io JobSets are then neither served nor reconciled)",
    )
    up.add_argument("--emulate", action="store_true", help="also run the kubelet emulator")
    up.add_argument(
        "--emulate-time-scale",
        type=float,
        default=1.0,
        help="emulated seconds per wall second for the emulator's training jobs (default 1)",
    )
    up.add_argument("--apiserver-port", type=int, default=None, help="default: a free port")
    up.add_argument("--etcd-port", type=int, default=None, help="default: a free port")
    up.add_argument("--perf", action="store_true", help="apiserver without inflight limits / APF")
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", help="stop every process started by `up`")
    down.add_argument("--dir", required=True, help="the state folder `up` was given")
    down.set_defaults(func=cmd_down)


def _fail(message: str) -> int:
    return bad_input("pysched dev-cluster", message)


MAX_DEV_NODES = 5_000  # Kubernetes' own tested scale; each is an API object the emulator may watch


def _dir_problem(args: argparse.Namespace) -> str | None:
    """`--dir ''` would be the current folder."""
    from pysched.cmd.flags import empty_problem

    return empty_problem("--dir", args.dir, "a folder name")


def _validate(args: argparse.Namespace) -> str | None:
    from pysched.api.resources import CPU, QuantityError, parse_quantity, to_scheduler_units
    from pysched.cmd.flags import number_problem
    from pysched.testing.emulator import MAX_TIME_SCALE

    if problem := _dir_problem(args) or number_problem("--nodes", args.nodes, 0, MAX_DEV_NODES):
        return problem
    for flag in ("node_cpu", "node_memory", "node_gpu", "node_pods"):
        value = str(getattr(args, flag)).strip()
        name = f"--{flag.replace('_', '-')}"
        try:
            if to_scheduler_units(CPU if flag == "node_cpu" else flag, value) < 0:
                raise QuantityError(value)
        except QuantityError:  # not a quantity, or more than the scheduler counts
            return f"{name} must be a non-negative quantity the scheduler can count, got {clip(value)}"
        # GPUs and pods are counted (the API refuses a node with 0.5 of either, after the plane started)
        if flag in ("node_gpu", "node_pods") and parse_quantity(value) % 1:
            return f"{name} must be a whole number, got {clip(value)}"
    if problem := number_problem("--emulate-time-scale", args.emulate_time_scale, 0, MAX_TIME_SCALE, above=True):
        return problem
    for flag in ("apiserver_port", "etcd_port"):
        port = getattr(args, flag)
        if port is not None and not 1 <= port <= 65535:
            return f"--{flag.replace('_', '-')} must be a TCP port, got {port}"
    return None


def _dev_extra_problem() -> str | None:
    """The control-plane tooling talks to the API through the synchronous client, an extra."""
    from pysched.cmd.flags import extra_problem

    return extra_problem("dev-cluster", "kubernetes", "the kubernetes client", "dev")


def cmd_up(args: argparse.Namespace) -> int:
    problem = _dev_extra_problem() or _validate(args)
    if problem:
        return _fail(problem)
    directory = Path(args.dir).resolve()
    pids_path = directory / PIDS_FILE
    if pids_path.exists():
        return _fail(
            f"{directory} is busy: a dev cluster is recorded there "
            f"(run `pysched dev-cluster down --dir {args.dir}` first)"
        )
    from pysched.testing.controlplane import ControlPlaneError, LocalControlPlane, NodeSpec, find_bin_dir
    from pysched.testing.jobset import find_jobset_bin_dir, start_jobset
    from pysched.testing.kube import KubeAPIError

    need = ["etcd", "kube-apiserver"]
    need += [] if args.no_controller_manager else ["kube-controller-manager"]
    need += ["kube-scheduler"] if args.kube_scheduler else []
    try:
        bin_dir = find_bin_dir(need=need)
        jobset_dir = None if args.no_jobset else find_jobset_bin_dir()
    except ControlPlaneError as err:
        return _fail(str(err))

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return _fail(f"cannot create {directory}: {err}")
    # Left over from a cluster that crashed or was stopped: start from scratch.
    shutil.rmtree(directory / "etcd-data", ignore_errors=True)

    plane = LocalControlPlane(
        directory,
        bin_dir=bin_dir,
        etcd_port=args.etcd_port,
        apiserver_port=args.apiserver_port,
        controller_manager=not args.no_controller_manager,
        perf=args.perf,
        die_with_parent=False,  # they outlive `up` until `down`
    )
    try:
        plane.start()
        if jobset_dir is not None:
            start_jobset(plane, jobset_dir)
        spec = NodeSpec(cpu=args.node_cpu, memory=args.node_memory, pods=args.node_pods, gpu=args.node_gpu)
        if args.nodes:
            plane.create_nodes(args.nodes, spec)
        if args.kube_scheduler:
            plane.start_kube_scheduler()
        if args.emulate:
            plane.spawn_python(
                "emulator",
                "pysched.testing.emulator",
                ["--kubeconfig", str(plane.kubeconfig_path), "--time-scale", repr(args.emulate_time_scale)],
            )
        plane.check()
        records = plane.detach()
    except (ControlPlaneError, KubeAPIError, OSError) as err:
        with contextlib.suppress(Exception):
            plane.stop()
        return _fail(str(err))
    except BaseException:
        with contextlib.suppress(Exception):
            plane.stop()
        raise

    state: dict[str, Any] = {
        "server": plane.server,
        "kubeconfig": str(plane.kubeconfig_path),
        "bin_dir": str(bin_dir),
        "processes": records,
    }
    tmp = pids_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(pids_path)
    print(f"dev cluster up: {plane.server} ({args.nodes} nodes)")
    print(f"export KUBECONFIG={plane.kubeconfig_path}")
    return 0


def _records_problem(records: list[Any]) -> str | None:
    """What makes the recorded processes unsafe to signal: each must name one process other
    than init (0, -1 or a negative pid would signal a group or every process)."""
    from pysched.testing.controlplane import MAX_PID

    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            return f"processes[{i}] is not an object"
        pid, exe, name = rec.get("pid"), rec.get("exe"), rec.get("name")
        if not isinstance(pid, int) or isinstance(pid, bool) or not 1 < pid <= MAX_PID:
            return f"processes[{i}].pid must be a whole number from 2 to {MAX_PID}, not {clip(pid)}"
        if not isinstance(exe, str) or not exe or not isinstance(name, str):
            return f"processes[{i}] needs an exe and a name (strings)"
    return None


def cmd_down(args: argparse.Namespace) -> int:
    if problem := _dir_problem(args) or _dev_extra_problem():
        return _fail(problem)
    from pysched.testing.controlplane import pid_matches, stop_pid

    directory = Path(args.dir).resolve()
    pids_path = directory / PIDS_FILE
    if not pids_path.exists():
        print(
            f"pysched dev-cluster: nothing recorded in {directory}; nothing to stop",
            file=sys.stderr,
        )
        return 0
    try:
        state = json.loads(pids_path.read_text())
        records = list(state["processes"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        return _fail(f"cannot read {pids_path}: {err}")
    if problem := _records_problem(records):
        return _fail(f"{pids_path}: {problem}; nothing was stopped")
    for rec in reversed(records):
        stop_pid(rec["pid"], rec["exe"])
    left = [r for r in records if pid_matches(r["pid"], r["exe"])]
    if left:
        names = ", ".join(f"{r['name']} (pid {r['pid']})" for r in left)
        return _fail(f"still running after stop: {names}")
    pids_path.unlink()
    shutil.rmtree(directory / "etcd-data", ignore_errors=True)
    print(f"dev cluster down: stopped {len(records)} processes")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (``python -m pysched.cmd.devcluster up --dir DIR``)."""
    parser = argparse.ArgumentParser(prog="pysched")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register(subparsers)
    ns = parser.parse_args(["dev-cluster", *(argv if argv is not None else sys.argv[1:])])
    code: int = ns.func(ns)
    return code


if __name__ == "__main__":
    sys.exit(main())
