"""A workload file: the nodes, the pods and how they arrive, read through a bounded parser.

    name: basic-1000
    nodes: {count: 1000, cpu: "32", memory: 256Gi, pods: 110, gpu: 0, zones: 0}
    pods:
      - {count: 5000, cpu: 100m, memory: 128Mi, gpu: 0}
    arrival: batch            # or {rate: 100}: pods a second, created while the scheduler runs
    profile: default          # pysched's built-in profile under test: default or pysched
    churn: {interval: 1, nodes: 1, pods: 10}   # optional, live only (below)

A pod group may also shape its pods: `antiAffinity: N` (replicas in groups of N that keep apart by
hostname, required), `spread: N` (groups of N spread over the nodes' zones, maxSkew 1,
DoNotSchedule; needs `nodes.zones`), `gang: N` (pysched jobs of N pods placed all together:
`pysched.io/job` and `pysched.io/min-members`; other schedulers place them one by one), and
`deadline: 2h` with `totalSteps: 10000` (deadline jobs: annotations the pysched profile reads).

`churn`, as scheduler_perf's mixed churn: every `interval` seconds while the measured pods are
scheduled, the nodes and pods the last cycle made are deleted and new ones made: `nodes` nodes of
the workload's shape, and `pods` pods no node can hold (in a namespace of their own, never
counted), so the scheduler under test keeps seeing node events and failing pods.

Every value is checked (a count in range, a quantity the scheduler can count, no unknown key);
a bad file is a `WorkloadError` with one line naming the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysched.api.annotations import parse_duration
from pysched.api.inputs import load_yaml
from pysched.api.resources import CPU, QuantityError, to_scheduler_units

MAX_NODES = 20_000
MAX_PODS = 200_000
MAX_RATE = 10_000.0
NODE_KEYS = frozenset({"count", "cpu", "memory", "pods", "gpu", "zones"})
POD_KEYS = frozenset({"count", "cpu", "memory", "gpu", "antiAffinity", "spread", "gang", "deadline", "totalSteps"})
TOP_KEYS = frozenset({"name", "nodes", "pods", "arrival", "profile", "churn"})
CHURN_KEYS = frozenset({"interval", "nodes", "pods"})
PROFILES = ("default", "pysched")
MAX_ZONES = 64
MAX_GROUP = 1000  # replicas in one anti-affinity, spread or gang group


class WorkloadError(ValueError):
    """A workload file that cannot be run: one line for the user."""


@dataclass(frozen=True, slots=True)
class Nodes:
    count: int
    cpu: str
    memory: str
    pods: int
    gpu: int = 0
    zones: int = 0  # topology.kubernetes.io/zone values, node i in zone i % zones; 0: unlabelled


@dataclass(frozen=True, slots=True)
class PodGroup:
    count: int
    cpu: str
    memory: str
    gpu: int = 0
    anti_affinity: int = 0  # replicas per group keeping apart by hostname; 0: none
    spread: int = 0  # replicas per group spread over zones; 0: none
    gang: int = 0  # pods per pysched job placed all together; 0: none
    deadline: str | None = None  # pysched.io/deadline (a duration)
    total_steps: int | None = None  # pysched.io/total-steps


@dataclass(frozen=True, slots=True)
class Churn:
    interval: float  # seconds between cycles
    nodes: int  # nodes made (and deleted the next cycle) per cycle
    pods: int  # unschedulable pods made (and deleted the next cycle) per cycle


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    nodes: Nodes
    pods: tuple[PodGroup, ...]
    rate: float | None = None  # pods a second while the scheduler runs; None: all created first
    profile: str = "default"
    churn: Churn | None = None

    @property
    def pod_count(self) -> int:
        return sum(group.count for group in self.pods)


def _mapping(value: object, where: str, keys: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise WorkloadError(f"{where}: must be a mapping")
    unknown = sorted(str(k) for k in value if k not in keys)
    if unknown:
        raise WorkloadError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(keys))})")
    return value


def _count(value: object, where: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise WorkloadError(f"{where}: must be a whole number from {low} to {high}, got {value!r}")
    return value


def _quantity(value: object, where: str, resource: str) -> str:
    text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    try:
        if not text or to_scheduler_units(resource, text) <= 0:
            raise QuantityError(text)
    except QuantityError:
        raise WorkloadError(f"{where}: must be a positive quantity such as 100m, 2 or 1Gi, got {value!r}") from None
    return text


def parse_workload(raw: object, default_name: str = "workload") -> Workload:
    top = _mapping(raw, "workload", TOP_KEYS)
    name = top.get("name", default_name)
    if not isinstance(name, str) or not 0 < len(name) <= 63:
        raise WorkloadError(f"name: must be a short string, got {name!r}")
    if "nodes" not in top or "pods" not in top:
        raise WorkloadError("workload: needs `nodes` and `pods`")
    node = _mapping(top["nodes"], "nodes", NODE_KEYS)
    nodes = Nodes(
        count=_count(node.get("count"), "nodes.count", 1, MAX_NODES),
        cpu=_quantity(node.get("cpu", "32"), "nodes.cpu", CPU),
        memory=_quantity(node.get("memory", "256Gi"), "nodes.memory", "memory"),
        pods=_count(node.get("pods", 110), "nodes.pods", 1, 10_000),
        gpu=_count(node.get("gpu", 0), "nodes.gpu", 0, 64),
        zones=_count(node.get("zones", 0), "nodes.zones", 0, MAX_ZONES),
    )
    raw_pods = top["pods"]
    if not isinstance(raw_pods, list) or not 1 <= len(raw_pods) <= 16:
        raise WorkloadError("pods: must be a list of 1 to 16 pod groups")
    groups = []
    for i, entry in enumerate(raw_pods):
        where = f"pods[{i}]"
        pod = _mapping(entry, where, POD_KEYS)
        group = PodGroup(
            count=_count(pod.get("count"), f"{where}.count", 1, MAX_PODS),
            cpu=_quantity(pod.get("cpu", "100m"), f"{where}.cpu", CPU),
            memory=_quantity(pod.get("memory", "128Mi"), f"{where}.memory", "memory"),
            gpu=_count(pod.get("gpu", 0), f"{where}.gpu", 0, 64),
            anti_affinity=_count(pod.get("antiAffinity", 0), f"{where}.antiAffinity", 0, MAX_GROUP),
            spread=_count(pod.get("spread", 0), f"{where}.spread", 0, MAX_GROUP),
            gang=_count(pod.get("gang", 0), f"{where}.gang", 0, MAX_GROUP),
            deadline=_duration(pod.get("deadline"), f"{where}.deadline"),
            total_steps=None if "totalSteps" not in pod else _count(pod["totalSteps"], f"{where}.totalSteps", 1, 10**9),
        )
        if group.gpu > nodes.gpu:
            raise WorkloadError(f"{where}.gpu: {group.gpu} is more than a node has ({nodes.gpu})")
        if group.spread and group.anti_affinity:
            raise WorkloadError(f"{where}: antiAffinity and spread are two kinds of group; give each its own")
        if group.gang and group.count % group.gang:
            raise WorkloadError(f"{where}.gang: {group.count} pods do not make whole gangs of {group.gang}")
        if group.spread and nodes.zones < 2:
            raise WorkloadError(f"{where}.spread: needs nodes.zones of at least 2")
        if group.anti_affinity > nodes.count:
            raise WorkloadError(
                f"{where}.antiAffinity: {group.anti_affinity} replicas cannot keep apart on {nodes.count} nodes"
            )
        if (group.deadline is None) != (group.total_steps is None):
            raise WorkloadError(f"{where}: deadline and totalSteps go together")
        groups.append(group)
    if sum(g.count for g in groups) > MAX_PODS:
        raise WorkloadError(f"pods: at most {MAX_PODS} in all")
    profile = top.get("profile", "default")
    if profile not in PROFILES:
        raise WorkloadError(f"profile: must be one of {', '.join(PROFILES)}, got {profile!r}")
    churn = None if "churn" not in top else _churn(top["churn"])
    return Workload(name, nodes, tuple(groups), _rate(top.get("arrival", "batch")), profile, churn)


def _churn(raw: object) -> Churn:
    spec = _mapping(raw, "churn", CHURN_KEYS)
    interval = _real(spec.get("interval", 1))
    if interval is None or not 0.1 <= interval <= 3600:
        raise WorkloadError(f"churn.interval: must be seconds from 0.1 to 3600, got {spec.get('interval')!r}")
    churn = Churn(interval, _count(spec.get("nodes", 0), "churn.nodes", 0, 100),
                  _count(spec.get("pods", 0), "churn.pods", 0, 1000))  # fmt: skip
    if not churn.nodes and not churn.pods:
        raise WorkloadError("churn: needs nodes or pods to make")
    return churn


def _duration(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not parse_duration(value):
        raise WorkloadError(f"{where}: must be a duration such as 45m, 2h or 1h30m, got {value!r}")
    return value


def _rate(arrival: object) -> float | None:
    if arrival == "batch":
        return None
    spec = _mapping(arrival, "arrival", frozenset({"rate"}))
    rate = _real(spec.get("rate"))
    if rate is None or not 0 < rate <= MAX_RATE:
        raise WorkloadError(
            f"arrival.rate: must be pods a second, above 0 and at most {MAX_RATE:g}, got {spec.get('rate')!r}"
        )
    return rate


def _real(value: object) -> float | None:
    """A finite number from the file (YAML's true/false are not numbers); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def load_workload(path: Path) -> Workload:
    """A workload file; WorkloadError (one line) when it cannot be read or run."""
    try:
        raw = load_yaml(str(path))
    except (OSError, ValueError) as err:
        raise WorkloadError(f"{path}: {err}") from None
    try:
        return parse_workload(raw, path.stem)
    except WorkloadError as err:
        raise WorkloadError(f"{path}: {err}") from None
