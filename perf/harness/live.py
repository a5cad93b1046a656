"""One live round: a fresh dev cluster (an apiserver without inflight limits or priority and
fairness, no controller manager, as scheduler_perf runs none), the workload's fake nodes, one
scheduler under test, the pods; measured from a watch of the pods.

Batch arrival creates every pod first, then starts the scheduler; a rate starts the scheduler,
then creates the pods at that rate and measures creation to bind. Every round checks that each
pod was bound once and that no node holds more than its allocatable."""

from __future__ import annotations

import dataclasses
import os
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from perf.harness.workload import Workload
from pysched.api.resources import GPU, pod_requests
from pysched.testing.chaos import PodMonitor
from pysched.testing.controlplane import LocalControlPlane, ManagedProcess, NodeSpec, create_fake_nodes
from pysched.testing.kube import KubeAPI
from pysched.testing.scheduler import start_scheduler, write_profile

SCHEDULERS = ("pysched", "kube-scheduler", "raw-bind")
# The schedulerName the pods carry for each scheduler under test.
SCHEDULER_NAMES = {"pysched": "pysched-perf", "kube-scheduler": "default-scheduler", "raw-bind": "raw-bind"}
NAMESPACE = "perf"
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
    scheduled_events: int = 0  # `Scheduled` events in the API EVENTS_GRACE_S after the last bind

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


def _pod(name: str, scheduler_name: str, cpu: str, memory: str, gpu: int) -> dict[str, object]:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {}
    if gpu:
        requests[GPU] = limits[GPU] = str(gpu)
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


def pods_of(workload: Workload, scheduler_name: str) -> list[dict[str, object]]:
    out = []
    for g, group in enumerate(workload.pods):
        for i in range(group.count):
            out.append(_pod(f"p{g}-{i}", scheduler_name, group.cpu, group.memory, group.gpu))
    return out


def _start(plane: LocalControlPlane, scheduler: str, qps: int, burst: int) -> ManagedProcess:
    if scheduler == "pysched":
        profile = write_profile(plane.workdir / "perf-profile.yaml", SCHEDULER_NAMES[scheduler])
        return start_scheduler(plane, "pysched-perf", config=profile, args=[f"--qps={qps}", f"--burst={burst}"]).process
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
    log: Callable[[str], None] = lambda line: None,
) -> RoundResult:
    spec = NodeSpec(
        cpu=workload.nodes.cpu,
        memory=workload.nodes.memory,
        pods=str(workload.nodes.pods),
        gpu=str(workload.nodes.gpu) if workload.nodes.gpu else None,
    )
    pods = pods_of(workload, SCHEDULER_NAMES[scheduler])
    with LocalControlPlane(workdir, bin_dir=bin_dir, controller_manager=False, perf=True) as plane:
        api = plane.api()
        nodes = create_fake_nodes(api, workload.nodes.count, spec, workers=8)
        api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        room = pod_requests({"spec": {"containers": [{"resources": {"requests": spec.resources()}}]}})
        monitor = PodMonitor(
            plane.kubeconfig_path, NAMESPACE, {n: {**room, "pods": workload.nodes.pods} for n in nodes}
        )
        monitor.start()
        created: dict[str, float] = {}
        log(f"{scheduler}: {len(nodes)} nodes up")
        try:
            creator: threading.Thread | None = None
            if workload.rate is None:
                _create_all(plane.kubeconfig_path, pods, created)
                log(f"{scheduler}: {len(pods)} pods created")
            started = time.time()
            process = _start(plane, scheduler, qps, burst)
            if workload.rate is not None:
                creator = threading.Thread(
                    target=_create_at, args=(plane.kubeconfig_path, pods, workload.rate, created), daemon=True
                )
                creator.start()
            budget = MIN_WAIT_S + len(pods) / 20 + (len(pods) / workload.rate if workload.rate else 0.0)
            _wait(lambda: monitor.bound() >= len(pods), budget, process.alive)
            if creator is not None:
                creator.join(60)
            time.sleep(EVENTS_GRACE_S)
            events = _scheduled_events(api)
            cpu, rss = cpu_seconds(process.pid), peak_rss_mb(process.pid)
            by_name = {p.name: p.pid for p in plane.processes}
            apiserver, etcd = cpu_seconds(by_name.get("kube-apiserver", 0)), cpu_seconds(by_name.get("etcd", 0))
            alive = process.alive()
        finally:
            monitor.stop()
    bound_at = dict(monitor.bound_at)
    problems = [*monitor.moved, *monitor.overcommits]
    if not alive:
        problems.append(f"{scheduler} exited before every pod was bound (log: {process.log_path})")
    result = _result(scheduler, len(pods), bound_at, created, started, workload.rate is not None, cpu, rss,
                     apiserver, etcd, problems)  # fmt: skip
    return dataclasses.replace(result, scheduled_events=events)


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
