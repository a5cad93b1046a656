"""Parity with the stock kube-scheduler on constraints that depend on other pods.

Each shape is a small cluster state plus one incoming pod. The state is built twice, once per
scheduler, on that scheduler's own nodes (told apart by a label the incoming pod selects) and in
its own namespace, with the existing pods bound through `spec.nodeName`, so no placement tie can
make the two diverge. Shapes run a batch at a time, each shape of a batch on its own group of
nodes. Compared: bound or pending, and for a pending pod the FailedScheduling reasons with their
node counts; for preemption shapes, the nominated node and the victims when kube's choice is
unique. For some shapes the feasible set is compared too: the same state once per node, with a
probe copy of the incoming pod pinned to that node (bound exactly where the filters pass), by its
hostname label or, as a DaemonSet pins its pods, by a required `metadata.name` field (kube's
NodeAffinity PreFilter then leaves every other node unfiltered, and says so).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pysched.api.storage_builders import pv_dict, pvc_dict, storage_class_dict
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
HOSTNAME = "kubernetes.io/hostname"  # fake nodes carry their name in it, as kubelets do
SHAPES = 200
PROBED = 40  # shapes whose feasible set is compared, one probe per node of the group
BATCH = 30  # shapes at once, each on its own nodes
# One group's nodes: (cpu, memory, zone, taint effect or "").
GROUP_NODES = (("4", "8Gi", "z1", ""), ("4", "8Gi", "z1", ""), ("4", "8Gi", "z2", ""), ("2", "4Gi", "z3", "NoSchedule"))
APPS = ("web", "db", "cache")
PRIORITIES = {"low": 10, "mid": 100, "high": 1000}
PAUSE = "registry.invalid/pause:none"
NOW = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}  # no kubelet waits to stop them


@dataclass
class Shape:
    name: str
    existing: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (node index, pod)
    incoming: dict[str, Any] = field(default_factory=dict)
    preempts: bool = False
    pin: int | None = None  # a probe: the incoming pod may go only to this node of its group
    unique_node: bool = False  # the best node is unique: compare where the pod went
    claim: str = ""  # "": none; "missing", "unbound" (WaitForFirstConsumer) or "bound" (to the first PV)
    volumes: list[tuple[int, str]] = field(default_factory=list)  # local PVs: (node index, size)
    exclusive: bool = False  # the claim and its PVs are ReadWriteOncePod


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


def _counted_preemption(rng: random.Random, name: str) -> Shape:
    """A required anti-affinity only preemption can meet: every untainted node runs a pod the
    incoming one avoids, of low priority on one node and of mid priority on the others, beside
    pods it does not avoid; with a zone key, a node's zone-mate counts too (and preemption only
    takes pods off the node it chose)."""
    app = rng.choice(APPS)
    cheap = rng.randrange(3)
    existing = [(node, _pod({"app": app}, priority="low" if node == cheap else "mid")) for node in range(3)]
    others = [a for a in APPS if a != app]
    existing += [(rng.randrange(3), _pod({"app": rng.choice(others)}, priority="low")) for _ in range(rng.randrange(3))]
    rule = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(app, rng.choice([HOSTNAME, ZONE]))]}
    incoming = _pod({"app": "other"}, priority=rng.choice(["mid", "high"]), affinity={"podAntiAffinity": rule})
    return Shape(name, existing, incoming, preempts=True)


def _exclusive_claim(rng: random.Random, name: str) -> Shape:
    """A ReadWriteOncePod claim bound to a local PV on one node and used by a pod running there;
    the incoming pod uses it too, at a priority above, equal to or below the holder's."""
    node = rng.randrange(3)
    holder = _pod({"app": "db"}, priority=rng.choice(["low", "mid"]))
    incoming = _pod({"app": "db"}, priority=rng.choice(["low", "mid", "high"]))
    for pod in (holder, incoming):
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    existing = [(node, holder), *_existing(rng, rng.randrange(3))]
    return Shape(name, existing, incoming, preempts=True, claim="bound", volumes=[(node, "1Gi")], exclusive=True)


def _volumes(rng: random.Random, name: str) -> Shape:
    """A claim that does not exist, a WaitForFirstConsumer claim against local PVs on some nodes
    (of several sizes: some too small), or a claim bound to a local PV on one node."""
    claim = rng.choice(["missing", "unbound", "unbound", "bound"])
    count = {"missing": 0, "bound": 1}.get(claim, rng.randrange(4))
    volumes = [(rng.randrange(len(GROUP_NODES)), rng.choice(["1Gi", "2Gi"])) for _ in range(count)]
    incoming = _pod({"app": "db"})
    incoming["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    return Shape(name, _existing(rng, rng.randrange(3)), incoming, claim=claim, volumes=volumes)


def _node_preference(rng: random.Random, name: str) -> Shape:
    """Preferred node affinity for zone z2, whose one node wins by its weight when it fits (the
    node scores differ by less than NodeAffinity's 2 x 100), or for no node at all."""
    zone = rng.choice(["z2", "z2", "z9"])
    terms = [{"weight": rng.choice([60, 100]), "preference": {"matchExpressions": [
        {"key": ZONE, "operator": "In", "values": [zone]}]}}]  # fmt: skip
    if rng.random() < 0.5:
        terms.append({"weight": 5, "preference": {"matchExpressions": [{"key": "rack", "operator": "Exists"}]}})
    incoming = _pod(
        {"app": "web"}, affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}
    )
    return Shape(name, _existing(rng, rng.randrange(3)), incoming, unique_node=zone == "z2")


FAMILIES = (
    _anti_affinity,
    _affinity,
    _symmetric,
    _spread,
    _ports,
    _preemption,
    _volumes,
    _node_preference,
    _counted_preemption,
    _exclusive_claim,
)


def shapes(seed: int, count: int) -> list[Shape]:
    rng = random.Random(seed)
    return [FAMILIES[i % len(FAMILIES)](rng, f"s{i:03d}") for i in range(count)]


def probes(of: list[Shape], count: int) -> list[Shape]:
    """One probe per node for the first `count` shapes that do not preempt (a probe that
    preempted would measure preemption, not feasibility)."""
    chosen = [shape for shape in of if not shape.preempts][:count]
    return [
        dataclasses.replace(shape, name=f"{shape.name}-on{node}", pin=node)
        for shape in chosen
        for node in range(len(GROUP_NODES))
    ]


@dataclass
class Outcome:
    bound: bool
    reasons: Counter[str]
    node: int | None = None  # where a preemptor was bound (node index in its group)
    nominated: int | None = None  # node index, while not bound
    victims: int = 0  # existing pods deleted or being deleted
    victim_names: frozenset[str] = frozenset()  # compared where kube's choice is unique


def reasons(message: str) -> Counter[str]:
    """'0/8 nodes are available: 2 A, 6 B. no new claims to deallocate, preemption: ...' -> {'A': 2,
    'B': 6}: the filters' part (kube's dynamic-resources PostFilter adds its own words)."""
    head = message.split(". ", 1)[0].rstrip(".")  # PostFilter messages follow the first ". "
    _, _, listed = head.partition(": ")
    out: Counter[str] = Counter()
    for part in filter(None, listed.split(", ")):
        count, _, reason = part.partition(" ")
        if count.isdigit():
            out[reason] += int(count)
        else:  # one PreFilter verdict for every node ('persistentvolumeclaim "data" not found')
            out[part] += 1
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
    for found in kube.get("/apis/storage.k8s.io/v1/storageclasses").get("items", []):
        if found["metadata"]["name"].startswith(f"{namespace}-"):  # the volume shapes' classes
            kube.delete(f"/apis/storage.k8s.io/v1/storageclasses/{found['metadata']['name']}")
    kube.delete("/api/v1/nodes", labelSelector=SIDE)  # every group's nodes, in one request
    for side in SIDES:
        for group in range(BATCH):
            ns = f"{namespace}-{side}-{group}"
            kube.delete(f"/api/v1/namespaces/{ns}/pods", NOW)
            kube.delete(f"/api/v1/namespaces/{ns}")


def _settled(pod: dict[str, Any]) -> bool:
    cond = condition(pod, "PodScheduled")
    return bool(pod["spec"].get("nodeName")) or (cond is not None and cond.get("reason") == "Unschedulable")


def _final(shape: Shape, pod: dict[str, Any]) -> bool:
    """Nothing its group can still do makes the refused pod bind: its claim was never made, or
    preemption found nothing to evict for it (its message says so) and no volume's arrival can
    send it back to be tried."""
    if shape.claim == "missing":
        return True
    message = str((condition(pod, "PodScheduled") or {}).get("message", ""))
    return not shape.claim and not pod.get("status", {}).get("nominatedNodeName") and "preemption: " in message


def _incoming(pods: list[dict[str, Any]]) -> dict[str, Any]:
    return next(p for p in pods if p["metadata"]["name"] == "incoming")


def _outcome(shape: Shape, pods: list[dict[str, Any]], names: list[str]) -> Outcome:
    pod = _incoming(pods)
    node = pod["spec"].get("nodeName")
    nominated = pod.get("status", {}).get("nominatedNodeName")
    alive = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    gone = frozenset(f"e{index}" for index in range(len(shape.existing)) if f"e{index}" not in alive)
    return Outcome(
        bound=bool(node),
        reasons=Counter() if node else reasons(str((condition(pod, "PodScheduled") or {}).get("message", ""))),
        # Where a preemptor or a preferring pod went is unique by construction; elsewhere ties may differ.
        node=names.index(node) if (shape.preempts or shape.unique_node) and node in names else None,
        nominated=names.index(nominated) if nominated in names and not node else None,
        victims=len(gone),
        victim_names=gone,
    )


def _unique_victims(shape: Shape, outcome: Outcome) -> bool:
    """Kube's victims are every pod on the node it chose: no other set of victims is as good
    there (pods of one priority on one node are otherwise interchangeable)."""
    target = outcome.node if outcome.node is not None else outcome.nominated
    if not shape.preempts or target is None or not outcome.victim_names:
        return False
    return outcome.victim_names == {f"e{i}" for i, (node, _) in enumerate(shape.existing) if node == target}


def _run_batch(
    kube: KubeAPI, namespace: str, nodes: dict[tuple[str, int], list[str]], batch: list[Shape], ours: str
) -> dict[tuple[str, str], Outcome]:
    # Storage first: the schedulers' storage informers are not ordered with their pod watches,
    # so the more that happens between the two, the less an incoming pod races its volumes.
    for side in SIDES:
        for group, shape in enumerate(batch):
            _create_storage(kube, f"{namespace}-{side}-{group}", shape, nodes[(side, group)])
    for side in SIDES:
        for group, shape in enumerate(batch):
            existing = []
            for index, (node, pod) in enumerate(shape.existing):
                bound = {**pod, "metadata": {**pod["metadata"], "name": f"e{index}"}}
                bound["spec"] = {**pod["spec"], "nodeName": nodes[(side, group)][node]}
                existing.append(bound)
            create_pods(kube, f"{namespace}-{side}-{group}", existing)
    for side in SIDES:
        for group, shape in enumerate(batch):
            if shape.claim == "bound":
                ns = f"{namespace}-{side}-{group}"
                wait_for(
                    functools.partial(kube.get, f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data"),
                    lambda claim: claim.get("status", {}).get("phase") == "Bound",
                    timeout=30,
                    what=f"{shape.name}'s claim bound by the PV controller",
                )
    # Created after every bound pod: each scheduler's pod watch delivers those first.
    for side, scheduler in (("kube", "default-scheduler"), ("pysched", ours)):
        incoming = []
        for group, shape in enumerate(batch):
            pod = {**shape.incoming, "metadata": {**shape.incoming["metadata"], "name": "incoming"}}
            selector = {SIDE: side, GROUP: str(group)}
            spec = {**shape.incoming["spec"], "schedulerName": scheduler, "nodeSelector": selector}
            if shape.pin is not None and shape.pin % 2:
                spec["affinity"] = _pinned_by_name(spec.get("affinity") or {}, nodes[(side, group)][shape.pin])
            elif shape.pin is not None:
                selector[HOSTNAME] = nodes[(side, group)][shape.pin]
            pod["spec"] = spec
            incoming.append((f"{namespace}-{side}-{group}", pod))
        for ns, pod in incoming:
            kube.create_pod(ns, pod)
    out: dict[tuple[str, str], Outcome] = {}
    binding: dict[tuple[str, int], float] = {}  # settled but not bound yet: watched until this time
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
            incoming_pod = _incoming(pods)
            nominated = bool(incoming_pod.get("status", {}).get("nominatedNodeName"))
            waits = shape.preempts or nominated or shape.claim
            if not incoming_pod["spec"].get("nodeName") and waits and not _final(shape, incoming_pod):
                # Victims deleted, the preemptor binds next (its nomination may not be written
                # yet); or kube names the node while its PreBind waits for volumes to bind; or a
                # scheduler's storage informer delivered the PVs after the pod, and their arrival
                # sends the pod back to be tried: watch for the bind rather than race it (a
                # preemptor with no victims, a claim no volume serves, never binds).
                binding[(side, group)] = time.monotonic() + (15 if nominated else 5)
                continue
            out[(side, shape.name)] = _outcome(shape, pods, nodes[(side, group)])
    # The pods still to bind are watched together, each until it binds or its own time is up.
    while binding:
        for (side, group), until in list(binding.items()):
            pods = list_pods(kube, f"{namespace}-{side}-{group}")
            if _incoming(pods)["spec"].get("nodeName") or time.monotonic() >= until:
                out[(side, batch[group].name)] = _outcome(batch[group], pods, nodes[(side, group)])
                del binding[(side, group)]
        if binding:
            time.sleep(0.1)
    spaces = {f"{namespace}-{side}-{group}" for side in SIDES for group in range(len(batch))}
    for ns in sorted(spaces):
        kube.delete(f"/api/v1/namespaces/{ns}/pods", NOW)
    wait_for(
        lambda: kube.get("/api/v1/pods").get("items", []),
        lambda items: not any(p["metadata"]["namespace"] in spaces for p in items),
        what="pods gone",
    )
    for side in SIDES:
        for group, shape in enumerate(batch):
            ns = f"{namespace}-{side}-{group}"
            if shape.claim and shape.claim != "missing":
                kube.delete(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data")
                for index in range(len(shape.volumes)):
                    kube.delete(f"/api/v1/persistentvolumes/{_pv_name(ns, shape, index)}")
    for side in SIDES:  # a claim of the next batch reuses the name: wait until this one is gone
        for group, shape in enumerate(batch):
            if shape.claim and shape.claim != "missing":
                ns = f"{namespace}-{side}-{group}"
                wait_for(
                    functools.partial(kube.get, f"/api/v1/namespaces/{ns}/persistentvolumeclaims"),
                    lambda found: not found.get("items"),
                    timeout=30,
                    what="claims gone",
                )
    return out


def _pinned_by_name(affinity: dict[str, Any], node: str) -> dict[str, Any]:
    """The pod's affinity, its node affinity required to name `node` (how a DaemonSet pins)."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    return {**affinity, "nodeAffinity": {**affinity.get("nodeAffinity", {}), **required}}


def _pv_name(ns: str, shape: Shape, index: int) -> str:
    return f"{ns}-{shape.name}-pv{index}"


def _create_storage(kube: KubeAPI, ns: str, shape: Shape, names: list[str]) -> None:
    """The shape's local PVs on this side's nodes, and its claim, all of a storage class of the
    shape's own (WaitForFirstConsumer, no provisioner), so no PV of another shape can match."""
    if not shape.claim or shape.claim == "missing":
        return
    storage_class = f"{ns.rsplit('-', 2)[0]}-{shape.name}"
    with contextlib.suppress(KubeAPIError):  # one class for both sides
        kube.post("/apis/storage.k8s.io/v1/storageclasses", storage_class_dict(storage_class))
    modes = ["ReadWriteOncePod"] if shape.exclusive else ["ReadWriteOnce"]
    for index, (node, size) in enumerate(shape.volumes):
        pv = pv_dict(
            _pv_name(ns, shape, index), storage_class=storage_class, size=size, node=names[node], access_modes=modes
        )
        pv["spec"]["local"] = {"path": "/mnt/disk"}
        del pv["status"]
        if shape.claim == "bound" and index == 0:
            pv["spec"]["claimRef"] = {"namespace": ns, "name": "data"}
        kube.post("/api/v1/persistentvolumes", pv)
    claim = pvc_dict("data", namespace=ns, storage_class=storage_class, access_modes=modes)
    if shape.claim == "bound":
        claim["spec"]["volumeName"] = _pv_name(ns, shape, 0)
    kube.post(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", claim)


def test_pod_constraints_match_kube_scheduler(
    control_plane: LocalControlPlane,
    kube: KubeAPI,
    namespace: str,
    parity_cluster: dict[tuple[str, int], list[str]],
    tmp_path: Path,
) -> None:
    ours = f"pysched-{namespace}"
    main_shapes = shapes(20261201, SHAPES)
    all_shapes = main_shapes + probes(main_shapes, PROBED)
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
    unique_victims = 0
    for shape in all_shapes:
        theirs, mine = outcomes[("kube", shape.name)], outcomes[("pysched", shape.name)]
        same = (theirs.bound, theirs.reasons, theirs.node, theirs.nominated, theirs.victims) == (
            mine.bound,
            mine.reasons,
            mine.node,
            mine.nominated,
            mine.victims,
        )
        if _unique_victims(shape, theirs):
            unique_victims += 1
            same = same and theirs.victim_names == mine.victim_names
        if not same:
            differ[shape.name] = f"kube {theirs}\n      pysched {mine}\n      {shape.incoming['spec']}"
    assert not differ, f"{len(differ)} of {len(all_shapes)} shapes differ:\n" + "\n".join(
        f"{k}: {v}" for k, v in differ.items()
    )
    bound = sum(outcomes[("kube", s.name)].bound for s in main_shapes)
    preempted = sum(outcomes[("kube", s.name)].victims > 0 for s in main_shapes)
    assert SHAPES // 10 < bound < SHAPES - SHAPES // 10  # the seed exercises both outcomes (164 bound)
    assert preempted > SHAPES // 20  # and preemption
    assert unique_victims > SHAPES // 40  # with victims compared by name
    feasible = Counter(
        s.name.rsplit("-on", 1)[0] for s in all_shapes if s.pin is not None and outcomes[("kube", s.name)].bound
    )
    partly = sum(0 < feasible[shape.name] < len(GROUP_NODES) for shape in main_shapes)
    assert partly > PROBED // 4  # the probes see feasible sets that are neither empty nor whole
