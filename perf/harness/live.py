"""One live round: a fresh dev cluster (an apiserver without inflight limits or priority and
fairness, no controller manager, as scheduler_perf runs none), the workload's fake nodes (with
`kwok`, nodes KWOK keeps and whose pods it runs), one scheduler under test, the pods; measured
from a watch of the pods.

Batch arrival creates every pod first, then starts the scheduler; a rate starts the scheduler,
then creates the pods at that rate and measures creation to bind. Every round checks that each
pod was bound once, that no node holds more than its allocatable and that the pods' own
constraints held (with KWOK, also that every bound pod ran)."""

from __future__ import annotations

import dataclasses
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perf.harness.workload import Churn, PodGroup, Workload
from pysched.api.annotations import DEADLINE, TOTAL_STEPS
from pysched.api.builders import keep_apart, zone_spread
from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS
from pysched.api.labels import ZONE_LABEL
from pysched.api.resources import CPU, GPU, pod_requests, to_scheduler_units
from pysched.testing.chaos import PodMonitor
from pysched.testing.controlplane import (
    LocalControlPlane,
    ManagedProcess,
    NodeSpec,
    create_fake_node,
    create_fake_nodes,
)
from pysched.testing.kube import KubeAPI
from pysched.testing.kwok import KWOK_NODE_LABELS, start_kwok
from pysched.testing.scheduler import start_scheduler, write_profile

SCHEDULERS = ("pysched", "kube-scheduler", "raw-bind")
# The schedulerName the pods carry for each scheduler under test.
SCHEDULER_NAMES = {"pysched": "pysched-perf", "kube-scheduler": "default-scheduler", "raw-bind": "raw-bind"}
NAMESPACE = "perf"
CHURN_NAMESPACE = "perf-churn"  # churn pods: never watched by the monitor, never bound by the raw binder
CREATORS = 16  # threads creating pods in batch mode
MIN_WAIT_S = 60.0
EVENTS_GRACE_S = 5.0
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class RoundResult:
    scheduler: str
    pods: int
    bound: int
    pods_per_second: float  # first bind to last bind
    pods_per_second_from_start: float  # scheduler start to last bind
    p50_ms: float | None  # creation to bind, rate arrival only
    p99_ms: float | None
    cpu_s: float  # the scheduler's CPU seconds
    peak_rss_mb: float
    apiserver_cpu_s: float
    etcd_cpu_s: float
    problems: tuple[str, ...] = field(default=())
    scheduled_events: int = 0  # `Scheduled` events in the API EVENTS_GRACE_S after the last bind (`_await_events`)
    churn_cycles: int = 0  # churn cycles made while the pods were scheduled
    running: int = 0  # pods Running at the end (only KWOK's nodes run pods)

    @property
    def correct(self) -> bool:
        return not self.problems and self.bound == self.pods


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of a live process (/proc), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


GROUP_LABEL = "perf.pysched.io/group"  # the replicas of one anti-affinity or spread group


def zone_of(index: int, zones: int) -> str | None:
    return f"zone-{index % zones}" if zones else None


def _pod(name: str, scheduler_name: str, group: PodGroup) -> dict[str, object]:
    requests: dict[str, str] = {"cpu": group.cpu, "memory": group.memory}
    limits: dict[str, str] = {}
    if group.gpu:
        requests[GPU] = limits[GPU] = str(group.gpu)
    resources: dict[str, object] = {"requests": requests, **({"limits": limits} if limits else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources}],
        },
    }


def _shape(pod: dict[str, Any], g: int, i: int, group: PodGroup) -> None:
    """The group's constraints on its i-th pod: which replica group, gang or deadline it is in."""
    meta, spec = pod["metadata"], pod["spec"]
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    size = group.anti_affinity or group.spread
    if size:
        labels[GROUP_LABEL] = f"g{g}-{i // size}"
        selector = {"matchLabels": {GROUP_LABEL: labels[GROUP_LABEL]}}
        if group.anti_affinity:
            spec["affinity"] = keep_apart(selector)
        else:
            spec["topologySpreadConstraints"] = zone_spread(selector)
    if group.gang:
        labels[JOB_LABEL] = f"gang-{g}-{i // group.gang}"
        annotations[MIN_MEMBERS] = str(group.gang)
    if group.deadline is not None and group.total_steps is not None:
        annotations[DEADLINE] = group.deadline
        annotations[TOTAL_STEPS] = str(group.total_steps)
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations


def pods_of(workload: Workload, scheduler_name: str) -> list[dict[str, Any]]:
    out = []
    for g, group in enumerate(workload.pods):
        for i in range(group.count):
            pod: dict[str, Any] = _pod(f"p{g}-{i}", scheduler_name, group)
            _shape(pod, g, i, group)
            out.append(pod)
    return out


Placed = tuple[Mapping[str, str], Mapping[str, Any], "str | None"]  # a pod's labels, spec and node


def placed(pod: Mapping[str, Any]) -> Placed:
    spec = pod.get("spec") or {}
    return (pod.get("metadata") or {}).get("labels") or {}, spec, spec.get("nodeName")


def constraint_problems(pods: Iterable[Placed], zones: Mapping[str, str | None]) -> list[str]:
    """What a scheduler that honours the pods' constraints cannot have done: two replicas of an
    anti-affinity group on one node, or a spread group whose zone counts differ by more than its
    maxSkew (every replica bound, every zone open, so the final counts must be within it)."""
    problems: list[str] = []
    per_node: dict[tuple[str, str], int] = {}
    per_zone: dict[str, dict[str, int]] = {}
    every_zone = sorted({zone for zone in zones.values() if zone})
    for labels, spec, node in pods:
        group = labels.get(GROUP_LABEL)
        if group is None or node is None:
            continue
        if (spec.get("affinity") or {}).get("podAntiAffinity"):
            per_node[(group, node)] = per_node.get((group, node), 0) + 1
        if spec.get("topologySpreadConstraints"):
            counts = per_zone.setdefault(group, dict.fromkeys(every_zone, 0))
            zone = zones.get(node)
            if zone is not None:
                counts[zone] = counts.get(zone, 0) + 1
    problems += [f"{n} replicas of {g} on node {node}" for (g, node), n in sorted(per_node.items()) if n > 1]
    for group, counts in sorted(per_zone.items()):
        if counts and max(counts.values()) - min(counts.values()) > 1:
            problems.append(f"spread group {group} has zone counts {counts}")
    return problems


class Churner:
    """scheduler_perf's mixed churn, recreate mode: every `interval` seconds the nodes and pods of
    the cycle before are deleted and new ones made (nodes of the workload's shape, pods no node
    can hold), until stopped. Each node made is added to `allocatable` first, so that the
    monitor counts what lands on it."""

    def __init__(
        self,
        kubeconfig: Path,
        churn: Churn,
        spec: NodeSpec,
        scheduler_name: str,
        allocatable: dict[str, dict[str, int]],
        room: dict[str, int],
    ) -> None:
        self.kubeconfig, self.churn, self.spec = kubeconfig, churn, spec
        self.allocatable, self.room = allocatable, room
        too_big = f"{to_scheduler_units(CPU, spec.cpu) + 1000}m"
        self.pod = _pod("churn", scheduler_name, PodGroup(1, too_big, "128Mi"))
        self.cycles = 0
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="perf-churn", daemon=True)

    def start(self) -> Churner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        api = KubeAPI.from_kubeconfig(self.kubeconfig)
        nodes: list[str] = []
        pods: list[str] = []
        started = time.monotonic()
        try:
            # On a schedule: cycle n starts at n intervals (a slow cycle does not push the next back).
            while not self._stop.wait(max(0.0, started + (self.cycles + 1) * self.churn.interval - time.monotonic())):
                for node in nodes:
                    api.delete(f"/api/v1/nodes/{node}")
                for pod in pods:
                    api.force_delete_pod(CHURN_NAMESPACE, pod)
                n = self.cycles
                nodes = [f"churn-node-{n}-{i}" for i in range(self.churn.nodes)]
                for node in nodes:
                    self.allocatable[node] = self.room
                    create_fake_node(api, node, self.spec)
                pods = [f"churn-pod-{n}-{i}" for i in range(self.churn.pods)]
                for pod in pods:
                    api.create_pod(CHURN_NAMESPACE, {**self.pod, "metadata": {"name": pod}})
                self.cycles += 1
        except Exception as err:  # the round reports it: a churn that stopped measured less
            self.problems.append(f"churn stopped after {self.cycles} cycles: {type(err).__name__}: {err}"[:300])
        finally:
            api.close()


def _create_nodes(api: KubeAPI, workload: Workload, spec: NodeSpec) -> dict[str, str | None]:
    """The workload's fake nodes, zone by zone when it has zones; node name -> its zone."""
    zones = workload.nodes.zones
    if not zones:
        return dict.fromkeys(create_fake_nodes(api, workload.nodes.count, spec, workers=8))
    out: dict[str, str | None] = {}
    for z in range(zones):
        zone = zone_of(z, zones)
        count = len(range(z, workload.nodes.count, zones))
        zoned = dataclasses.replace(spec, labels={**spec.labels, ZONE_LABEL: str(zone)})
        out.update(dict.fromkeys(create_fake_nodes(api, count, zoned, prefix=f"fake-node-{zone}-", workers=8), zone))
    return out


def _start(plane: LocalControlPlane, scheduler: str, qps: int, burst: int, profile: str) -> ManagedProcess:
    if scheduler == "pysched":
        path = write_profile(plane.workdir / "perf-profile.yaml", SCHEDULER_NAMES[scheduler], profile)
        return start_scheduler(plane, "pysched-perf", config=path, args=[f"--qps={qps}", f"--burst={burst}"]).process
    if scheduler == "kube-scheduler":
        return plane.start_kube_scheduler(qps=qps, burst=burst)
    args = [f"--kubeconfig={plane.kubeconfig_path}", f"--namespace={NAMESPACE}", f"--qps={qps}", f"--burst={burst}"]
    return plane.spawn_python(
        "raw-bind", "perf.harness.rawbind", [*args, f"--scheduler-name={SCHEDULER_NAMES[scheduler]}"]
    )


def _create_all(kubeconfig: Path, pods: list[dict[str, object]], created: dict[str, float]) -> None:
    local = threading.local()

    def create(pod: dict[str, object]) -> None:
        api = getattr(local, "api", None)
        if api is None:
            api = local.api = KubeAPI.from_kubeconfig(kubeconfig)
        api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
        created[str(pod["metadata"]["name"])] = time.time()  # type: ignore[index]

    with ThreadPoolExecutor(CREATORS) as pool:
        list(pool.map(create, pods))


def _create_at(kubeconfig: Path, pods: list[dict[str, object]], rate: float, created: dict[str, float]) -> None:
    """One pod every 1/rate s on a schedule (a late creation does not push the next ones back)."""
    api = KubeAPI.from_kubeconfig(kubeconfig)
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        for i, pod in enumerate(pods):
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(_post_timed, api, pod, created)
    api.close()


def _post_timed(api: KubeAPI, pod: dict[str, object], created: dict[str, float]) -> None:
    sent = time.time()
    api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
    created[str(pod["metadata"]["name"])] = sent  # type: ignore[index]


def _wait(done: Callable[[], bool], timeout: float, alive: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline and alive():
        time.sleep(0.05)


def run_round(
    workload: Workload,
    scheduler: str,
    workdir: Path,
    *,
    qps: int = 5000,
    burst: int = 5000,
    bin_dir: Path | None = None,
    kwok: bool = False,
    kwok_bin_dir: Path | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> RoundResult:
    """One round; with `kwok`, KWOK manages the nodes (leases, and the pods bound to them are made
    Running) and the round also checks that every bound pod ran."""
    spec = NodeSpec(
        cpu=workload.nodes.cpu,
        memory=workload.nodes.memory,
        pods=str(workload.nodes.pods),
        gpu=str(workload.nodes.gpu) if workload.nodes.gpu else None,
        labels=KWOK_NODE_LABELS if kwok else {},
    )
    pods = pods_of(workload, SCHEDULER_NAMES[scheduler])
    with LocalControlPlane(workdir, bin_dir=bin_dir, controller_manager=False, perf=True) as plane:
        api = plane.api()
        zones = _create_nodes(api, workload, spec)
        nodes = list(zones)
        kwok_process = None
        if kwok:  # after the nodes have their allocatable: KWOK's stage gives a node without one 1M pods
            kwok_process = start_kwok(plane, kwok_bin_dir)
        for namespace in (NAMESPACE, CHURN_NAMESPACE):
            api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        room = pod_requests({"spec": {"containers": [{"resources": {"requests": spec.resources()}}]}})
        room = {**room, "pods": workload.nodes.pods}
        allocatable = {n: room for n in nodes}
        monitor = PodMonitor(plane.kubeconfig_path, NAMESPACE, allocatable)
        monitor.start()
        churner: Churner | None = None
        created: dict[str, float] = {}
        log(f"{scheduler}: {len(nodes)} nodes up")
        try:
            creator: threading.Thread | None = None
            if workload.rate is None:
                _create_all(plane.kubeconfig_path, pods, created)
                log(f"{scheduler}: {len(pods)} pods created")
            started = time.time()
            process = _start(plane, scheduler, qps, burst, workload.profile)
            if workload.churn is not None:
                name = SCHEDULER_NAMES[scheduler]
                churner = Churner(plane.kubeconfig_path, workload.churn, spec, name, allocatable, room).start()
            if workload.rate is not None:
                creator = threading.Thread(
                    target=_create_at, args=(plane.kubeconfig_path, pods, workload.rate, created), daemon=True
                )
                creator.start()
            budget = MIN_WAIT_S + len(pods) / 20 + (len(pods) / workload.rate if workload.rate else 0.0)
            _wait(lambda: monitor.bound() >= len(pods), budget, process.alive)
            if churner is not None:
                churner.stop()
            if kwok_process is not None:  # KWOK's kubelets lag the binds: the same budget to run every pod
                _wait(lambda: _running(monitor) >= monitor.bound(), budget, kwok_process.alive)
            if creator is not None:
                creator.join(60)
            events = _await_events(api, monitor.bound(), scheduler)
            cpu, rss = cpu_seconds(process.pid), peak_rss_mb(process.pid)
            by_name = {p.name: p.pid for p in plane.processes}
            apiserver, etcd = cpu_seconds(by_name.get("kube-apiserver", 0)), cpu_seconds(by_name.get("etcd", 0))
            alive = process.alive()
        finally:
            if churner is not None:
                churner.stop()
            monitor.stop()
    bound_at = dict(monitor.bound_at)
    problems = [*monitor.moved, *monitor.overcommits, *(churner.problems if churner else ())]
    running = _running(monitor)
    if kwok_process is not None and running < len(bound_at):
        problems.append(f"KWOK ran only {running} of the {len(bound_at)} bound pods (log: {kwok_process.log_path})")
    if scheduler != "raw-bind":  # the ceiling binds round-robin: it promises no constraint
        problems += constraint_problems(map(placed, monitor.snapshot()), zones)
    if not alive:
        problems.append(f"{scheduler} exited before every pod was bound (log: {process.log_path})")
    result = _result(scheduler, len(pods), bound_at, created, started, workload.rate is not None, cpu, rss,
                     apiserver, etcd, problems)  # fmt: skip
    cycles = churner.cycles if churner else 0
    return dataclasses.replace(result, scheduled_events=events, churn_cycles=cycles, running=running)


def _running(monitor: PodMonitor) -> int:
    return sum(1 for pod in monitor.snapshot() if (pod.get("status") or {}).get("phase") == "Running")


def _await_events(api: KubeAPI, bound: int, scheduler: str) -> int:
    """The `Scheduled` events EVENTS_GRACE_S after the last bind: read as soon as every bound pod
    has its own (the count is then what it would be at the end of the grace period, but for a
    repeated one), at once for the raw binder (it posts none)."""
    until = time.monotonic() + EVENTS_GRACE_S
    while True:
        events = _scheduled_events(api)
        if events >= bound or scheduler == "raw-bind" or time.monotonic() >= until:
            return events
        time.sleep(0.25)


def _scheduled_events(api: KubeAPI) -> int:
    """`Scheduled` events of the namespace (events.k8s.io), a series counted as its count."""
    total, query = 0, {"limit": "5000"}
    while True:
        page = api.get(f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events", **query)
        for event in page.get("items") or ():
            if event.get("reason") == "Scheduled":
                total += int((event.get("series") or {}).get("count") or 1)
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return total
        query = {"limit": "5000", "continue": str(token)}


def _result(
    scheduler: str,
    pods: int,
    bound_at: dict[str, float],
    created: dict[str, float],
    started: float,
    timed: bool,
    cpu: float,
    rss: float,
    apiserver: float,
    etcd: float,
    problems: list[str],
) -> RoundResult:
    times = sorted(bound_at.values())
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    p50 = p99 = None
    if timed and bound_at:
        waits = sorted(1000 * (at - created[name]) for name, at in bound_at.items() if name in created)
        if waits:
            p50 = statistics.median(waits)
            p99 = waits[min(len(waits) - 1, int(0.99 * len(waits)))]
    return RoundResult(
        scheduler=scheduler,
        pods=pods,
        bound=len(bound_at),
        pods_per_second=(len(times) - 1) / span if span > 0 else 0.0,
        pods_per_second_from_start=len(times) / (times[-1] - started) if times and times[-1] > started else 0.0,
        p50_ms=p50,
        p99_ms=p99,
        cpu_s=cpu,
        peak_rss_mb=rss,
        apiserver_cpu_s=apiserver,
        etcd_cpu_s=etcd,
        problems=tuple(problems),
    )
