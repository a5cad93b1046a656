"""`pysched run`: the scheduler against a real cluster, as a secondary scheduler.

Start-up order: config and kubeconfig are checked first (a bad one exits 2 with one line), the
ops server comes up (/healthz answers from the start), the numba kernels are compiled or loaded
from their cache, the informers list and start watching (retrying with backoff while the API is
unreachable), and only then /readyz says ok. Every replica keeps warm caches; only the holder of
the Lease schedules. Losing the Lease stops all writes at once and exits 1 (the kubelet restarts
the container as a follower), as kube-scheduler does. SIGTERM finishes in-flight binds, hands the
Lease back and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import ipaddress
import platform
import signal
import socket
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from pysched.backend.live.leader import MAX_IDENTITY_CHARS, LeaseConfig, identity_problem
from pysched.cmd.errors import bad_input
from pysched.cmd.heap import settled
from pysched.cmd.logs import configure_logging
from pysched.framework.incidents import describe

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from pysched.backend.live.client import AsyncKubeClient
    from pysched.backend.live.cluster import LiveCluster
    from pysched.backend.live.leader import LeaderElector
    from pysched.cmd.metrics import SchedulerMetrics
    from pysched.cmd.server import Listener, OpsServer
    from pysched.framework.config import SchedulerConfig
    from pysched.framework.registry import Registry
    from pysched.scheduler.scheduler import Scheduler

EXIT_LOST_LEASE = 1
EXIT_LOOP_FAILED = 1  # the scheduling loop stopped on a bug: the Lease is handed over first
LOOP_STALL_SECONDS = 60.0  # a leader's loop ticks at least every second; this long without one is a hang
SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

log = structlog.get_logger("pysched.cmd.run")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = subparsers.add_parser("run", help="schedule pods of a real cluster (secondary scheduler)")
    run.add_argument("--config", metavar="FILE", help="profile file; default: the built-in profile `pysched`")
    run.add_argument("--kubeconfig", metavar="FILE", help="default: the in-cluster service account")
    run.add_argument("--context", help="kubeconfig context (default: the current one)")
    serving = run.add_argument_group(
        "serving",
        "/healthz, /livez, /readyz and /metrics, as kube-scheduler serves them: HTTPS on --secure-port, where "
        "/metrics needs a bearer token whose user may get /metrics (TokenReview, then SubjectAccessReview) and "
        "the health paths need none. Plain HTTP only with --insecure-bind-address.",
    )
    serving.add_argument(
        "--secure-port", type=int, default=10259, help="HTTPS port (default 10259, as kube-scheduler; 0: no HTTPS)"
    )
    serving.add_argument(
        "--bind-address", metavar="IP", help="IP address of --secure-port (default 0.0.0.0: every interface)"
    )
    serving.add_argument(
        "--tls-cert-file",
        metavar="FILE",
        help="read again each minute (a rotated pair is served); default: a self-signed certificate made at start",
    )
    serving.add_argument("--tls-private-key-file", metavar="FILE", help="the key of --tls-cert-file")
    serving.add_argument(
        "--insecure-bind-address",
        metavar="HOST:PORT",
        help="also serve plain HTTP here, without authentication, e.g. 127.0.0.1:10251 (default: off)",
    )
    run.add_argument("--qps", type=float, default=50.0, help="client QPS to the API server (default 50; 0: no limit)")
    run.add_argument("--burst", type=int, default=100, help="client burst (default 100)")
    run.add_argument("--event-qps", type=float, default=50.0, help="events per second at most (default 50)")
    run.add_argument(
        "--event-burst", type=int, default=100, help="events sent at once after a quiet spell (default 100)"
    )
    run.add_argument("--max-binds-in-flight", type=int, default=64, help="binding cycles running at once (default 64)")
    run.add_argument(
        "--leader-elect", action=argparse.BooleanOptionalAction, default=True,
        help="hold a Lease so that one replica schedules at a time (default on)",
    )  # fmt: skip
    run.add_argument("--lease-name", default="pysched", help="the Lease's name (default pysched)")
    run.add_argument("--lease-namespace", help="default: the pod's namespace in a cluster, else `default`")
    run.add_argument(
        "--lease-duration", type=float, default=15.0, help="seconds a standby waits before taking over (default 15)"
    )
    run.add_argument(
        "--renew-deadline",
        type=float,
        default=10.0,
        help="seconds the leader may fail to renew before it stops (default 10)",
    )
    run.add_argument("--retry-period", type=float, default=2.0, help="seconds between Lease attempts (default 2)")
    run.add_argument(
        "--identity",
        help=f"leader-election identity, 1 to {MAX_IDENTITY_CHARS} printable characters (default: hostname_random)",
    )
    run.add_argument(
        "--log-format", choices=("auto", "json", "console"), default="auto",
        help="auto: console on a terminal, else JSON lines (default auto)",
    )  # fmt: skip
    run.add_argument(
        "--log-level", choices=("debug", "info", "warning", "error"), default="info",
        help="info: one line per decision; debug: also one per scheduling cycle (default info)",
    )  # fmt: skip
    run.set_defaults(func=cmd_run)


def _fail(message: str) -> int:
    return bad_input("pysched run", message)


def _parse_address(text: str) -> tuple[str, int] | None:
    """HOST:PORT as Go's net.SplitHostPort reads it: an IPv6 host in brackets, an empty host for
    every interface; None for anything else (a stray bracket, an IPv6 host without them)."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    if host.startswith("["):
        host = host[1:-1] if host.endswith("]") else ""
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    elif any(c in host for c in ":[]"):
        return None
    return (host or "0.0.0.0", int(port))


def _listeners(args: argparse.Namespace) -> tuple[Listener, ...] | str:
    """The addresses to serve on, with the secure port's TLS context; a message when a flag is bad."""
    from pysched.api.limits import clip
    from pysched.cmd.flags import empty_problem, first_problem
    from pysched.cmd.server import Listener
    from pysched.cmd.tls import CertificateFiles, TLSError, self_signed_context

    found: list[Listener] = []
    if not 0 <= args.secure_port < 65536:
        return f"--secure-port: expected 0 to 65535, got {args.secure_port}"
    bind_address = "0.0.0.0" if args.bind_address is None else args.bind_address
    try:
        ipaddress.ip_address(bind_address)
    except ValueError:
        hint = " (plain HTTP is --insecure-bind-address HOST:PORT)" if ":" in bind_address else ""
        return f"--bind-address: expected the IP address of --secure-port, got {clip(bind_address)}{hint}"
    if (args.tls_cert_file is None) != (args.tls_private_key_file is None):
        return "--tls-cert-file and --tls-private-key-file go together"
    if empty := first_problem(
        empty_problem("--tls-cert-file", args.tls_cert_file, "a file name"),
        empty_problem("--tls-private-key-file", args.tls_private_key_file, "a file name"),
    ):
        return empty
    if not args.secure_port and args.bind_address is not None:
        return "--bind-address is the address of --secure-port, which is 0 (no HTTPS): leave it out or give a port"
    if not args.secure_port and args.tls_cert_file is not None:
        return (
            "--tls-cert-file and --tls-private-key-file serve --secure-port, which is 0 (no HTTPS): "
            "leave them out or give a port"
        )
    if args.secure_port:
        if args.tls_cert_file is None:
            found.append(Listener(bind_address, args.secure_port, self_signed_context([bind_address])))
        else:
            try:
                files = CertificateFiles(args.tls_cert_file, args.tls_private_key_file)
            except TLSError as err:
                return str(err)
            found.append(Listener(bind_address, args.secure_port, files.context, files))
    if args.insecure_bind_address is not None:
        plain = _parse_address(args.insecure_bind_address)
        if plain is None:
            return (
                f"--insecure-bind-address: expected HOST:PORT (an IPv6 host in brackets, [::1]:10251), "
                f"got {clip(args.insecure_bind_address)}"
            )
        found.append(Listener(*plain))
    return tuple(found)


def listen_problem(listeners: Sequence[Listener]) -> str | None:
    """Why the ops server could not listen, found before the API server is contacted: a host that
    does not resolve, a port in use, taken by the other listener or not ours to bind. Every
    address is bound as the server binds it, all at once, then let go (it binds them again a
    moment later)."""
    held: list[socket.socket] = []
    try:
        for listener in listeners:
            where = listener.url()
            try:
                found = socket.getaddrinfo(
                    listener.host, listener.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
                )
            except (OSError, UnicodeError) as err:
                return f"cannot listen on {where}: {getattr(err, 'strerror', None) or err}"
            for family, kind, proto, _, address in found:
                probe = socket.socket(family, kind, proto)
                held.append(probe)
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    probe.bind(address)
                    probe.listen()  # two bound sockets with SO_REUSEADDR clash only once listening
                except OSError as err:
                    if err.errno != errno.EADDRNOTAVAIL:  # a family not enabled: asyncio skips it too
                        # lower case, as asyncio words it (the test harness picks a new port on it)
                        return f"cannot listen on {where}: {(err.strerror or str(err)).lower()}"
    finally:
        for probe in held:
            probe.close()
    return None


def _lease_namespace(args: argparse.Namespace) -> str:
    if args.lease_namespace:
        return str(args.lease_namespace)
    with contextlib.suppress(OSError):
        return SA_NAMESPACE_FILE.read_text().strip() or "default"
    return "default"


def cmd_run(args: argparse.Namespace) -> int:
    from pysched.api.inputs import InputError, load_yaml
    from pysched.cmd.flags import (
        MAX_BINDS_IN_FLIGHT,
        MAX_LEASE_SECONDS,
        MAX_QPS,
        MIN_RETRY_PERIOD_S,
        dns_problem,
        empty_problem,
        first_problem,
        not_a_file,
        number_problem,
    )
    from pysched.framework.config import ConfigError, load_config
    from pysched.plugins import default_registry
    from pysched.plugins.builtin import builtin_config

    listeners = _listeners(args)
    if isinstance(listeners, str):
        return _fail(listeners)
    problem = first_problem(
        number_problem("--qps", args.qps, 0, MAX_QPS),  # 0: no limit
        number_problem("--burst", args.burst, 1, MAX_QPS),
        number_problem("--event-qps", args.event_qps, 0, MAX_QPS),
        number_problem("--event-burst", args.event_burst, 1, MAX_QPS),
        number_problem("--max-binds-in-flight", args.max_binds_in_flight, 1, MAX_BINDS_IN_FLIGHT),
        # the Lease carries whole seconds; past an hour a dead leader would block scheduling that long
        number_problem("--lease-duration", args.lease_duration, 1, MAX_LEASE_SECONDS),
        number_problem("--renew-deadline", args.renew_deadline, 0, MAX_LEASE_SECONDS, above=True),
        number_problem("--retry-period", args.retry_period, MIN_RETRY_PERIOD_S, MAX_LEASE_SECONDS),
    )
    if problem:
        return _fail(problem)
    identity = None if args.identity is None else identity_problem(args.identity)
    names = first_problem(
        empty_problem("--kubeconfig", args.kubeconfig, "a file name"),
        empty_problem("--config", args.config, "a file name"),
        empty_problem("--context", args.context, "a context name"),
        dns_problem("--lease-name", args.lease_name, subdomain=True),
        dns_problem("--lease-namespace", args.lease_namespace) if args.lease_namespace is not None else None,
        None if identity is None else f"--identity: {identity}",
    )
    if names:
        return _fail(names)
    if args.kubeconfig:
        if wrong := not_a_file(args.kubeconfig):
            return _fail(f"--kubeconfig: {args.kubeconfig}: {wrong}")
        try:  # bounded here: the client library would read any file whole
            load_yaml(args.kubeconfig)
        except InputError as err:
            return _fail(f"--kubeconfig: {err}")
    registry = default_registry()
    try:
        if args.config:
            config = load_config(args.config, registry)
        else:
            builtin = builtin_config(registry)
            config = type(builtin)(tuple(p for p in builtin.profiles if p.scheduler_name == "pysched"), builtin.source)
    except ConfigError as err:
        return _fail(str(err))
    except OSError as err:
        return _fail(f"--config: {err}")
    from pysched.sim.command import profile_problem

    if (problem := profile_problem(config, registry)) is not None:
        return _fail(problem)  # before connecting: a crash loop in a Deployment otherwise
    lease = LeaseConfig(
        namespace=_lease_namespace(args),
        name=args.lease_name,
        identity=f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}" if args.identity is None else args.identity,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )
    if args.leader_elect and (problem := lease.problem()):
        return _fail(problem)
    if problem := listen_problem(listeners):  # a bad address fails here, not after connecting
        return _fail(problem)
    configure_logging(args.log_format, args.log_level)
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    return asyncio.run(_serve(args, registry, config, lease if args.leader_elect else None, listeners))


@dataclass(slots=True)
class RunState:
    warmed: bool = False
    leader: bool = False
    shutting_down: bool = False
    lost: bool = False
    failed: str = ""  # why the scheduling loop stopped, when it did
    scheduling: bool = False
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    leading: asyncio.Event = field(default_factory=asyncio.Event)


async def _serve(
    args: argparse.Namespace,
    registry: Registry,
    config: SchedulerConfig,
    lease: LeaseConfig | None,
    listeners: tuple[Listener, ...],
) -> int:
    from pysched.backend.live.client import KubeConfigError, connect
    from pysched.backend.live.cluster import LiveCluster, LiveOptions
    from pysched.backend.live.leader import LeaderElector
    from pysched.backend.live.version import version_problem
    from pysched.cmd.delegated import DelegatedAuth
    from pysched.cmd.metrics import SchedulerMetrics
    from pysched.cmd.server import OpsServer
    from pysched.framework.clock import WallClock
    from pysched.framework.config import unchecked_constraints
    from pysched.plugins.builtin import builtin_config
    from pysched.scheduler.scheduler import Scheduler
    from pysched.scheduler.selection import warm_up

    try:
        client = await connect(args.kubeconfig, qps=args.qps, burst=args.burst, context=args.context)
    except KubeConfigError as err:
        return _fail(str(err))
    version = await client.request("GET", "/version")
    if version.ok and (too_old := version_problem(version.body)) is not None:
        await client.close()
        return _fail(too_old)
    if not version.ok:  # not up yet: the informers wait for it; the version is not checked
        log.warning("API server version not checked", error=version.message())
    for profile, missing in unchecked_constraints(config, builtin_config(registry)):
        log.warning(
            "profile leaves out filters of the default profile: pods stating what they check are refused, "
            "the nodes' taints, cordons and room go unchecked",
            profile=profile,
            filters=missing,
        )
    names = frozenset(p.scheduler_name for p in config.profiles)
    backend = LiveCluster(
        client,
        LiveOptions(scheduler_names=names, event_qps=args.event_qps, event_burst=args.event_burst),
    )
    metrics = SchedulerMetrics()
    clock = WallClock()
    scheduler = Scheduler(
        config,
        backend,
        clock,
        registry,
        max_binds_in_flight=args.max_binds_in_flight,
        observer=metrics,
        log_decisions=True,
        standby=True,  # until it leads: lead_and_schedule
    )
    state = RunState(leader=lease is None)
    elector = LeaderElector(client, lease, lambda leader: _on_leadership(state, leader)) if lease else None
    backend.writable = lambda: state.leader and not state.lost and (elector is None or elector.fresh())
    add_sources(metrics, scheduler, backend, client, state, lease_name=args.lease_name)

    def not_live() -> str | None:
        return liveness_problem(state, clock.now() - scheduler.last_tick)

    def not_ready() -> str | None:
        if (dead := not_live()) is not None:
            return dead
        if not state.warmed:
            return "compiling kernels"
        if (unreachable := client.unreachable()) is not None:
            return f"API server unreachable: {unreachable}"
        if not backend.synced:
            return "informers not synced: " + next((i.last_error for i in backend.informers if i.last_error), "")
        return None

    server = OpsServer(metrics, not_ready, listeners, DelegatedAuth(client), not_live=not_live)
    try:
        await server.start()
    except OSError as err:
        await client.close()
        return _fail(f"cannot listen on {err.strerror or err}")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: _shutdown(state))
    log.info("starting", profiles=sorted(names), leader_elect=lease is not None)  # the server logs its URLs
    try:
        await asyncio.to_thread(warm_up)  # the loop keeps answering /healthz meanwhile
        state.warmed = True
        started = asyncio.create_task(scheduler.start())
        await _until(state.stop, started)
        if not state.stop.is_set():
            with settled() as frozen:  # what the informers listed stays out of the collector's walks
                log.info("ready", nodes=len(backend.nodes), pods=len(backend.pods), frozen_objects=frozen)
                await lead_and_schedule(scheduler, backend, elector, state)
    finally:
        await _teardown(scheduler, backend, elector, server, client, state)
    if state.failed:
        return EXIT_LOOP_FAILED
    return EXIT_LOST_LEASE if state.lost else 0


def liveness_problem(state: RunState, since_tick: float) -> str | None:
    """Why /healthz must fail: the scheduling loop stopped on a bug, or a leader's loop has not
    ticked for LOOP_STALL_SECONDS (an await that never returns); None when healthy."""
    if state.failed:
        return f"the scheduling loop stopped: {state.failed}"
    if state.scheduling and since_tick > LOOP_STALL_SECONDS:
        return f"the scheduling loop has not run for {since_tick:.0f} s"
    return None


def _on_leadership(state: RunState, leader: bool) -> None:
    state.leader = leader
    if leader:
        state.leading.set()
    elif not state.shutting_down:
        state.lost = True  # writes are refused from this instant (backend.writable)
        state.stop.set()


def _shutdown(state: RunState) -> None:
    state.shutting_down = True
    state.stop.set()  # before logging: a signal must stop the run whatever a log write does
    log.info("shutting down")


async def _until(stop: asyncio.Event, task: asyncio.Task[None]) -> None:
    """Wait for `task`, or cancel it when `stop` is set first."""
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def lead_and_schedule(
    scheduler: Scheduler, backend: LiveCluster, elector: LeaderElector | None, state: RunState
) -> None:
    election: asyncio.Task[None] | None = None
    if elector is not None:
        election = asyncio.create_task(elector.run(state.stop))  # renews until stop or loss
        waiters = {asyncio.create_task(state.leading.wait()), asyncio.create_task(state.stop.wait())}
        await asyncio.wait({election, *waiters}, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()
    try:
        if state.leader and not state.stop.is_set():
            log.info("scheduling")
            state.scheduling = True
            scheduler.take_over(await backend.take_over(scheduler.clock.now()))
            await scheduler.run(state.stop)
    except Exception as err:
        # A bug past every per-pod guard: never keep the Lease with a dead loop (the standby
        # could not take over). Health turns red, the Lease is handed back, the process exits.
        state.failed = describe(err)
        log.exception("the scheduling loop stopped; handing the lease over and exiting")
        state.stop.set()
    finally:
        state.scheduling = False
        if election is not None:
            await _until(state.stop, election)


async def _teardown(
    scheduler: Scheduler,
    backend: LiveCluster,
    elector: LeaderElector | None,
    server: OpsServer,
    client: AsyncKubeClient,
    state: RunState,
) -> None:
    if not state.lost:
        await scheduler.stop()  # finish in-flight binds while still the leader
    if elector is not None and not state.lost:
        state.shutting_down = True
        await elector.release()
    await backend.stop()
    await server.stop()
    await client.close()
    log.info("stopped", lost_lease=state.lost, binds=dict(backend.binds))


def add_sources(
    metrics: SchedulerMetrics,
    scheduler: Scheduler,
    backend: LiveCluster,
    client: AsyncKubeClient,
    state: RunState,
    lease_name: str = "pysched",
) -> None:
    """What /metrics shows beside the observer's counters. A standby's queue is never worked and
    its plugins judge nothing: the queue, Permit and plugin families are the leader's only (a
    standby exports none of them rather than numbers that look like a stuck scheduler)."""
    from pysched import __version__
    from pysched.cmd.metrics import counter, gauge, plugin_metrics, queue_metrics

    def leading() -> list[Metric]:
        return [
            *queue_metrics(scheduler),
            gauge(
                "pysched_waiting_pods",
                "Pods held at Permit, assumed on their node, waiting to be allowed.",
                {(): float(len(scheduler.waiting_pods))},
                [],
            ),
            *plugin_metrics(scheduler),
        ]

    def collect() -> list[Metric]:
        api = client.calls
        cache = scheduler.cache
        assumed = len(cache) - len(cache.bound_pods())  # O(pods), paid per scrape only
        return [
            *(leading() if state.leader and not state.lost else ()),
            gauge(
                "pysched_build_info",
                "1, labelled with the version of pysched and of Python it runs on.",
                {(__version__, platform.python_version()): 1.0},
                ["version", "python_version"],
            ),
            counter(
                "pysched_bind_calls",
                "Binding requests sent to the API server, by result.",
                {(result,): float(n) for result, n in backend.binds.items()},
                ["result"],
            ),
            counter(
                "rest_client_requests",
                "Requests to the API server, by HTTP status (0: no answer) and method (client-go's name).",
                {(str(code), verb): float(n) for (verb, code), n in api.items()},
                ["code", "method"],
            ),
            counter(
                "pysched_events_dropped",
                "Events dropped: shed while event writes failed, or past the backlog's memory bound.",
                {(): float(backend.events.dropped)},
                [],
            ),
            gauge(
                "scheduler_cache_size",
                "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
                {("nodes",): float(cache.nodes.count), ("pods",): float(len(cache)), ("assumed_pods",): float(assumed)},
                ["type"],
            ),
            gauge(
                "pysched_informer_objects",
                "Objects the informers hold, by resource.",
                {
                    ("pods",): float(len(backend.pods)),
                    ("nodes",): float(len(backend.nodes)),
                    ("namespaces",): float(len(backend.namespaces)),
                    ("jobs",): float(len(backend.job_created)),
                },
                ["resource"],
            ),
            gauge(
                "pysched_event_backlog",
                "Events (creates and series updates) queued and not yet sent to the API server.",
                {(): float(backend.events.backlog)},
                [],
            ),
            gauge(
                "pysched_event_series",
                "Events remembered to count their repeats as a series (forgotten once quiet for the series window).",
                {(): float(backend.events.series)},
                [],
            ),
            gauge(
                "leader_election_master_status",
                "1 while this replica holds the Lease, else 0 (client-go's name).",
                {(lease_name,): float(state.leader and not state.lost)},
                ["name"],
            ),
            counter(
                "pysched_informer_relists",
                "Full lists after a watch expired (410 Gone), delivered as a diff, by resource.",
                {(i.resource,): float(i.relists) for i in backend.informers},
                ["resource"],
            ),
            counter(
                "pysched_internal_errors",
                "Bugs contained to the pod that hit them (logged with a traceback), by where they were caught.",
                {(stage,): float(n) for stage, n in scheduler.incidents.counts.items()},
                ["stage"],
            ),
        ]

    metrics.add_source(collect)


def main(argv: list[str] | None = None) -> int:
    """`python -m pysched.cmd.run ...`, the same as `pysched run ...`."""
    parser = argparse.ArgumentParser(prog="pysched")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["run", *(argv if argv is not None else sys.argv[1:])])
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
