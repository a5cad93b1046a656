"""Parity with the stock kube-scheduler on constraints that depend on other pods.

Each shape is a small cluster state plus one incoming pod. The state is built twice, once per
scheduler, on that scheduler's own nodes (told apart by a label the incoming pod selects) and in
its own namespace, with the existing pods bound through `spec.nodeName`, so no placement tie can
make the two diverge. Shapes run a batch at a time, each shape of a batch on its own group of
nodes. Compared: bound or pending, and for a pending pod the FailedScheduling reasons with their
node counts; for preemption shapes, the nominated node and the victims when kube's choice is
unique.
"""

from __future__ import annotations

import contextlib
import functools
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pysched.backend.live.kubeclient import MERGE_PATCH
from pysched.testing import KubeAPI, KubeAPIError, LocalControlPlane, NodeSpec, create_fake_nodes, wait_for
from pysched.testing.controlplane import ManagedProcess
from pysched.testing.helpers import condition
from pysched.testing.scheduler import create_pods, list_pods, start_scheduler, write_profile

pytestmark = pytest.mark.integration

SIDES = ("kube", "pysched")
SIDE = "pysched.io/parity-side"
GROUP = "pysched.io/parity-group"
ZONE = "topology.kubernetes.io/zone"
SHAPES = 200
BATCH = 10  # shapes at once, each on its own nodes
# One group's nodes: (cpu, memory, zone, taint effect or "").
GROUP_NODES = (("4", "8Gi", "z1", ""), ("4", "8Gi", "z1", ""), ("4", "8Gi", "z2", ""), ("2", "4Gi", "z3", "NoSchedule"))
APPS = ("web", "db", "cache")
PRIORITIES = {"low": 10, "mid": 100, "high": 1000}
PAUSE = "registry.invalid/pause:none"


@dataclass
class Shape:
    name: str
    existing: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (node index, pod)
    incoming: dict[str, Any] = field(default_factory=dict)
    preempts: bool = False


def _pod(
    labels: dict[str, str],
    cpu: str = "500m",
    *,
    priority: str = "",
    affinity: dict[str, Any] | None = None,
    spread: list[dict[str, Any]] | None = None,
    host_port: int | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": PAUSE, "resources": {"requests": {"cpu": cpu}}}
    if host_port is not None:
        container["ports"] = [{"containerPort": 8080, "hostPort": host_port, "protocol": "TCP"}]
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0, "containers": [container]}
    if priority:
        spec["priorityClassName"] = f"parity-{priority}"
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = spread
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": labels}, "spec": spec}


def _term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def _key(rng: random.Random) -> str:
    return rng.choice(["kubernetes.io/hostname", ZONE, ZONE, "rack"])  # "rack": on no node


def _existing(rng: random.Random, count: int, **kwargs: Any) -> list[tuple[int, dict[str, Any]]]:
    return [(rng.randrange(len(GROUP_NODES)), _pod({"app": rng.choice(APPS)}, **kwargs)) for _ in range(count)]


def _anti_affinity(rng: random.Random, name: str) -> Shape:
    app = rng.choice(APPS)
    kind = rng.choice(["required", "preferred"])
    term = _term(app, _key(rng))
    rule = (
        {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        if kind == "required"
        else {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": term}]}
    )
    incoming = _pod({"app": app}, affinity={"podAntiAffinity": rule})
    return Shape(name, _existing(rng, rng.randrange(5)), incoming)


def _affinity(rng: random.Random, name: str) -> Shape:
    app = rng.choice(APPS)
    own = rng.choice([app, "other"])  # matching its own term: the first pod of a group may go anywhere
    term = _term(app, _key(rng))
    incoming = _pod({"app": own}, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    return Shape(name, _existing(rng, rng.randrange(4)), incoming)


def _symmetric(rng: random.Random, name: str) -> Shape:
    """Existing pods that refuse the incoming one (their anti-affinity, not its own)."""
    app = rng.choice(APPS)
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(app, _key(rng))]}}
    existing = [
        (rng.randrange(len(GROUP_NODES)), _pod({"app": "guard"}, affinity=anti)) for _ in range(1 + rng.randrange(3))
    ]
    return Shape(name, existing, _pod({"app": rng.choice([app, "other"])}))


def _spread(rng: random.Random, name: str) -> Shape:
    app = rng.choice(APPS)
    constraint: dict[str, Any] = {
        "maxSkew": rng.choice([1, 1, 2]),
        "topologyKey": rng.choice(["kubernetes.io/hostname", ZONE]),
        "whenUnsatisfiable": rng.choice(["DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"]),
        "labelSelector": {"matchLabels": {"app": app}},
    }
    if rng.random() < 0.25:
        constraint["minDomains"] = rng.choice([2, 4, 5])
        constraint["whenUnsatisfiable"] = "DoNotSchedule"
    if rng.random() < 0.3:
        constraint["nodeTaintsPolicy"] = "Honor"
    existing = [(rng.choice([0, 0, 1, 2, 3]), _pod({"app": app}, cpu="100m")) for _ in range(rng.randrange(6))]
    return Shape(name, existing, _pod({"app": app}, spread=[constraint]))


def _ports(rng: random.Random, name: str) -> Shape:
    port = rng.choice([8080, 9090])
    existing = [
        (i, _pod({"app": "web"}, host_port=rng.choice([8080, 9090]))) for i in rng.sample(range(3), rng.randrange(4))
    ]
    return Shape(name, existing, _pod({"app": "web"}, host_port=port))


def _preemption(rng: random.Random, name: str) -> Shape:
    """Every untainted node full; one holds only low-priority pods, so kube's choice of node is
    unique (fewest and lowest victims); the incoming pod may or may not outrank anything."""
    cheap = rng.randrange(3)
    existing = []
    for node in range(3):
        for _ in range(2):
            existing.append(
                (node, _pod({"app": rng.choice(APPS)}, cpu="1900m", priority="low" if node == cheap else "mid"))
            )
    incoming = _pod({"app": "web"}, cpu=rng.choice(["1", "3"]), priority=rng.choice(["low", "mid", "high"]))
    return Shape(name, existing, incoming, preempts=True)


FAMILIES = (_anti_affinity, _affinity, _symmetric, _spread, _ports, _preemption)


def shapes(seed: int, count: int) -> list[Shape]:
    rng = random.Random(seed)
    return [FAMILIES[i % len(FAMILIES)](rng, f"s{i:03d}") for i in range(count)]


@dataclass
class Outcome:
    bound: bool
    reasons: Counter[str]
    node: int | None = None  # where a preemptor was bound (node index in its group)
    nominated: int | None = None  # node index, while not bound
    victims: int = 0  # existing pods deleted or being deleted


def reasons(message: str) -> Counter[str]:
    """'0/8 nodes are available: 2 A, 6 B. no new claims to deallocate, preemption: ...' -> {'A': 2,
    'B': 6}: the filters' part (kube's dynamic-resources PostFilter adds its own words)."""
    head = message.split(". ", 1)[0].rstrip(".")  # PostFilter messages follow the first ". "
    _, _, listed = head.partition(": ")
    out: Counter[str] = Counter()
    for part in filter(None, listed.split(", ")):
        count, _, reason = part.partition(" ")
        out[reason] += int(count)
    return out


@pytest.fixture
def parity_cluster(kube: KubeAPI, namespace: str) -> Iterator[dict[tuple[str, int], list[str]]]:
    """Per (side, group) the node names, in GROUP_NODES order; namespaces per (side, group)."""
    nodes: dict[tuple[str, int], list[str]] = {}
    for side in SIDES:
        for group in range(BATCH):
            names = []
            for i, (cpu, memory, zone, taint) in enumerate(GROUP_NODES):
                labels = {SIDE: side, GROUP: str(group), ZONE: zone}
                name = create_fake_nodes(
                    kube, 1, NodeSpec(cpu, memory, labels=labels), prefix=f"{namespace}-{side[0]}{group}-{i}-"
                )[0]
                if taint:
                    taints = [{"key": "dedicated", "value": "x", "effect": taint}]
                    kube.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints}}, content_type=MERGE_PATCH)
                names.append(name)
            nodes[(side, group)] = names
            kube.post("/api/v1/namespaces", {"metadata": {"name": f"{namespace}-{side}-{group}"}})
    for level, value in PRIORITIES.items():
        try:
            body = {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"parity-{level}"},
                "value": value,
            }
            kube.post("/apis/scheduling.k8s.io/v1/priorityclasses", body)
        except KubeAPIError as err:
            if err.status != 409:
                raise
    yield nodes
    for names in nodes.values():
        for name in names:
            kube.delete(f"/api/v1/nodes/{name}")
    for side in SIDES:
        for group in range(BATCH):
            ns = f"{namespace}-{side}-{group}"
            for pod in list_pods(kube, ns):
                kube.force_delete_pod(ns, pod["metadata"]["name"])
            kube.delete(f"/api/v1/namespaces/{ns}")


def _settled(pod: dict[str, Any]) -> bool:
    cond = condition(pod, "PodScheduled")
    return bool(pod["spec"].get("nodeName")) or (cond is not None and cond.get("reason") == "Unschedulable")


def _incoming(pods: list[dict[str, Any]]) -> dict[str, Any]:
    return next(p for p in pods if p["metadata"]["name"] == "incoming")


def _outcome(shape: Shape, pods: list[dict[str, Any]], names: list[str]) -> Outcome:
    pod = _incoming(pods)
    node = pod["spec"].get("nodeName")
    nominated = pod.get("status", {}).get("nominatedNodeName")
    left = sum(1 for p in pods if p["metadata"]["name"] != "incoming" and not p["metadata"].get("deletionTimestamp"))
    return Outcome(
        bound=bool(node),
        reasons=Counter() if node else reasons(str((condition(pod, "PodScheduled") or {}).get("message", ""))),
        # Where a preemptor went is unique by construction; elsewhere ties may differ.
        node=names.index(node) if shape.preempts and node in names else None,
        nominated=names.index(nominated) if nominated in names and not node else None,
        victims=len(shape.existing) - left,
    )


def _run_batch(
    kube: KubeAPI, namespace: str, nodes: dict[tuple[str, int], list[str]], batch: list[Shape], ours: str
) -> dict[tuple[str, str], Outcome]:
    for side in SIDES:
        for group, shape in enumerate(batch):
            ns = f"{namespace}-{side}-{group}"
            existing = []
            for index, (node, pod) in enumerate(shape.existing):
                bound = {**pod, "metadata": {**pod["metadata"], "name": f"e{index}"}}
                bound["spec"] = {**pod["spec"], "nodeName": nodes[(side, group)][node]}
                existing.append(bound)
            create_pods(kube, ns, existing)
    # Created after every bound pod: each scheduler's pod watch delivers those first.
    for side, scheduler in (("kube", "default-scheduler"), ("pysched", ours)):
        incoming = []
        for group, shape in enumerate(batch):
            pod = {**shape.incoming, "metadata": {**shape.incoming["metadata"], "name": "incoming"}}
            pod["spec"] = {
                **shape.incoming["spec"],
                "schedulerName": scheduler,
                "nodeSelector": {SIDE: side, GROUP: str(group)},
            }
            incoming.append((f"{namespace}-{side}-{group}", pod))
        for ns, pod in incoming:
            kube.create_pod(ns, pod)
    out: dict[tuple[str, str], Outcome] = {}
    for side in SIDES:
        for group, shape in enumerate(batch):
            ns = f"{namespace}-{side}-{group}"
            pods = wait_for(
                functools.partial(list_pods, kube, ns),
                lambda items: any(
                    p["metadata"]["name"] == "incoming"
                    and (_settled(p) or p.get("status", {}).get("nominatedNodeName"))
                    for p in items
                ),
                timeout=30,
                interval=0.1,
                what=f"{shape.name} settled under {side}",
            )
            if shape.preempts and not _incoming(pods)["spec"].get("nodeName"):
                # Victims deleted, the preemptor binds next: wait for it rather than race it.
                with contextlib.suppress(TimeoutError):
                    wait_for(
                        functools.partial(list_pods, kube, ns),
                        lambda items: bool(_incoming(items)["spec"].get("nodeName")),
                        timeout=5,
                        what="the preemptor bound",
                    )
                pods = list_pods(kube, ns)
            out[(side, shape.name)] = _outcome(shape, pods, nodes[(side, group)])
    for side in SIDES:
        for group in range(len(batch)):
            ns = f"{namespace}-{side}-{group}"
            for pod in list_pods(kube, ns):
                kube.force_delete_pod(ns, pod["metadata"]["name"])
    for side in SIDES:
        for group in range(len(batch)):
            ns = f"{namespace}-{side}-{group}"
            wait_for(
                functools.partial(list_pods, kube, ns),
                lambda items: not items,
                what="pods gone",
            )
    return out


def test_pod_constraints_match_kube_scheduler(
    control_plane: LocalControlPlane,
    kube: KubeAPI,
    namespace: str,
    parity_cluster: dict[tuple[str, int], list[str]],
    tmp_path: Path,
) -> None:
    ours = f"pysched-{namespace}"
    all_shapes = shapes(20261201, SHAPES)
    kube_scheduler: ManagedProcess = control_plane.start_kube_scheduler()
    scheduler = start_scheduler(control_plane, ours, config=write_profile(tmp_path / "profiles.yaml", ours))
    outcomes: dict[tuple[str, str], Outcome] = {}
    try:
        for start in range(0, len(all_shapes), BATCH):
            outcomes.update(_run_batch(kube, namespace, parity_cluster, all_shapes[start : start + BATCH], ours))
    finally:
        scheduler.stop()
        kube_scheduler.stop()
        control_plane.processes.remove(kube_scheduler)
    differ: dict[str, str] = {}
    for shape in all_shapes:
        theirs, mine = outcomes[("kube", shape.name)], outcomes[("pysched", shape.name)]
        same = (theirs.bound, theirs.reasons, theirs.node, theirs.nominated, theirs.victims) == (
            mine.bound,
            mine.reasons,
            mine.node,
            mine.nominated,
            mine.victims,
        )
        if not same:
            differ[shape.name] = f"kube {theirs}\n      pysched {mine}\n      {shape.incoming['spec']}"
    assert not differ, f"{len(differ)} of {SHAPES} shapes differ:\n" + "\n".join(f"{k}: {v}" for k, v in differ.items())
    bound = sum(outcomes[("kube", s.name)].bound for s in all_shapes)
    preempted = sum(outcomes[("kube", s.name)].victims > 0 for s in all_shapes)
    assert SHAPES // 10 < bound < SHAPES - SHAPES // 10  # the seed exercises both outcomes (164 bound)
    assert preempted > SHAPES // 20  # and preemption
