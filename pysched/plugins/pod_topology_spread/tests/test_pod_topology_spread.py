"""PodTopologySpread's rules on the simulated backend, through the real scheduler."""

import asyncio
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import MALFORMED, pod_from_dict
from pysched.api.spread import spread_constraints
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.status import Code
from pysched.plugins import default_registry
from pysched.plugins.pod_topology_spread import MISSING_LABEL, NAME, REASON, PodTopologySpread
from pysched.scheduler.scheduler import Scheduler
from pysched.scheduler.selection import SelectionCache

ZONE = "topology.kubernetes.io/zone"
TAINT = {"key": "t", "value": "x", "effect": "NoSchedule"}


def _profile(args: dict[str, Any] | None = None, score: bool = True) -> dict[str, Any]:
    plugins: dict[str, Any] = {
        "queueSort": [{"name": "PrioritySort"}],
        "preFilter": [{"name": NAME}],
        "filter": [
            {"name": "NodeUnschedulable"},
            {"name": "TaintToleration"},
            {"name": "NodeAffinity"},
            {"name": "NodeResourcesFit"},
            {"name": NAME},
        ],
        "score": [{"name": "LeastAllocated", "weight": 1}],
        "bind": [{"name": "DefaultBinder"}],
    }
    if score:
        plugins["preScore"] = [{"name": NAME}]
        plugins["score"].append({"name": NAME, "weight": 2})
    profile: dict[str, Any] = {"schedulerName": "spread", "plugins": plugins}
    if args is not None:
        profile["pluginConfig"] = [{"name": NAME, "args": args}]
    return {"profiles": [profile]}


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _setup(args: dict[str, Any] | None = None, score: bool = True) -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    config = parse_config(_profile(args, score), "test", registry)
    return clock, cluster, Scheduler(config, cluster, clock, registry)


def _plugin(scheduler: Scheduler) -> PodTopologySpread:
    plugin = scheduler.frameworks["spread"].plugins[NAME]
    assert isinstance(plugin, PodTopologySpread)
    return plugin


def _spread(key: str = ZONE, skew: int = 1, when: str = "DoNotSchedule", **extra: Any) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": "web"}},
        **extra,
    }


def _pod(name: str, *constraints: dict[str, Any], labels: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    kw.setdefault("cpu", "100m")
    raw = pod_dict(name, memory="64Mi", scheduler_name="spread", labels=labels or {"app": "web"}, **kw)
    if constraints:
        raw["spec"]["topologySpreadConstraints"] = list(constraints)
    return raw


def _zones(cluster: SimulatedCluster, per_zone: dict[str, int], **kw: Any) -> None:
    for zone, count in per_zone.items():
        for i in range(count):
            cluster.add_node(node_dict(f"{zone}-{i}", cpu="64", memory="64Gi", labels={ZONE: zone}, **kw))


def _zone_of(cluster: SimulatedCluster, key: str) -> str | None:
    node = cluster.pods[PodKey(key)].node_name
    return None if node is None else cluster.nodes[node].labels.get(ZONE)


def _failure(cluster: SimulatedCluster, key: str) -> str:
    return [e.note for e in cluster.events if e.pod == key and e.reason == "FailedScheduling"][-1]


def test_zone_spread_max_skew_1_fills_three_zones_evenly(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup(score=False)
        # Zone a has the most room by far: LeastAllocated alone would stack pods there.
        _zones(cluster, {"a": 3, "b": 1, "c": 1})
        await scheduler.start()
        for i in range(9):
            cluster.create_pod(_pod(f"p{i}", _spread()))
            await scheduler.run_until_idle()
        zones = Counter(_zone_of(cluster, f"default/p{i}") for i in range(9))
        assert zones == {"a": 3, "b": 3, "c": 3}
        await scheduler.stop()

    loop.run_until_complete(run())


def test_imbalance_beyond_max_skew_stays_pending_with_kube_message(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        clock, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1, "b": 1})
        # Two matching pods in zone a already; zone b is cordoned, so the only place is a.
        cluster.add_node(node_dict("b-0", cpu="64", memory="64Gi", labels={ZONE: "b"}, unschedulable=True))
        for i in range(2):
            cluster.create_pod(_pod(f"old{i}", node_name="a-0", labels={"app": "web"}))
        await scheduler.start()
        cluster.create_pod(_pod("new", _spread()))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/new")].node_name is None
        note = _failure(cluster, "default/new")
        assert note == f"0/2 nodes are available: 1 {REASON}, 1 node(s) were unschedulable."
        assert cluster.conditions[PodKey("default/new")]["PodScheduled"].reason == "Unschedulable"
        # Deleting the matching pods (PodDelete of pods its selector matches) requeues it.
        cluster.delete_pod(PodKey("default/old0"))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/new")].node_name is None  # skew 1 + 1 - 0 = 2 still
        cluster.delete_pod(PodKey("default/old1"))
        clock.advance(10.0)  # past the backoff
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/new")].node_name == "a-0"
        await scheduler.stop()

    loop.run_until_complete(run())


def test_other_namespaces_and_terminating_pods_are_not_counted(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1, "b": 1})
        cluster.create_pod(_pod("foreign1", node_name="a-0", namespace="other"))
        cluster.create_pod(_pod("foreign2", node_name="a-0", namespace="other"))
        dying = _pod("dying", node_name="a-0")
        dying["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        cluster.create_pod(dying)
        await scheduler.start()
        plugin = _plugin(scheduler)
        state = CycleState()
        pod = pod_from_dict(_pod("probe", _spread()))
        assert plugin.pre_filter(state, pod, scheduler.cache.nodes).ok
        assert plugin.filter_batch(state, pod, scheduler.cache.nodes).feasible.all()
        await scheduler.stop()

    loop.run_until_complete(run())


def test_min_domains_makes_the_global_minimum_zero(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1, "b": 1})
        await scheduler.start()
        constraint = _spread(skew=1, minDomains=3)  # only two zones exist: the minimum counts as 0
        for i in range(3):
            cluster.create_pod(_pod(f"p{i}", constraint))
            await scheduler.run_until_idle()
        placed = [_zone_of(cluster, f"default/p{i}") for i in range(3)]
        assert sorted(z for z in placed if z) == ["a", "b"]  # one per zone, then no room
        assert placed[2] is None
        assert REASON in _failure(cluster, "default/p2")
        await scheduler.stop()

    loop.run_until_complete(run())


def test_node_affinity_policy_honor_and_ignore(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1, "b": 1, "c": 1})
        for i in range(2):  # zone c holds matching pods but the incoming pod may not go there
            cluster.create_pod(_pod(f"c{i}", node_name="c-0"))
        await scheduler.start()
        affinity = [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}]
        # Honor (default): zone c is left out, the minimum is 0 in a and b, so the pod lands.
        cluster.create_pod(_pod("honor", _spread(), affinity_terms=affinity))
        # Ignore: zone c counts with 2 pods, but a and b have 0: min 0 again; skew on a = 1 fits.
        await scheduler.run_until_idle()
        assert _zone_of(cluster, "default/honor") in ("a", "b")
        # A pod allowed only in zone c: with Ignore its min is 0 (zones a/b counted) -> skew 3 > 1.
        only_c = [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["c"]}]}]
        cluster.create_pod(_pod("ignore", _spread(nodeAffinityPolicy="Ignore"), affinity_terms=only_c))
        # With Honor only zone c is a domain: its own minimum, skew 1 fits.
        cluster.create_pod(_pod("honored", _spread(), affinity_terms=only_c))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/ignore")].node_name is None
        assert cluster.pods[PodKey("default/honored")].node_name == "c-0"
        await scheduler.stop()

    loop.run_until_complete(run())


def test_node_taints_policy_honor_leaves_untolerated_nodes_out(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1})
        cluster.add_node(node_dict("b-0", cpu="64", memory="64Gi", labels={ZONE: "b"}, taints=[TAINT]))
        cluster.create_pod(_pod("a0", node_name="a-0"))
        await scheduler.start()
        # Ignore (default): tainted zone b is a domain with 0 pods, so zone a (1 pod) is at skew 2.
        cluster.create_pod(_pod("ignore", _spread()))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/ignore")].node_name is None
        # Honor: zone b is not a domain for this pod; zone a alone is its own minimum.
        cluster.create_pod(_pod("honor", _spread(nodeTaintsPolicy="Honor")))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/honor")].node_name == "a-0"
        await scheduler.stop()

    loop.run_until_complete(run())


def test_node_without_the_topology_key_fails_unresolvable(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        clock, cluster, scheduler = _setup()
        cluster.add_node(node_dict("bare", cpu="64", memory="64Gi"))
        await scheduler.start()
        cluster.create_pod(_pod("p", _spread()))
        await scheduler.run_until_idle()
        assert _failure(cluster, "default/p") == f"0/1 nodes are available: 1 {MISSING_LABEL}."
        condition = cluster.conditions[PodKey("default/p")]["PodScheduled"]
        assert condition.reason == "Unschedulable"
        # The label arrives: NodeUpdate with the key requeues the pod, which now lands.
        cluster.add_node(node_dict("bare", cpu="64", memory="64Gi", labels={ZONE: "a"}))
        clock.advance(10.0)
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/p")].node_name == "bare"
        await scheduler.stop()

    loop.run_until_complete(run())


def test_match_label_keys_split_the_count_by_the_pods_own_value(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1, "b": 1})
        cluster.add_node(node_dict("b-1", cpu="64", memory="64Gi", labels={ZONE: "b"}, unschedulable=True))
        for i in range(3):  # an older revision crowds zone a
            cluster.create_pod(_pod(f"old{i}", node_name="a-0", labels={"app": "web", "rev": "1"}))
        cluster.add_node(node_dict("b-0", cpu="64", memory="64Gi", labels={ZONE: "b"}, unschedulable=True))
        await scheduler.start()
        constraint = _spread(matchLabelKeys=["rev"])
        cluster.create_pod(_pod("new", constraint, labels={"app": "web", "rev": "2"}))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/new")].node_name == "a-0"  # revision 2 counts 0 there
        cluster.create_pod(_pod("same", _spread(), labels={"app": "web", "rev": "2"}))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/same")].node_name is None  # without the key: 4 in a
        await scheduler.stop()

    loop.run_until_complete(run())


def test_a_key_the_apiserver_merged_already_is_not_merged_again_from_changed_labels() -> None:
    """An apiserver that merges matchLabelKeys at creation stores `rev In (1)`; the pod relabelled
    to rev=2 keeps counting revision 1, not a selector no pod matches."""
    constraint = _spread(matchLabelKeys=["rev"])
    constraint["labelSelector"]["matchExpressions"] = [{"key": "rev", "operator": "In", "values": ["1"]}]
    (parsed,) = spread_constraints([constraint])
    selector = parsed.selector_for({"app": "web", "rev": "2"})
    assert selector.matches({"app": "web", "rev": "1"}) and not selector.matches({"app": "web", "rev": "2"})
    (unmerged,) = spread_constraints([_spread(matchLabelKeys=["rev"])])  # no apiserver merged it: merged here
    assert unmerged.selector_for({"app": "web", "rev": "2"}).matches({"app": "web", "rev": "2"})
    assert not unmerged.selector_for({"app": "web", "rev": "2"}).matches({"app": "web", "rev": "1"})


def test_schedule_anyway_prefers_the_emptier_zone(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1, "b": 1})
        for i in range(3):
            cluster.create_pod(_pod(f"a{i}", node_name="a-0", cpu="10m"))
        cluster.create_pod(_pod("hog", node_name="b-0", cpu="8", labels={"app": "other"}))
        await scheduler.start()
        cluster.create_pod(_pod("soft", _spread(when="ScheduleAnyway")))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/soft")].node_name == "b-0"
        await scheduler.stop()

    loop.run_until_complete(run())


def test_default_constraints_follow_the_service_selecting_the_pod(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        cluster.set_service("default", "web", {"app": "web"})
        for i in range(3):
            cluster.add_node(node_dict(f"n{i}", cpu="64", memory="64Gi", labels={ZONE: "z"}))
        await scheduler.start()
        for i in range(6):
            cluster.create_pod(_pod(f"p{i}"))
            await scheduler.run_until_idle()
        per_node = Counter(cluster.pods[PodKey(f"default/p{i}")].node_name for i in range(6))
        assert sorted(per_node.values()) == [2, 2, 2]  # hostname spreading, not LeastAllocated's stack
        await scheduler.stop()

    loop.run_until_complete(run())


def test_default_selector_combines_services_and_the_replicaset() -> None:
    clock = VirtualClock(0.0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    scheduler = Scheduler(parse_config(_profile(), "t", registry), cluster, clock, registry)
    plugin = _plugin(scheduler)
    raw = _pod("p", labels={"app": "web", "tier": "front"})
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": True}
    ]
    pod = pod_from_dict(raw)
    assert plugin.default_selector(pod) is None  # nothing known selects it
    cluster.set_service("default", "svc", {"app": "web"})
    cluster.set_service("default", "unrelated", {"app": "db"})
    cluster.set_controller("default", "ReplicaSet", "rs", {"matchLabels": {"tier": "front"}})
    selector = plugin.default_selector(pod)
    assert selector is not None
    assert selector.match_labels == (("app", "web"),)
    assert selector.match_expressions == (("tier", "In", ("front",)),)


def test_plain_pods_skip_both_points_and_keep_the_fast_path(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        _zones(cluster, {"a": 2})
        await scheduler.start()
        plugin = _plugin(scheduler)
        state = CycleState()
        pod = pod_from_dict(_pod("plain"))
        nodes = scheduler.cache.nodes
        assert plugin.pre_filter(state, pod, nodes).code is Code.SKIP
        assert plugin.pre_score(state, pod, nodes, nodes.present[: nodes.size]).code is Code.SKIP
        calls = []
        original = SelectionCache.select

        def counting(*args: Any) -> Any:
            calls.append(1)
            return original(*args)

        monkeypatch.setattr(SelectionCache, "select", counting)
        cluster.create_pod(_pod("plain"))
        await scheduler.run_until_idle()
        assert calls == [1]  # the kernel's incremental selection answered
        assert len(plugin.counts) == 0  # and no count array was built for it
        await scheduler.stop()

    loop.run_until_complete(run())


@pytest.mark.parametrize(
    ("constraint", "problem"),
    [
        ({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}}, "operator"),
        ({"topologyKey": "not a key!"}, "label key"),
        ({"labelSelector": {"matchLabels": {"app": "bad value!"}}}, "label value"),
    ],
)
def test_a_selector_or_key_that_does_not_parse_is_unresolvable(
    loop: asyncio.AbstractEventLoop, constraint: dict[str, Any], problem: str
) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1})
        await scheduler.start()
        cluster.create_pod(_pod("bad", {**_spread(), **constraint}))
        cluster.create_pod(_pod("good", _spread()))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/good")].node_name == "a-0"
        assert cluster.pods[PodKey("default/bad")].node_name is None
        note = _failure(cluster, "default/bad")
        assert note.startswith("0/1 nodes are available: invalid topology spread constraint 0: ")
        assert problem in note
        await scheduler.stop()

    loop.run_until_complete(run())


@pytest.mark.parametrize(
    "raw",
    [
        "zone",
        [{"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}],
        [{"maxSkew": "1", "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}],
        [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Sometimes"}],
        [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": "app=web"}],
        [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Maybe"}],
        [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}] * 17,
        [{"maxSkew": 2**31, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}],
    ],
)
def test_malformed_constraints_are_refused_where_they_are_read(raw: Any) -> None:
    with pytest.raises(MALFORMED):
        spread_constraints(raw)


def test_malformed_constraints_give_the_invalid_pod_event(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> None:
        _, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1})
        await scheduler.start()
        cluster.create_pod(_pod("bad", {"maxSkew": -1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}))
        cluster.create_pod(_pod("good", _spread()))
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/good")].node_name == "a-0"
        assert PodKey("default/bad") not in cluster.pods or cluster.pods[PodKey("default/bad")].node_name is None
        await scheduler.stop()

    loop.run_until_complete(run())


def test_only_nodes_missing_the_key_are_unresolvable_a_skew_is_not(loop: asyncio.AbstractEventLoop) -> None:
    """kube: the missing label is UnschedulableAndUnresolvable on that node, a skew Unschedulable
    (preemption may remove the pods that make it)."""

    async def run() -> None:
        _, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1, "b": 1})
        cluster.add_node(node_dict("bare", cpu="64", memory="64Gi"))
        await scheduler.start()
        for i in range(2):
            cluster.create_pod(_pod(f"w{i}", node_selector={ZONE: "a"}))
        await scheduler.run_until_idle()
        incoming = pod_from_dict(_pod("p", _spread()))
        state = CycleState()
        assert scheduler.frameworks["spread"].find_node(state, incoming).node == "b-0"
        nodes = scheduler.cache.nodes
        result = _plugin(scheduler).filter_batch(state, incoming, nodes)
        failing = nodes.present[: nodes.size] & ~result.feasible
        hard = result.unresolvable_rows(failing)
        assert {nodes.names[r] for r in np.flatnonzero(failing)} == {"a-0", "bare"}
        assert {nodes.names[r] for r in np.flatnonzero(hard)} == {"bare"}
        await scheduler.stop()

    loop.run_until_complete(run())


def test_a_node_deleted_with_its_empty_domain_lets_a_waiting_pod_go_at_once(loop: asyncio.AbstractEventLoop) -> None:
    # Zone b is empty, so a second pod in zone a would make the skew 2: it waits. Zone b's only
    # node is deleted: the domain is gone, and the pod goes without waiting for the periodic retry.
    async def run() -> None:
        clock, cluster, scheduler = _setup()
        _zones(cluster, {"a": 1, "b": 1})
        await scheduler.start()
        cluster.create_pod(_pod("e1", node_name="a-0"))
        cluster.create_pod(_pod("p", _spread(nodeAffinityPolicy="Ignore"), node_selector={ZONE: "a"}))
        await scheduler.run_until_idle()
        clock.advance(20)  # past its backoff, far from the 5-minute retry of unschedulable pods
        await scheduler.run_until_idle()
        assert _zone_of(cluster, "default/p") is None
        cluster.delete_node(NodeName("b-0"))
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _zone_of(cluster, "default/p") == "a"
        await scheduler.stop()

    loop.run_until_complete(run())


SOFT_ZONE = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        ([{**SOFT_ZONE, "minDomain": 3}], r"defaultConstraints\[0\]\.minDomain: unknown field \(accepted: maxSkew,"),
        ([{**SOFT_ZONE, "minDomains": 3}], r"defaultConstraints\[0\]\.minDomains: applies to whenUnsatisfiable Do"),
        (
            [SOFT_ZONE, {**SOFT_ZONE, "maxSkew": 2}],
            r"defaultConstraints\[1\]: repeats the topologyKey and whenUnsatisfiable of defaultConstraints\[0\]",
        ),
        (
            [{**SOFT_ZONE, "matchLabelKeys": ["app"]}],
            r"defaultConstraints\[0\]\.matchLabelKeys: a default constraint's",
        ),
    ],
)
def test_default_constraints_kube_scheduler_refuses_are_refused(constraints: list[Any], message: str) -> None:
    """A misspelt key, minDomains where no filter reads it, a repeated constraint and keys that are
    never merged in: each would be accepted and silently change nothing."""
    from pysched.framework.config import ConfigError

    args = {"defaultingType": "List", "defaultConstraints": constraints}
    with pytest.raises(ConfigError, match=rf"pluginConfig\[0\]\.args\.{message}"):
        parse_config(_profile(args), "test", default_registry())


def test_default_constraints_of_each_kind_load() -> None:
    hard = {**SOFT_ZONE, "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3, "nodeTaintsPolicy": "Honor"}
    host = {**SOFT_ZONE, "topologyKey": "kubernetes.io/hostname", "nodeAffinityPolicy": "Ignore"}
    args = {"defaultingType": "List", "defaultConstraints": [SOFT_ZONE, hard, host]}
    assert parse_config(_profile(args), "test", default_registry()).profiles
