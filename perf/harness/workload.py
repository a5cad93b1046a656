"""A workload file: the nodes, the pods and how they arrive, read through a bounded parser.

    name: basic-1000
    nodes: {count: 1000, cpu: "32", memory: 256Gi, pods: 110, gpu: 0}
    pods:
      - {count: 5000, cpu: 100m, memory: 128Mi, gpu: 0}
    arrival: batch            # or {rate: 100}: pods a second, created while the scheduler runs

Every value is checked (a count in range, a quantity the scheduler can count, no unknown key);
a bad file is a `WorkloadError` with one line naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysched.api.inputs import load_yaml
from pysched.api.resources import CPU, QuantityError, to_scheduler_units

MAX_NODES = 20_000
MAX_PODS = 200_000
MAX_RATE = 10_000.0
NODE_KEYS = frozenset({"count", "cpu", "memory", "pods", "gpu"})
POD_KEYS = frozenset({"count", "cpu", "memory", "gpu"})
TOP_KEYS = frozenset({"name", "nodes", "pods", "arrival"})


class WorkloadError(ValueError):
    """A workload file that cannot be run: one line for the user."""


@dataclass(frozen=True, slots=True)
class Nodes:
    count: int
    cpu: str
    memory: str
    pods: int
    gpu: int = 0


@dataclass(frozen=True, slots=True)
class PodGroup:
    count: int
    cpu: str
    memory: str
    gpu: int = 0


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    nodes: Nodes
    pods: tuple[PodGroup, ...]
    rate: float | None = None  # pods a second while the scheduler runs; None: all created first

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
        )
        if group.gpu > nodes.gpu:
            raise WorkloadError(f"{where}.gpu: {group.gpu} is more than a node has ({nodes.gpu})")
        groups.append(group)
    if sum(g.count for g in groups) > MAX_PODS:
        raise WorkloadError(f"pods: at most {MAX_PODS} in all")
    return Workload(name, nodes, tuple(groups), _rate(top.get("arrival", "batch")))


def _rate(arrival: object) -> float | None:
    if arrival == "batch":
        return None
    spec = _mapping(arrival, "arrival", frozenset({"rate"}))
    rate = spec.get("rate")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= MAX_RATE:
        raise WorkloadError(f"arrival.rate: must be pods a second, above 0 and at most {MAX_RATE:g}, got {rate!r}")
    return float(rate)


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
