"""Crash safety under injected faults: two `pysched run` replicas on one Lease, SIGKILLed at seeded
random moments while deadline jobs run on the kubelet emulator, and the invariants checked after.

The evidence comes from the apiserver, not from the schedulers: an audit log of every
`pods/binding` request (each bind attempt with its HTTP code and arrival time, whichever replica
sent it, killed or not), a watch of the namespace's pods checked at every event (no node ever
overcommitted, counting resizes as kube-scheduler does), the Lease (who took over when), the
events, and the pods at the end. Each replica's `pysched_bind_calls_total` is scraped as well,
and once more just before it is killed.

`run_chaos` is shared by `perf/chaos.py` (the full run) and the integration test (a short one).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from pysched.api.annotations import DEADLINE, TOTAL_STEPS
from pysched.api.resources import CPU, pod_requests, to_scheduler_units
from pysched.api.times import parse_rfc3339
from pysched.testing.controlplane import LocalControlPlane, ManagedProcess, NodeSpec, create_fake_nodes
from pysched.testing.helpers import make_pod
from pysched.testing.kube import JSON, KubeAPI, KubeAPIError, wait_for
from pysched.testing.scheduler import TEST_LABEL, SchedulerProcess, overcommitted, start_scheduler
from pysched.workload.pod import EMULATE_MODEL, EMULATE_NOISE, EMULATE_SEED, EMULATE_TRUTH

TERMINAL = ("Succeeded", "Failed")
AUDIT_LOG = "audit.log"
LEASE_NAME = "pysched-chaos"


@dataclass(frozen=True, slots=True)
class LeaseTimings:
    """`pysched run`'s --lease-duration / --renew-deadline / --retry-period."""

    duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @property
    def takeover_bound(self) -> float:
        """The longest a takeover may take after a SIGKILL: the follower saw the leader's last renewal
        up to one retry period late, waits the lease out, then tries again up to one period later."""
        return self.duration + 2 * self.retry_period

    def args(self) -> list[str]:
        return [
            f"--lease-duration={self.duration:g}",
            f"--renew-deadline={self.renew_deadline:g}",
            f"--retry-period={self.retry_period:g}",
        ]


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    pods: int = 1000
    nodes: int = 8
    node_cpu: int = 8
    kills: int = 20
    seed: int = 1
    lease: LeaseTimings = LeaseTimings(4.0, 3.0, 0.5)
    # Seconds between the previous recovery (a leader again and both replicas ready) and the next kill.
    kill_delay: tuple[float, float] = (0.3, 3.0)
    follower_kill_share: float = 0.2  # the other kills hit the leader
    time_scale: float = 50.0  # emulated seconds per wall second
    progress_interval: float = 120.0  # emulated seconds between the emulator's progress writes
    mean_steps: int = 600  # of 0.6 s on one CPU: 360 emulated s, 7.2 wall s at 50x
    qps: float = 50.0
    event_qps: float = 50.0
    timeout: float = 900.0  # for every pod to be bound, from the first pod created


# -- the apiserver's record of every bind ------------------------------------------------------


def audit_args(workdir: Path) -> list[str]:
    """kube-apiserver flags that log each `pods/binding` create at the Metadata level (the code,
    the pod, the arrival time), written before the response is sent (blocking mode)."""
    policy = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {
                "level": "Metadata",
                "verbs": ["create"],
                "resources": [{"group": "", "resources": ["pods/binding"]}],
            },
            {"level": "None"},
        ],
    }
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "audit-policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    return [f"--audit-policy-file={path}", f"--audit-log-path={workdir / AUDIT_LOG}", "--audit-log-mode=blocking"]


@dataclass(frozen=True, slots=True)
class BindAttempt:
    namespace: str
    pod: str
    code: int
    received: float  # epoch seconds at the apiserver


def read_bind_audit(path: Path, namespace: str) -> list[BindAttempt]:
    """The binds of pods in `namespace` the apiserver answered, in the order it logged them."""
    attempts: list[BindAttempt] = []
    if not path.exists():
        return attempts
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        ref = entry.get("objectRef") or {}
        if ref.get("subresource") != "binding" or entry.get("stage") != "ResponseComplete":
            continue
        if ref.get("namespace") != namespace:
            continue
        received = parse_rfc3339(str(entry.get("requestReceivedTimestamp") or "")) or 0.0
        code = int((entry.get("responseStatus") or {}).get("code") or 0)
        attempts.append(BindAttempt(namespace, str(ref.get("name")), code, received))
    return attempts


# -- the workload --------------------------------------------------------------------------------

# (request, limit) per QoS shape: a resize must keep each one's ratio (Guaranteed: equal; none: none).
SHAPES: tuple[tuple[str, str | None], ...] = (("1", "1"), ("1", "2"), ("1", None), ("2", "2"), ("2", None))


def chaos_pods(namespace: str, scheduler: str, config: ChaosConfig) -> list[JSON]:
    """Seeded deadline jobs on the lstm-like model of t(c) = 0.012 + 0.588 / c s per step.

    Deadlines count from creation and are spread around each pod's expected start (its place in
    the backlog over the cluster's throughput) plus its run time on what it requests: tight ones
    make Autoscale resize running pods up, loose ones on 2 CPUs let it scale down, the rest stay."""
    rng = random.Random(config.seed)
    capacity = config.nodes * config.node_cpu
    run_1cpu = config.mean_steps * 0.6 / config.time_scale  # wall seconds
    per_second = capacity / (run_1cpu * 1.2)  # pods the cluster finishes a second, roughly
    pods: list[JSON] = []
    for i in range(config.pods):
        request, limit = rng.choice(SHAPES)
        steps = max(50, int(rng.uniform(0.3, 1.7) * config.mean_steps))
        t1 = rng.uniform(0.5, 0.7)
        wall = steps * t1 / config.time_scale / float(request)
        deadline = i / per_second + wall * rng.uniform(0.5, 4.0)
        notes = {
            DEADLINE: f"{max(1.0, deadline):.1f}s",
            TOTAL_STEPS: str(steps),
            EMULATE_MODEL: "lstm",
            EMULATE_SEED: str(i),
            EMULATE_TRUTH: f"t1={t1:.4f},f=0.02,p_max=16",
            EMULATE_NOISE: "0.05",
        }
        memory_limit = "256Mi" if limit == request else None if limit is None else "512Mi"
        pod = make_pod(
            f"job-{i:04d}",
            cpu=request,
            memory="256Mi",
            cpu_limit=limit,
            memory_limit=memory_limit,
            scheduler=scheduler,
            annotations=notes,
        )
        pod["spec"]["nodeSelector"] = {TEST_LABEL: namespace}
        if rng.random() < 0.1:  # a few restart on a CPU resize (their progress is lost)
            pod["spec"]["containers"][0]["resizePolicy"][0]["restartPolicy"] = "RestartContainer"
        pods.append(pod)
    return pods


def write_chaos_profile(path: Path, scheduler: str, config: ChaosConfig) -> Path:
    """The built-in `pysched` profile on wall time for jobs running `time_scale` x fast: reconcile
    twice a second, a short cooldown, and a prior so pending jobs are sized before they bind."""
    filters = ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodeResourcesFit"]
    profile = {
        "schedulerName": scheduler,
        "plugins": {
            "queueSort": [{"name": "DeadlineLaxity"}],
            "preEnqueue": [{"name": "DeadlineLaxity"}],
            "filter": [{"name": n} for n in filters],
            "score": [{"name": "UrgencyPlacement", "weight": 2}, {"name": "BalancedAllocation", "weight": 1}],
            "preBind": [{"name": "Autoscale"}],
            "bind": [{"name": "DefaultBinder"}],
            "postBind": [{"name": "Autoscale"}],
            "reconcile": [{"name": "Autoscale"}],
        },
        "pluginConfig": [
            {
                "name": "Autoscale",
                "args": {
                    "intervalSeconds": 0.5,
                    "cooldownSeconds": 2.0,
                    "priorStepSeconds": round(0.6 / config.time_scale, 6),
                },
            }
        ],
    }
    path.write_text(yaml.safe_dump({"profiles": [profile]}))
    return path


# -- the watch: every state the apiserver went through --------------------------------------------


def _resources(container: Mapping[str, Any]) -> JSON:
    res = container.get("resources") or {}
    return {part: dict(res[part]) for part in ("requests", "limits") if res.get(part)}


def _cpu_request(pod: Mapping[str, Any]) -> int:
    container = (pod.get("spec") or {}).get("containers", [{}])[0]
    raw = ((container.get("resources") or {}).get("requests") or {}).get(CPU, "0")
    return to_scheduler_units(CPU, raw)


def _diverged(pod: Mapping[str, Any]) -> bool:
    """A running pod whose containers' actual resources are not (yet) what its spec asks."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    actual = {cs.get("name"): cs.get("resources") or {} for cs in status.get("containerStatuses") or ()}
    return any(_resources(c) != actual.get(c.get("name"), {}) for c in (pod.get("spec") or {}).get("containers", []))


class PodMonitor:
    """Watches the namespace's pods and checks, at every event (resourceVersion order), that no node
    holds more than its allocatable, as kube-scheduler counts requests (a resize in progress counts
    the largest of desired, allocated and actual). Also records binds, in-place resizes of bound
    pods and how long a running pod's actual resources lagged its spec."""

    def __init__(self, kubeconfig: Path, namespace: str, allocatable: Mapping[str, Mapping[str, int]]) -> None:
        self.api = KubeAPI.from_kubeconfig(kubeconfig)
        self.namespace = namespace
        self.allocatable = allocatable
        self.pods: dict[str, JSON] = {}
        self.bound_at: dict[str, float] = {}
        self.moved: list[str] = []  # a pod whose node changed: impossible through the API
        self.overcommits: list[str] = []
        self.resizes_bound = 0  # CPU request changes of bound pods (in place)
        self.resizes_pending = 0  # before binding
        self.diverged_since: dict[str, float] = {}
        self.longest_divergence = 0.0
        self.relists = 0
        self.errors: list[str] = []
        self._used: dict[str, dict[str, int]] = {}
        self._charged: dict[str, tuple[str, Mapping[str, int]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name="chaos-pod-monitor", daemon=True)

    def start(self) -> PodMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            if self._response is not None:
                self._response.shutdown()
        self._thread.join(10)
        self.api.close()

    def bound(self) -> int:
        with self._lock:
            return len(self.bound_at)

    def snapshot(self) -> list[JSON]:
        with self._lock:
            return list(self.pods.values())

    def _set_response(self, resp: Any) -> None:
        self._response = resp

    def _run(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    listing = self.api.get(path)
                    rv = str(listing["metadata"]["resourceVersion"])
                    with self._lock:
                        self.relists += 1
                        for pod in listing.get("items", []):
                            self._apply(pod, deleted=False)
                for event in self.api.watch(
                    path, resource_version=rv, timeout_seconds=30, on_response=self._set_response
                ):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        rv = None if obj.get("code") == 410 else rv
                        break
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        with self._lock:
                            self._apply(obj, deleted=event["type"] == "DELETED")
            except Exception as err:
                if self._stop.is_set():
                    return
                self.errors.append(f"{type(err).__name__}: {err}")
                if isinstance(err, KubeAPIError) and err.status == 410:
                    rv = None
                self._stop.wait(0.2)

    def _apply(self, pod: JSON, *, deleted: bool) -> None:
        name = str(pod["metadata"]["name"])
        old = self.pods.get(name)
        node = (pod.get("spec") or {}).get("nodeName")
        if old is not None:
            old_node = (old.get("spec") or {}).get("nodeName")
            if old_node and node != old_node:
                self.moved.append(f"{name}: {old_node} -> {node}")
            if _cpu_request(old) != _cpu_request(pod):
                if old_node:
                    self.resizes_bound += 1
                else:
                    self.resizes_pending += 1
        if node and name not in self.bound_at:
            self.bound_at[name] = time.time()
        self.pods[name] = pod
        now = time.monotonic()
        if _diverged(pod):
            self.diverged_since.setdefault(name, now)
        elif name in self.diverged_since:
            self.longest_divergence = max(self.longest_divergence, now - self.diverged_since.pop(name))
        self._charge(name, pod, deleted)

    def _charge(self, name: str, pod: JSON, deleted: bool) -> None:
        previous = self._charged.pop(name, None)
        if previous is not None:
            used = self._used[previous[0]]
            for resource, value in previous[1].items():
                used[resource] -= value
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node or deleted or (pod.get("status") or {}).get("phase") in TERMINAL:
            return
        requests = {**pod_requests(pod), "pods": 1}
        self._charged[name] = (node, requests)
        used = self._used.setdefault(node, {})
        allocatable = self.allocatable.get(node, {})
        for resource, value in requests.items():
            used[resource] = used.get(resource, 0) + value
            if used[resource] > allocatable.get(resource, 0) and len(self.overcommits) < 100:
                rv = pod["metadata"].get("resourceVersion")
                self.overcommits.append(
                    f"{node} {resource} {used[resource]} > {allocatable.get(resource, 0)} at rv {rv} ({name})"
                )


# -- the replicas -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Slot:
    """One replica's place: the process now in it and how often it was restarted."""

    label: str
    process: SchedulerProcess
    identity: str
    incarnation: int = 0


@dataclass(frozen=True, slots=True)
class Kill:
    at: float  # epoch seconds
    identity: str
    leader: bool
    new_leader: str | None = None
    acquired: float | None = None  # the new holder's Lease acquireTime
    first_bind: float | None = None  # the first bind the apiserver received after the acquisition

    @property
    def lease_takeover(self) -> float | None:
        return None if self.acquired is None else self.acquired - self.at

    @property
    def bind_takeover(self) -> float | None:
        return None if self.first_bind is None else self.first_bind - self.at


@dataclass(frozen=True, slots=True)
class ChaosReport:
    config: ChaosConfig
    kills: tuple[Kill, ...]
    pods: int
    bound: int
    bind_attempts: int  # audit log: every pods/binding create
    bind_codes: Mapping[str, int]
    metric_binds: Mapping[str, float]  # summed over every incarnation's last scrape
    resizes_bound: int
    resizes_pending: int
    longest_divergence_s: float
    exits: tuple[str, ...]  # replicas that exited without being killed, and why
    reposted_events: int  # `Scheduled` events a new leader posted for pods bound before it led
    duplicate_scheduled_events: int
    elapsed_s: float
    violations: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def takeovers(self, kind: str) -> list[float]:
        values = (k.lease_takeover if kind == "lease" else k.bind_takeover for k in self.kills if k.leader)
        return [v for v in values if v is not None]

    def figures(self) -> dict[str, Any]:
        def spread(values: list[float]) -> dict[str, float | None]:
            return {
                "median": round(statistics.median(values), 2) if values else None,
                "max": round(max(values), 2) if values else None,
            }

        return {
            "pods": self.pods,
            "bound": self.bound,
            "kills": len(self.kills),
            "leader_kills": sum(k.leader for k in self.kills),
            "bind_attempts_audited": self.bind_attempts,
            "bind_codes_audited": dict(self.bind_codes),
            "bind_calls_metrics": dict(self.metric_binds),
            "takeover_lease_s": spread(self.takeovers("lease")),
            "takeover_first_bind_s": spread(self.takeovers("bind")),
            "takeover_bound_s": self.config.lease.takeover_bound,
            "resizes_in_place": self.resizes_bound,
            "resizes_before_bind": self.resizes_pending,
            "longest_resize_lag_s": round(self.longest_divergence_s, 2),
            "replica_exits": list(self.exits),
            "scheduled_events_reposted": self.reposted_events,
            "duplicate_scheduled_events": self.duplicate_scheduled_events,
            "elapsed_s": round(self.elapsed_s, 1),
            "violations": list(self.violations),
            "notes": list(self.notes),
        }

    def to_json(self) -> str:
        data = {
            "config": asdict(self.config),
            "figures": self.figures(),
            "kills": [
                {**asdict(k), "lease_takeover_s": k.lease_takeover, "bind_takeover_s": k.bind_takeover}
                for k in self.kills
            ],
        }
        return json.dumps(data, indent=2)


def leader_and_follower(
    plane: LocalControlPlane, name: str, profile: Path, namespace: str
) -> tuple[SchedulerProcess, SchedulerProcess]:
    """Two `pysched run` replicas on one Lease at the default timings, once both are ready and one
    leads: (leader, follower)."""
    replicas = [
        start_scheduler(plane, f"{name}-{i}", config=profile, leader_elect=True, lease_namespace=namespace, wait=False)
        for i in range(2)
    ]
    try:
        for replica in replicas:
            replica.wait_ready()
        leader = wait_for(
            lambda: [r for r in replicas if r.is_leader()], lambda found: len(found) == 1, what="one leader"
        )[0]
    except BaseException:
        for replica in replicas:
            replica.kill()
        raise
    return leader, next(r for r in replicas if r is not leader)


# -- invariants ---------------------------------------------------------------------------------


def _spec_cpu(container: Mapping[str, Any], part: str) -> int | None:
    raw = ((container.get("resources") or {}).get(part) or {}).get(CPU)
    return None if raw is None else to_scheduler_units(CPU, raw)


def resize_problems(pods: Iterable[Mapping[str, Any]], created: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Resizes applied by halves: a CPU limit that no longer keeps its ratio to the request (or
    appeared, or vanished), or requests != limits on a pod the apiserver classed Guaranteed."""
    problems: list[str] = []
    for pod in pods:
        name = str(pod["metadata"]["name"])
        original = created.get(name)
        if original is None:
            continue
        first = original["spec"]["containers"][0]
        now = pod["spec"]["containers"][0]
        r0, l0 = _spec_cpu(first, "requests"), _spec_cpu(first, "limits")
        r, lim = _spec_cpu(now, "requests"), _spec_cpu(now, "limits")
        if r is None or r0 is None:
            problems.append(f"{name}: cpu request gone")
        elif (l0 is None) != (lim is None):
            problems.append(f"{name}: cpu limit {l0} -> {lim}")
        elif l0 is not None and lim is not None and not (l0 * r <= lim * r0 < (l0 * r) + 10 * r0):
            problems.append(f"{name}: cpu {r0}/{l0} became {r}/{lim}: the limit lost its ratio")
        qos = (pod.get("status") or {}).get("qosClass")
        if qos == "Guaranteed" and _resources(now).get("requests") != _resources(now).get("limits"):
            problems.append(f"{name}: Guaranteed with requests != limits: {_resources(now)}")
    return problems


def pending_that_fit(
    pods: list[JSON], allocatable: Mapping[str, Mapping[str, int]], labels: Mapping[str, str]
) -> list[str]:
    """Pending pods some node has room for now (its selector matched, every request free)."""
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node and pod.get("status", {}).get("phase") not in TERMINAL:
            for resource, value in {**pod_requests(pod), "pods": 1}.items():
                used.setdefault(node, {})[resource] = used.get(node, {}).get(resource, 0) + value
    found: list[str] = []
    for pod in pods:
        if pod["spec"].get("nodeName") or pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        selector = pod["spec"].get("nodeSelector") or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            continue
        need = {**pod_requests(pod), "pods": 1}
        for node, alloc in allocatable.items():
            free = {r: alloc.get(r, 0) - used.get(node, {}).get(r, 0) for r in need}
            if all(free[r] >= v for r, v in need.items()):
                found.append(f"{pod['metadata']['name']} fits {node}")
                break
    return found


def scheduled_events(kube: KubeAPI, namespace: str) -> dict[str, int]:
    """Pod uid -> `Scheduled` events about it (events.k8s.io, paged)."""
    counts: dict[str, int] = {}
    query: dict[str, str] = {"limit": "500"}
    while True:
        page = kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", **query)
        for item in page.get("items", []):
            if item.get("reason") == "Scheduled":
                uid = str((item.get("regarding") or {}).get("uid") or "")
                counts[uid] = counts.get(uid, 0) + 1
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return counts
        query["continue"] = str(cont)


def bind_problems(attempts: list[BindAttempt], bound: Iterable[str]) -> list[str]:
    """From the audit log: no pod bound by two successful binds, no bind refused with 409 (a second
    bind of a bound pod), and every bound pod bound by a bind: one answered 2xx, or one whose answer
    was lost (5xx: the apiserver may have committed it before timing out)."""
    ok: dict[str, int] = {}
    unsure: set[str] = set()
    problems: list[str] = []
    for a in attempts:
        if 200 <= a.code < 300:
            ok[a.pod] = ok.get(a.pod, 0) + 1
        elif a.code == 409:
            problems.append(f"{a.pod}: bind refused with 409 (already bound)")
        elif a.code >= 500:
            unsure.add(a.pod)
        elif a.code != 404:
            problems.append(f"{a.pod}: bind answered {a.code}")
    problems += [f"{pod}: bound by {n} successful binds" for pod, n in ok.items() if n != 1]
    problems += [
        f"{pod}: bound, but by no bind in the audit log" for pod in bound if pod not in ok and pod not in unsure
    ]
    return problems


def reposted_from_logs(paths: Iterable[Path]) -> int:
    """`scheduled events re-posted` lines of the replicas' JSON logs, summed."""
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            for line in path.read_text(errors="replace").splitlines():
                if "scheduled events re-posted" in line:
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        total += int(json.loads(line)["pods"])
    return total


# -- the run ------------------------------------------------------------------------------------


def _until(fetch: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while not fetch():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


class ChaosRun:
    """One run in `namespace` on a started plane whose apiserver audits binds (`start_chaos_plane`)."""

    def __init__(
        self,
        plane: LocalControlPlane,
        namespace: str,
        config: ChaosConfig,
        log: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.plane, self.namespace, self.config, self.log = plane, namespace, config, log
        self.kube: KubeAPI = KubeAPI.from_kubeconfig(plane.kubeconfig_path)
        self.scheduler_name = f"chaos-{namespace}"
        self.rng = random.Random(config.seed)
        self.slots: list[Slot] = []
        self.kills: list[Kill] = []
        self.metric_binds: dict[str, dict[str, float]] = {}  # identity -> result -> last seen
        self.logs: list[Path] = []
        self.notes: list[str] = []
        self.exits: list[str] = []  # replicas that exited without being killed
        self._scraping = threading.Event()

    # replicas
    def _start(self, label: str, incarnation: int) -> Slot:
        identity = f"{self.scheduler_name}-{label}{incarnation}"
        args = [
            *self.config.lease.args(),
            f"--qps={self.config.qps:g}",
            f"--burst={int(self.config.qps * 2)}",
            f"--event-qps={self.config.event_qps:g}",
            f"--event-burst={max(1, int(self.config.event_qps * 2))}",
        ]
        proc = start_scheduler(
            self.plane,
            identity,
            config=self.profile,
            leader_elect=True,
            lease_namespace=self.namespace,
            lease_name=LEASE_NAME,
            args=args,
            wait=False,
        )
        self.logs.append(proc.process.log_path)
        return Slot(label, proc, identity, incarnation)

    def _scrape(self, slot: Slot) -> None:
        found = {
            key.split('result="', 1)[1].rstrip('"}'): value
            for key, value in slot.process.metrics().items()
            if key.startswith("pysched_bind_calls_total{")
        }
        if found:
            self.metric_binds[slot.identity] = found

    def _scrape_loop(self) -> None:
        while not self._scraping.wait(1.0):
            for slot in list(self.slots):
                self._scrape(slot)

    def holder(self) -> tuple[str, float | None]:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{LEASE_NAME}"
        try:
            spec = self.kube.get(path).get("spec") or {}
        except KubeAPIError as err:
            if err.status == 404:
                return "", None
            raise
        return str(spec.get("holderIdentity") or ""), parse_rfc3339(str(spec.get("acquireTime") or ""))

    def _revive(self) -> bool:
        """Restart replicas that exited by themselves (a leader that missed its renew deadline exits
        1, as kube-scheduler does, and its kubelet would restart it); True when none had."""
        quiet = True
        for i, slot in enumerate(self.slots):
            if slot.process.process.alive():
                continue
            quiet = False
            popen = slot.process.process.popen
            code = None if popen is None else popen.returncode
            lost = False
            with contextlib.suppress(OSError):
                lost = "lease lost" in slot.process.process.log_path.read_text(errors="replace")
            self.exits.append(f"{slot.identity} exited with {code}{' after losing the Lease' if lost else ''}")
            self.log(self.exits[-1])
            slot.process.kill()  # only forgets it: it is gone
            self.slots[i] = self._start(slot.label, slot.incarnation + 1)
        return quiet

    def _wait_ready(self, timeout: float = 180.0) -> None:
        """Until both replicas answer /readyz and the Lease is held by one of them."""

        def settled() -> bool:
            alive = self._revive()
            holder = self.holder()[0]
            return (
                alive and all(s.process.ready() for s in self.slots) and any(s.identity == holder for s in self.slots)
            )

        if not _until(settled, timeout, 0.1):
            raise TimeoutError(f"replicas not ready with a leader after {timeout:.0f}s: {self.holder()}")

    def _kill_one(self) -> None:
        self._wait_ready()
        holder, _ = self.holder()
        leader = next((s for s in self.slots if s.identity == holder), None)
        others = [s for s in self.slots if s is not leader]
        pick_follower = leader is None or (others and self.rng.random() < self.config.follower_kill_share)
        target = self.rng.choice(others) if pick_follower else leader
        assert target is not None
        self._scrape(target)
        target.process.kill()
        at = time.time()
        is_leader = target is leader
        self.slots[self.slots.index(target)] = self._start(target.label, target.incarnation + 1)
        kill = Kill(at, target.identity, is_leader)
        if is_leader:
            bound = self.config.lease.takeover_bound
            if _until(lambda: self.holder()[0] not in ("", target.identity), bound + 60.0, 0.05):
                new, acquired = self.holder()
                kill = Kill(at, target.identity, True, new, acquired)
            else:
                self.notes.append(f"no takeover within {bound + 60:.0f}s of the kill of {target.identity}")
        self.kills.append(kill)
        self._wait_ready()
        takeover = "" if kill.lease_takeover is None else f", lease taken over after {kill.lease_takeover:.2f}s"
        self.log(f"kill {len(self.kills)}: {target.identity} ({'leader' if is_leader else 'follower'}){takeover}")

    # the run
    def run(self) -> ChaosReport:
        config = self.config
        started = time.monotonic()
        spec = NodeSpec(
            cpu=str(config.node_cpu), memory=f"{config.node_cpu * 4}Gi", labels={TEST_LABEL: self.namespace}
        )
        nodes = create_fake_nodes(self.kube, config.nodes, spec, prefix=f"{self.namespace}-n")
        room = {**pod_requests({"spec": {"containers": [{"resources": {"requests": spec.resources()}}]}})}
        allocatable = {n: {**room, "pods": int(spec.pods)} for n in nodes}
        self.profile = write_chaos_profile(
            self.plane.workdir / f"{self.namespace}-profile.yaml", self.scheduler_name, config
        )
        emulator = self._start_emulator()
        monitor = PodMonitor(self.plane.kubeconfig_path, self.namespace, allocatable).start()
        scraper = threading.Thread(target=self._scrape_loop, name="chaos-scraper", daemon=True)
        creator: ThreadPoolExecutor | None = None
        try:
            self.slots = [self._start("a", 0), self._start("b", 0)]
            self._wait_ready()
            scraper.start()
            pods = chaos_pods(self.namespace, self.scheduler_name, config)
            created = {p["metadata"]["name"]: p for p in pods}
            creator = ThreadPoolExecutor(max_workers=8)
            creations = [creator.submit(self.kube.create_pod, self.namespace, p) for p in pods]
            deadline = time.monotonic() + config.timeout
            _until(lambda: monitor.bound() > 0, 120.0)
            self.log(f"first bind; {config.kills} kills to go")
            while len(self.kills) < config.kills and monitor.bound() < config.pods and time.monotonic() < deadline:
                # A random moment: the wait is the fault injection itself, not a poll.
                time.sleep(self.rng.uniform(*config.kill_delay))
                if monitor.bound() >= config.pods:
                    break
                self._kill_one()
            for future in creations:
                future.result()
            left = max(1.0, deadline - time.monotonic())
            all_bound = _until(lambda: self._revive() and monitor.bound() >= config.pods, left, 0.2)
            self.log(f"{monitor.bound()} of {config.pods} pods bound after {time.monotonic() - started:.0f}s")
            events_done = _until(lambda: self._events_cover(monitor), 45.0, 0.5) if all_bound else False
            _until(lambda: not self._lagging(monitor), 30.0, 0.2)
            for slot in self.slots:
                self._scrape(slot)
            return self._report(monitor, created, allocatable, spec, all_bound, events_done, started)
        finally:
            self._scraping.set()
            if creator is not None:
                creator.shutdown(wait=True, cancel_futures=True)
            holder = self.holder()[0]
            for slot in sorted(self.slots, key=lambda s: s.identity == holder):  # no handover to a follower
                with contextlib.suppress(Exception):
                    slot.process.stop()
            monitor.stop()
            with contextlib.suppress(Exception):
                emulator.stop(timeout=15)
            if emulator in self.plane.processes:
                self.plane.processes.remove(emulator)
            self.kube.close()

    def _start_emulator(self) -> ManagedProcess:
        argv = [
            sys.executable,
            "-m",
            "pysched.testing.emulator",
            f"--kubeconfig={self.plane.kubeconfig_path}",
            f"--time-scale={self.config.time_scale:g}",
            f"--progress-interval={self.config.progress_interval:g}",
        ]
        return self.plane.spawn(f"emulator-{self.namespace}", argv, env=dict(os.environ))

    def _events_cover(self, monitor: PodMonitor) -> bool:
        uids = {str(p["metadata"]["uid"]) for p in monitor.snapshot() if p["spec"].get("nodeName")}
        return uids <= set(scheduled_events(self.kube, self.namespace))

    @staticmethod
    def _lagging(monitor: PodMonitor) -> list[str]:
        return [str(p["metadata"]["name"]) for p in monitor.snapshot() if _diverged(p)]

    def _report(
        self,
        monitor: PodMonitor,
        created: Mapping[str, JSON],
        allocatable: Mapping[str, Mapping[str, int]],
        spec: NodeSpec,
        all_bound: bool,
        events_done: bool,
        started: float,
    ) -> ChaosReport:
        config = self.config
        pods = self.kube.get(f"/api/v1/namespaces/{self.namespace}/pods").get("items", [])
        bound = [p for p in pods if p["spec"].get("nodeName")]
        attempts = read_bind_audit(self.plane.workdir / AUDIT_LOG, self.namespace)
        violations: list[str] = []
        if not all_bound:
            violations.append(f"only {len(bound)} of {config.pods} pods bound within {config.timeout:.0f}s")
        violations += pending_that_fit(pods, allocatable, {TEST_LABEL: self.namespace, **spec.labels})
        violations += bind_problems(attempts, (p["metadata"]["name"] for p in bound))
        violations += [f"moved: {m}" for m in monitor.moved]
        violations += [f"overcommitted: {o}" for o in monitor.overcommits]
        active = [p for p in pods if p.get("status", {}).get("phase") not in TERMINAL]
        violations += [f"overcommitted at the end: {o}" for o in overcommitted(self.kube, active)]
        violations += resize_problems(pods, created)
        violations += [f"{name}: actual resources never reached the spec" for name in self._lagging(monitor)]
        events = scheduled_events(self.kube, self.namespace)
        missing = [p for p in bound if str(p["metadata"]["uid"]) not in events]
        for pod in missing:
            phase = pod.get("status", {}).get("phase")
            violations.append(f"{pod['metadata']['name']}: bound ({phase}) but no Scheduled event")
        if not events_done and all_bound and not missing:
            self.notes.append("Scheduled events completed only after the wait")
        violations += [f"monitor: {e}" for e in monitor.errors[:5]]
        codes: dict[str, int] = {}
        for a in attempts:
            codes[str(a.code)] = codes.get(str(a.code), 0) + 1
        ends = [k.at for k in self.kills[1:]] + [float("inf")]
        kills = tuple(_with_first_bind(k, attempts, end) for k, end in zip(self.kills, ends, strict=True))
        bound_limit = config.lease.takeover_bound
        self.notes += [
            f"takeover after the kill of {k.identity}: {k.lease_takeover:.2f}s > {bound_limit:g}s"
            for k in kills
            if k.lease_takeover is not None and k.lease_takeover > bound_limit
        ]
        metric_totals: dict[str, float] = {}
        for results in self.metric_binds.values():
            for result, value in results.items():
                metric_totals[result] = metric_totals.get(result, 0.0) + value
        if metric_totals.get("409", 0.0):
            violations.append(f"replicas counted {metric_totals['409']:.0f} binds refused with 409")
        return ChaosReport(
            config=config,
            kills=kills,
            pods=config.pods,
            bound=len(bound),
            bind_attempts=len(attempts),
            bind_codes=codes,
            metric_binds=metric_totals,
            resizes_bound=monitor.resizes_bound,
            resizes_pending=monitor.resizes_pending,
            longest_divergence_s=monitor.longest_divergence,
            exits=tuple(self.exits),
            reposted_events=reposted_from_logs(self.logs),
            duplicate_scheduled_events=sum(n - 1 for n in events.values() if n > 1),
            elapsed_s=time.monotonic() - started,
            violations=tuple(violations),
            notes=tuple(self.notes),
        )


def _with_first_bind(kill: Kill, attempts: list[BindAttempt], end: float) -> Kill:
    """The kill with the first successful bind the apiserver received from the new leader: after
    its acquisition and before the next kill."""
    if kill.acquired is None:
        return kill
    after = [a.received for a in attempts if 200 <= a.code < 300 and kill.acquired <= a.received < end]
    return Kill(kill.at, kill.identity, kill.leader, kill.new_leader, kill.acquired, min(after, default=None))


def start_chaos_plane(workdir: Path, namespace: str, bin_dir: Path | str | None = None) -> LocalControlPlane:
    """A control plane of its own whose apiserver audits every bind, with `namespace` created."""
    plane = LocalControlPlane(workdir, bin_dir=bin_dir, extra_apiserver_args=audit_args(workdir))
    plane.start()
    namespace_body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    plane.api().post("/api/v1/namespaces", namespace_body)
    return plane
