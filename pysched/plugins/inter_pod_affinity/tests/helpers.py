"""A simulated cluster scheduled by a profile with InterPodAffinity at every point it serves."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.plugins import default_registry
from pysched.scheduler.scheduler import Scheduler

SCHEDULER = "affinity"
HOST = "kubernetes.io/hostname"


def profile(weight: int = 1, args: Mapping[str, Any] | None = None, name: str = SCHEDULER) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "schedulerName": name,
        "plugins": {
            "queueSort": [{"name": "PrioritySort"}],
            "preFilter": [{"name": "InterPodAffinity"}],
            "filter": [
                {"name": "NodeName"},
                {"name": "NodeAffinity"},
                {"name": "NodeResourcesFit"},
                {"name": "InterPodAffinity"},
            ],
            "preScore": [{"name": "InterPodAffinity"}],
            "score": [{"name": "LeastAllocated", "weight": 1}, {"name": "InterPodAffinity", "weight": weight}],
            "bind": [{"name": "DefaultBinder"}],
        },
    }
    if args is not None:
        entry["pluginConfig"] = [{"name": "InterPodAffinity", "args": dict(args)}]
    return {"profiles": [entry]}


def term(
    labels: Mapping[str, str] | None = None,
    key: str = HOST,
    *,
    expressions: Sequence[Mapping[str, Any]] = (),
    namespaces: Sequence[str] | None = None,
    namespace_selector: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    selector: dict[str, Any] = {}
    if labels is not None:
        selector["matchLabels"] = dict(labels)
    if expressions:
        selector["matchExpressions"] = [dict(e) for e in expressions]
    out: dict[str, Any] = {"labelSelector": selector, "topologyKey": key, **extra}
    if namespaces is not None:
        out["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        out["namespaceSelector"] = dict(namespace_selector)
    return out


def affinity(
    required: Sequence[Mapping[str, Any]] = (),
    anti: Sequence[Mapping[str, Any]] = (),
    preferred: Sequence[tuple[int, Mapping[str, Any]]] = (),
    preferred_anti: Sequence[tuple[int, Mapping[str, Any]]] = (),
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    hard, soft = "requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"
    for name, req, pref in (("podAffinity", required, preferred), ("podAntiAffinity", anti, preferred_anti)):
        part: dict[str, Any] = {}
        if req:
            part[hard] = [dict(t) for t in req]
        if pref:
            part[soft] = [{"weight": w, "podAffinityTerm": dict(t)} for w, t in pref]
        if part:
            out[name] = part
    return out


def pod(
    name: str, labels: Mapping[str, str] | None = None, spec_affinity: Mapping[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    raw = pod_dict(
        name, scheduler_name=kw.pop("scheduler_name", SCHEDULER), labels=labels, cpu=kw.pop("cpu", "100m"), **kw
    )
    if spec_affinity:
        raw["spec"]["affinity"] = dict(spec_affinity)
    return raw


class Harness:
    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.clock = VirtualClock(1000.0)
        self.cluster = SimulatedCluster(self.clock)
        self.registry = default_registry()
        self.scheduler = Scheduler(
            parse_config(dict(config or profile()), "test", self.registry), self.cluster, self.clock, self.registry
        )
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self.scheduler.start())

    def node(self, name: str, **labels: str) -> None:
        self.cluster.add_node(node_dict(name, labels=labels))

    def create(self, raw: Mapping[str, Any]) -> None:
        self.cluster.create_pod(dict(raw))

    def run(self, seconds: float = 0.0) -> None:
        if seconds:
            self.clock.advance(seconds)
        self.loop.run_until_complete(self.scheduler.run_until_idle())

    def node_of(self, name: str, namespace: str = "default") -> str | None:
        return self.cluster.pods[PodKey(f"{namespace}/{name}")].node_name

    def last_failure(self, name: str, namespace: str = "default") -> str:
        notes = [
            e.note for e in self.cluster.events if e.pod == f"{namespace}/{name}" and e.reason == "FailedScheduling"
        ]
        return notes[-1] if notes else ""

    def where(self, name: str, namespace: str = "default") -> str | None:
        return self.scheduler.queue.where(PodKey(f"{namespace}/{name}"))

    def close(self) -> None:
        self.loop.run_until_complete(self.scheduler.stop())
        self.loop.close()
