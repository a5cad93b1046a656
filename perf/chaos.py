"""Crash safety at scale: SIGKILL the scheduler's leader again and again while deadline jobs run.

Starts a control plane of its own (etcd + kube-apiserver + kube-controller-manager, the apiserver
auditing every bind), fake nodes, the kubelet emulator (pods run, report training progress, are
resized in place), and two `pysched run` replicas on one Lease. Creates the deadline jobs, then
SIGKILLs the leader (sometimes the follower) at seeded random moments, restarting the killed replica
each time under a new identity, until every pod is bound. Then checks: each pod bound by exactly one
bind and no 409 (audit log and every replica's pysched_bind_calls_total), no node ever overcommitted
(checked at every pod event, resizes counted), no pending pod that fits, no resize half-applied and
actual resources caught up with the spec, a Scheduled event for every bound pod. Prints the figures;
exit status 1 when an invariant broke.

    .venv/bin/python perf/chaos.py [--pods 1000] [--kills 20] [--seed 1] [--json chaos.json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from pysched.testing.chaos import ChaosConfig, ChaosRun, LeaseTimings, start_chaos_plane

NAMESPACE = "chaos"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = ChaosConfig()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=defaults.pods, help="deadline jobs (default %(default)s)")
    parser.add_argument("--nodes", type=int, default=defaults.nodes, help="fake nodes (default %(default)s)")
    parser.add_argument("--node-cpu", type=int, default=defaults.node_cpu, help="CPUs per node (default %(default)s)")
    parser.add_argument("--kills", type=int, default=defaults.kills, help="SIGKILLs (default %(default)s)")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="workload and kill moments (default 1)")
    parser.add_argument(
        "--follower-kill-share",
        type=float,
        default=defaults.follower_kill_share,
        help="share of kills aimed at the follower instead of the leader (default %(default)s)",
    )
    lease = defaults.lease
    parser.add_argument("--lease-duration", type=float, default=lease.duration, help="default %(default)s s")
    parser.add_argument("--renew-deadline", type=float, default=lease.renew_deadline, help="default %(default)s s")
    parser.add_argument("--retry-period", type=float, default=lease.retry_period, help="default %(default)s s")
    parser.add_argument(
        "--kill-delay",
        type=float,
        nargs=2,
        default=defaults.kill_delay,
        metavar=("MIN", "MAX"),
        help="seconds from a recovery to the next kill, drawn uniformly (default %(default)s)",
    )
    parser.add_argument(
        "--time-scale", type=float, default=defaults.time_scale, help="emulated s per wall s (default %(default)s)"
    )
    parser.add_argument("--timeout", type=float, default=defaults.timeout, help="for every pod bound (default 900 s)")
    parser.add_argument("--json", type=Path, help="also write the figures and every kill here")
    parser.add_argument("--workdir", type=Path, help="keep the plane's files (logs, audit log) here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = ChaosConfig(
        pods=args.pods,
        nodes=args.nodes,
        node_cpu=args.node_cpu,
        kills=args.kills,
        seed=args.seed,
        lease=LeaseTimings(args.lease_duration, args.renew_deadline, args.retry_period),
        kill_delay=(args.kill_delay[0], args.kill_delay[1]),
        follower_kill_share=args.follower_kill_share,
        time_scale=args.time_scale,
        timeout=args.timeout,
    )
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pysched-chaos-"))
    begun = time.monotonic()

    def log(line: str) -> None:
        print(f"[{time.monotonic() - begun:6.1f}s] {line}", flush=True)

    log(f"control plane in {workdir}")
    plane = start_chaos_plane(workdir, NAMESPACE)
    try:
        report = ChaosRun(plane, NAMESPACE, config, log).run()
    finally:
        plane.stop()
    figures = report.figures()
    for key, value in figures.items():
        if key not in ("violations", "notes"):
            print(f"{key:28s} {value}")
    for note in report.notes:
        print(f"note: {note}")
    for violation in report.violations:
        print(f"VIOLATION: {violation}")
    if args.json is not None:
        args.json.write_text(report.to_json() + "\n")
    short = len(report.kills) < config.kills
    if short:
        print(f"only {len(report.kills)} of {config.kills} kills: every pod was bound first")
    return 1 if report.violations else 2 if short else 0


if __name__ == "__main__":
    sys.exit(main())
