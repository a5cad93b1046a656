"""Fields the API server would have refused, in a hand-written or replayed pod: each is refused
with an event (never an incident, never a pod placed where kube-scheduler places none)."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.objects import pod_from_dict
from pysched.api.times import format_rfc3339
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.scheduler.scheduler import Scheduler
from pysched.sim.runner import profile_scheduler

Edit = Callable[[dict[str, Any]], None]
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def _spec(**fields: Any) -> Edit:
    return lambda raw: raw["spec"].update(fields)


def _requests(**values: Any) -> Edit:
    return lambda raw: raw["spec"]["containers"][0]["resources"]["requests"].update(values)


def _meta(**fields: Any) -> Edit:
    return lambda raw: raw["metadata"].update(fields)


def _preferred(weight: Any) -> Edit:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    return _spec(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "preference": term}
    ]}})  # fmt: skip


async def _run(edit: Edit, node: dict[str, Any]) -> tuple[SimulatedCluster, Scheduler]:
    registry = default_registry()
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    scheduler = profile_scheduler(builtin_config(registry), "default", cluster, clock, registry)
    cluster.add_node(node)
    await scheduler.start()
    raw = pod_dict("bad", cpu="1", scheduler_name="default")
    edit(raw)
    cluster.create_pod(raw)
    for i in range(2):  # well-formed pods around it still run
        cluster.create_pod(pod_dict(f"good-{i}", cpu="1", scheduler_name="default"))
    await scheduler.run_until_idle()
    return cluster, scheduler


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (_requests(cpu="-4", memory="-8Gi"), "'cpu': '-4' is negative"),
        (_spec(priority=2**70), "spec.priority: 1180591620717411303424 is not a 32-bit integer"),
        (_spec(priority="7"), "spec.priority: '7' is not a 32-bit integer"),
        (_spec(nodeName={"a": 1}), "spec.nodeName: {'a': 1} is not a string"),
        (_spec(tolerations=[{"key": 0, "operator": "Exists"}]), "spec.tolerations[0].key: 0 is not a string"),
        (_spec(tolerations={"key": "dedicated"}), "spec.tolerations: a list of objects"),
        (_preferred(10**30), "weight: 1 to 100, got 1000000000000000000000000000000"),
        (_preferred(-5), "weight: 1 to 100, got -5"),
        (_meta(creationTimestamp=12345), "pod cannot be scheduled"),
    ],
)
def test_a_field_the_api_would_refuse_gets_an_event_and_the_pod_is_not_placed(edit: Edit, problem: str) -> None:
    async def run() -> None:
        cluster, scheduler = await _run(edit, node_dict("n", cpu="2", memory="8Gi", taints=[TAINT]))
        # The node is tainted (a toleration read as "every key" would show); the invalid pod is
        # not even taken into the cluster, as the API server would not have stored it.
        bad = cluster.pods.get(PodKey("default/bad"))
        assert bad is None or bad.node_name is None
        notes = [e.note for e in cluster.events if e.pod == "default/bad" and e.reason == "FailedScheduling"]
        assert len(notes) == 1 and problem in notes[0], notes
        assert scheduler.incidents.total == 0  # an expected refusal, not a bug
        await scheduler.stop()

    asyncio.run(run())


def test_a_negative_request_makes_no_room_on_its_node() -> None:
    async def run() -> None:
        cluster, scheduler = await _run(_requests(cpu="-4"), node_dict("n", cpu="2", memory="8Gi"))
        bound = sorted(k for k, p in cluster.pods.items() if p.node_name == "n")
        assert bound == ["default/good-0", "default/good-1"]  # 2 CPUs, two 1-CPU pods, not more
        await scheduler.stop()

    asyncio.run(run())


@pytest.mark.parametrize("label", ["1_000", "\u0664\u0660\u0660", " 300", "\uff13\uff10\uff10", "99999999999999999999"])
def test_gt_and_lt_read_numbers_as_go_does(label: str) -> None:
    """A label value that strconv.ParseInt refuses matches no Gt/Lt requirement."""
    required = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "mem", "operator": "Gt", "values": ["40"]}]}]}
    edit = _spec(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}})

    async def run() -> None:
        cluster, scheduler = await _run(edit, node_dict("n", cpu="4", memory="8Gi", labels={"mem": label}))
        assert cluster.pods[PodKey("default/bad")].node_name is None
        assert cluster.pods[PodKey("default/good-0")].node_name == "n"
        await scheduler.stop()

    asyncio.run(run())

    async def control() -> None:  # the same pod binds where the label is a plain number above 40
        cluster, scheduler = await _run(edit, node_dict("n", cpu="4", memory="8Gi", labels={"mem": "300"}))
        assert cluster.pods[PodKey("default/bad")].node_name == "n"
        await scheduler.stop()

    asyncio.run(control())


def test_a_string_read_only_flag_is_not_read_as_true() -> None:
    """`readOnly: "false"` (a string the API would refuse) must not make a disk shareable."""

    def disk(read_only: Any) -> Edit:
        volume = {"name": "d", "gcePersistentDisk": {"pdName": "pd-1", "readOnly": read_only}}
        return _spec(volumes=[volume])

    async def run() -> None:
        cluster, scheduler = await _run(disk("false"), node_dict("n", cpu="4", memory="8Gi"))
        second = pod_dict("bad-2", cpu="1", scheduler_name="default")
        disk("false")(second)
        cluster.create_pod(second)
        await scheduler.run_until_idle()
        placed = [k for k in ("default/bad", "default/bad-2") if cluster.pods[PodKey(k)].node_name == "n"]
        assert placed == ["default/bad"]  # two read-write mounts of one disk never share a node
        await scheduler.stop()

    asyncio.run(run())


def test_times_beyond_what_rfc3339_writes_are_written_as_its_ends() -> None:
    assert format_rfc3339(1e300) == format_rfc3339(float("nan")) == "9999-12-31T23:59:59Z"
    assert format_rfc3339(-1e300) == "0001-01-01T00:00:00Z"


def test_a_placed_pod_past_this_schedulers_bounds_still_counts_on_its_node() -> None:
    """17 spread constraints pass the API server, not pysched's bounds: a pod another scheduler
    placed with them is read without its constraints, and its CPUs still fill its node."""
    running = pod_dict("running", cpu="3", node_name="a", scheduler_name="default-scheduler")
    running["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": f"example.com/k{i}", "whenUnsatisfiable": "ScheduleAnyway"} for i in range(17)
    ]
    cluster = _placed_beside(running, pod_dict("new", cpu="3", scheduler_name="default"), cpu="4")
    assert cluster.pods[PodKey("default/new")].node_name is None
    assert [(e.pod, e.reason) for e in cluster.events] == [("default/new", "FailedScheduling")]
    assert "Insufficient cpu" in cluster.events[0].note


def _placed_beside(running: dict[str, Any], new: dict[str, Any], cpu: str = "32") -> SimulatedCluster:
    """`running`, placed on node a (`cpu` CPUs) by another scheduler, then `new` for the default profile."""

    async def run() -> SimulatedCluster:
        registry = default_registry()
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        scheduler = profile_scheduler(builtin_config(registry), "default", cluster, clock, registry)
        cluster.add_node(node_dict("a", cpu=cpu, memory="64Gi"))
        await scheduler.start()
        cluster.create_pod(running)
        cluster.create_pod(new)
        await scheduler.run_until_idle()
        await scheduler.stop()
        return cluster

    return asyncio.run(run())


def test_a_placed_pod_with_more_host_ports_than_pysched_places_pods_with_still_counts() -> None:
    """A hostNetwork media server lists 1,100 UDP host ports (the API takes them; pysched places
    no pod with more than 1,024): placed by another scheduler, its CPUs and ports count on its node."""
    running = pod_dict("media", cpu="30", node_name="a", scheduler_name="default-scheduler")
    ports = [{"containerPort": p, "hostPort": p, "protocol": "UDP"} for p in range(40_000, 41_100)]
    running["spec"]["containers"][0]["ports"] = ports
    cluster = _placed_beside(running, pod_dict("trainer", cpu="8", scheduler_name="default"))
    assert len(cluster.pods[PodKey("default/media")].host_ports) == 1_100
    assert cluster.pods[PodKey("default/trainer")].node_name is None
    assert "Insufficient cpu" in cluster.events[-1].note
    pending = pod_dict("pending", cpu="1", scheduler_name="default")
    pending["spec"]["containers"][0]["ports"] = ports
    with pytest.raises(ValueError, match="at most 1024 host ports"):
        pod_from_dict(pending)


def test_a_placed_pods_anti_affinity_past_pysched_bounds_still_keeps_pods_away() -> None:
    """300 values in one expression of a running pod's required anti-affinity (the API takes
    them): a pod it matches is not placed beside it, as kube-scheduler does not place it."""
    guard = pod_dict("guard", cpu="1", node_name="a", scheduler_name="default-scheduler", labels={"app": "db"})
    values = ["web", *(f"v{i}" for i in range(299))]
    term = {
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": values}]},
        "topologyKey": "kubernetes.io/hostname",
    }
    guard["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    cluster = _placed_beside(guard, pod_dict("web", cpu="1", scheduler_name="default", labels={"app": "web"}))
    assert cluster.pods[PodKey("default/web")].node_name is None
    assert "anti-affinity" in cluster.events[-1].note
