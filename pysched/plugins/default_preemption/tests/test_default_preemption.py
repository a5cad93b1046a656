"""DefaultPreemption on the simulated backend: the same scheduler, plugin and backend calls as live."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from typing import Any, ClassVar

from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import node_dict, pod_dict
from pysched.api.disruption import budget_from_dict, nominated_node
from pysched.api.ids import NodeName, PodKey
from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS
from pysched.api.objects import PodInfo
from pysched.api.times import format_rfc3339
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.framework.cluster import PodCondition
from pysched.framework.config import parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import EventRegistration
from pysched.framework.interfaces import Handle
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SUCCESS, Code, Status, error, unschedulable
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.default_preemption.reference import RefBudget, RefPod, choose
from pysched.scheduler.scheduler import Scheduler
from pysched.testing.simulated import settle

T0 = 1_000_000.0
PROFILE = {
    "profiles": [
        {
            "schedulerName": "pysched",
            "plugins": {
                "queueSort": [{"name": "PrioritySort"}],
                "filter": [
                    {"name": "NodeUnschedulable"},
                    {"name": "TaintToleration"},
                    {"name": "NodeResourcesFit"},
                ],
                "postFilter": [{"name": "DefaultPreemption"}],
                "score": [{"name": "LeastAllocated", "weight": 1}],
                "bind": [{"name": "DefaultBinder"}],
            },
        }
    ]
}


def _world(permit: bool = False, preemption_args: dict[str, Any] | None = None) -> tuple[SimulatedCluster, Scheduler]:
    """The profile above; `permit` adds `_PermitByLabel`, `preemption_args` DefaultPreemption's args."""
    clock = VirtualClock(T0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    profile: dict[str, Any] = copy.deepcopy(PROFILE)
    if permit:
        registry.register(PluginSpec(_PermitByLabel.NAME, NoArgs, _PermitByLabel, _PermitByLabel))
        profile["profiles"][0]["plugins"]["permit"] = [{"name": _PermitByLabel.NAME}]
    if preemption_args is not None:
        profile["profiles"][0]["pluginConfig"] = [{"name": "DefaultPreemption", "args": preemption_args}]
    return cluster, Scheduler(parse_config(profile, "t", registry), cluster, clock, registry)


class _PermitByLabel:
    """Holds pods labelled wait=yes at Permit (as a gang's members wait there) and rejects those
    labelled reject=yes."""

    NAME: ClassVar[str] = "PermitByLabel"

    def __init__(self, args: NoArgs, handle: Handle) -> None:
        pass

    def events_to_register(self) -> Sequence[EventRegistration]:
        return ()

    def permit(self, state: CycleState, pod: PodInfo, node: NodeName) -> tuple[Status, float]:
        if pod.labels.get("reject") == "yes":
            return unschedulable("not now", plugin=self.NAME), 0.0
        return (Status(Code.WAIT), 600.0) if pod.labels.get("wait") == "yes" else (SUCCESS, 0.0)


def _running(name: str, node: str, *, priority: int, cpu: str, started: float = T0 - 100, **kw: Any) -> dict[str, Any]:
    raw = pod_dict(name, priority=priority, cpu=cpu, memory="1Gi", node_name=node, **kw)
    raw["status"] = {"phase": "Running", "startTime": format_rfc3339(started)}
    return raw


def _run(cluster: SimulatedCluster, scheduler: Scheduler) -> None:
    settle(scheduler)


def _events(cluster: SimulatedCluster, reason: str) -> list[tuple[str, str, str]]:
    return [(e.pod, e.type, e.note) for e in cluster.events if e.reason == reason]


def _no_disruption_of_db(cluster: SimulatedCluster) -> None:
    """A PodDisruptionBudget that allows no app=db pod to go."""
    selector = {"matchLabels": {"app": "db"}}
    budget = {"metadata": {"name": "db", "namespace": "default"}, "spec": {"selector": selector}}
    cluster.add_budget({**budget, "status": {"disruptionsAllowed": 0}})


def test_a_high_priority_pod_evicts_the_minimal_lower_priority_set_on_the_best_node() -> None:
    cluster, scheduler = _world()
    for name in ("a", "b"):
        cluster.add_node(node_dict(name, cpu="4", memory="64Gi"))
    cluster.create_pod(_running("a1", "a", priority=1, cpu="2"))
    cluster.create_pod(_running("a2", "a", priority=2, cpu="1"))
    cluster.create_pod(_running("a3", "a", priority=3, cpu="1"))
    cluster.create_pod(_running("b1", "b", priority=5, cpu="2"))
    cluster.create_pod(_running("b2", "b", priority=5, cpu="2"))
    preemptor = cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi"))
    assert preemptor is not None
    _run(cluster, scheduler)
    # node a's highest victim has priority 1, b's 5: only a1 goes, a2 and a3 are reprieved
    assert cluster.preempted == [PodKey("default/a1")]
    assert cluster.pods[PodKey("default/hi")].node_name == "a"
    assert cluster.nominations == [(PodKey("default/hi"), "a")]
    assert nominated_node(cluster.pods[PodKey("default/hi")]) is None  # the apiserver clears it on binding
    assert _events(cluster, "Preempted") == [("default/a1", "Normal", f"Preempted by pod {preemptor.uid} on node a")]
    scheduler.cache.check_consistency()


def test_equal_priority_is_never_preempted() -> None:
    cluster, scheduler = _world()
    cluster.add_node(node_dict("a", cpu="4", memory="64Gi"))
    cluster.create_pod(_running("same", "a", priority=10, cpu="4"))
    cluster.create_pod(_running("higher", "a", priority=11, cpu="0"))
    cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi"))
    _run(cluster, scheduler)
    assert cluster.preempted == []
    assert cluster.pods[PodKey("default/hi")].node_name is None
    (failure,) = {note for _, _, note in _events(cluster, "FailedScheduling")}
    assert failure == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_preemption_policy_never_forbids() -> None:
    cluster, scheduler = _world()
    cluster.add_node(node_dict("a", cpu="4", memory="64Gi"))
    cluster.create_pod(_running("low", "a", priority=0, cpu="4"))
    raw = pod_dict("hi", priority=10, cpu="2", memory="1Gi")
    raw["spec"]["preemptionPolicy"] = "Never"
    cluster.create_pod(raw)
    _run(cluster, scheduler)
    assert cluster.preempted == []
    (failure,) = {note for _, _, note in _events(cluster, "FailedScheduling")}
    assert failure.endswith("Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.")


def test_unresolvable_nodes_are_no_candidates() -> None:
    cluster, scheduler = _world()
    cluster.add_node(
        node_dict("a", cpu="4", memory="64Gi", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    )
    cluster.add_node(node_dict("b", cpu="4", memory="64Gi"))
    cluster.create_pod(_running("la", "a", priority=0, cpu="4"))
    cluster.create_pod(_running("lb", "b", priority=0, cpu="4"))
    cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi"))
    _run(cluster, scheduler)
    assert cluster.preempted == [PodKey("default/lb")]


def test_a_budget_is_respected_when_another_node_has_none() -> None:
    cluster, scheduler = _world()
    for name in ("a", "b"):
        cluster.add_node(node_dict(name, cpu="4", memory="64Gi"))
    cluster.create_pod(_running("db", "a", priority=0, cpu="4", labels={"app": "db"}))
    cluster.create_pod(_running("web", "b", priority=0, cpu="4", labels={"app": "web"}, started=T0 - 1000))
    _no_disruption_of_db(cluster)
    cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi"))
    _run(cluster, scheduler)
    assert cluster.preempted == [PodKey("default/web")]
    assert cluster.pods[PodKey("default/hi")].node_name == "b"


def test_the_deadline_tie_break_picks_the_best_effort_victim_when_kube_ties() -> None:
    cluster, scheduler = _world()
    for name in ("a", "b"):
        cluster.add_node(node_dict(name, cpu="4", memory="64Gi"))
    deadline = {"pysched.io/deadline": format_rfc3339(T0 + 3600)}
    cluster.create_pod(_running("job", "a", priority=0, cpu="4", annotations=deadline))
    cluster.create_pod(_running("batch", "b", priority=0, cpu="4"))
    cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi"))
    _run(cluster, scheduler)
    assert cluster.preempted == [PodKey("default/batch")]


def test_among_deadline_victims_the_one_with_most_slack_goes() -> None:
    cluster, scheduler = _world()
    for name in ("a", "b"):
        cluster.add_node(node_dict(name, cpu="4", memory="64Gi"))
    started = T0 - 1000
    tight = {
        "pysched.io/deadline": format_rfc3339(T0 + 3600),
        "pysched.io/total-steps": "1000",
        "pysched.io/progress": f"500@{format_rfc3339(T0)}",  # 2 s a step: 2,000 s to redo, 1,600 s spare
    }
    loose = {"pysched.io/deadline": format_rfc3339(T0 + 3000)}  # no progress: 3,000 s spare
    cluster.create_pod(_running("tight", "a", priority=0, cpu="4", annotations=tight, started=started))
    cluster.create_pod(_running("loose", "b", priority=0, cpu="4", annotations=loose, started=started))
    cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi"))
    _run(cluster, scheduler)
    assert cluster.preempted == [PodKey("default/loose")]


def test_a_nominated_pod_holds_its_room_from_lower_priority_pods() -> None:
    cluster, scheduler = _world()
    cluster.add_node(node_dict("a", cpu="4", memory="64Gi"))
    _run(cluster, scheduler)
    nominated = cluster.create_pod(pod_dict("nom", priority=10, cpu="4", memory="1Gi", scheduler_name="other"))
    assert nominated is not None
    scheduler.nominator.nominate(nominated, NodeName("a"))
    cluster.create_pod(pod_dict("low", priority=0, cpu="2", memory="1Gi"))
    _run(cluster, scheduler)
    assert cluster.pods[PodKey("default/low")].node_name is None
    cluster.delete_pod(PodKey("default/nom"))  # the nomination goes with it
    _run(cluster, scheduler)
    assert cluster.pods[PodKey("default/low")].node_name == "a"
    scheduler.cache.check_consistency()


def _until_idle(scheduler: Scheduler) -> None:
    """Run without moving the clock: a pod refused stays in its backoff."""

    async def go() -> None:
        await scheduler.start()
        await scheduler.run_until_idle()

    asyncio.run(go())


def test_a_nomination_holds_room_from_its_priority_only() -> None:
    """kube-scheduler filters a pod with the nominated pods of its priority or higher: a pod of
    higher priority takes the room a nomination holds, without evicting anything, and the
    nominated pod, left without victims, loses its nomination at its next cycle."""
    cluster, scheduler = _world()
    cluster.add_node(node_dict("a", cpu="4", memory="64Gi"))
    cluster.create_pod(_running("v", "a", priority=0, cpu="3"))
    cluster.create_pod(pod_dict("mid", priority=5, cpu="3", memory="1Gi"))
    _until_idle(scheduler)
    mid, hi, peer = PodKey("default/mid"), PodKey("default/hi"), PodKey("default/peer")
    assert cluster.preempted == [PodKey("default/v")]
    assert scheduler.nominator.nominated(mid) == "a"
    cluster.create_pod(pod_dict("peer", priority=5, cpu="2", memory="1Gi"))
    _until_idle(scheduler)
    assert cluster.pods[peer].node_name is None  # an equal priority counts the nomination
    cluster.create_pod(pod_dict("hi", priority=10, cpu="3", memory="1Gi"))
    _until_idle(scheduler)
    assert cluster.pods[hi].node_name == "a"
    assert cluster.preempted == [PodKey("default/v")]
    assert scheduler.nominator.nominated(mid) == "a"  # until its own cycle, as kube's
    scheduler.cache.check_consistency()
    settle(scheduler)
    assert scheduler.nominator.nominated(mid) is None
    assert cluster.nominations[-1] == (mid, None)
    last = [note for pod, _, note in _events(cluster, "FailedScheduling") if pod == mid][-1]
    assert last.endswith("No preemption victims found for incoming pod.")
    assert cluster.pods[mid].node_name is None and cluster.pods[peer].node_name is None
    scheduler.cache.check_consistency()


def test_a_lower_priority_nomination_does_not_count_in_the_dry_run() -> None:
    cluster, scheduler = _world()
    cluster.add_node(node_dict("a", cpu="4", memory="64Gi"))
    cluster.create_pod(_running("v", "a", priority=0, cpu="3"))
    cluster.create_pod(_running("w", "a", priority=1, cpu="1"))
    cluster.create_pod(pod_dict("mid", priority=5, cpu="3", memory="1Gi"))
    _until_idle(scheduler)
    mid, hi = PodKey("default/mid"), PodKey("default/hi")
    assert cluster.preempted == [PodKey("default/v")]
    cluster.create_pod(pod_dict("hi", priority=10, cpu="4", memory="1Gi"))
    _until_idle(scheduler)
    # w alone is in its way: mid's nomination is dropped, as kube's preemption drops the lower
    # ones on the node it chooses
    assert cluster.preempted == [PodKey("default/v"), PodKey("default/w")]
    assert scheduler.nominator.nominated(hi) == "a" and scheduler.nominator.nominated(mid) is None
    assert (mid, None) in cluster.nominations
    settle(scheduler)
    assert cluster.pods[hi].node_name == "a" and cluster.pods[mid].node_name is None
    scheduler.cache.check_consistency()


def test_a_nomination_counts_in_the_fit_but_not_in_the_scores() -> None:
    """kube-scheduler filters with nominated pods and scores without them: node a, emptier
    without the room held there, wins over b as long as the pod fits beside the nomination."""
    cluster, scheduler = _world()
    for name in ("a", "b"):
        cluster.add_node(node_dict(name, cpu="4", memory="64Gi"))
    cluster.create_pod(_running("r", "b", priority=100, cpu="1"))
    _until_idle(scheduler)
    held = cluster.create_pod(pod_dict("nom", priority=50, cpu="2", memory="1Gi", scheduler_name="other"))
    assert held is not None
    scheduler.nominator.nominate(held, NodeName("a"))
    cluster.create_pod(pod_dict("fits", cpu="1", memory="1Gi"))
    cluster.create_pod(pod_dict("too-big", cpu="3", memory="1Gi"))  # fits a only without the nomination
    _until_idle(scheduler)
    assert cluster.pods[PodKey("default/fits")].node_name == "a"  # b were it scored with the hold
    assert cluster.pods[PodKey("default/too-big")].node_name == "b"
    assert scheduler.cache.is_nominated(PodKey("default/nom"))  # held again after the scoring
    scheduler.cache.check_consistency()


def test_a_preemptor_goes_to_its_nominated_node_when_it_fits_there() -> None:
    """kube-scheduler tries the nominated node first: b, emptier once its pod is gone, would
    score higher, but the room the preemption made on a is taken (else v died for nothing)."""
    cluster, scheduler = _world()
    for name in ("a", "b"):
        cluster.add_node(node_dict(name, cpu="4", memory="64Gi"))
    cluster.create_pod(_running("w", "a", priority=100, cpu="1"))
    cluster.create_pod(_running("v", "a", priority=0, cpu="3"))
    cluster.create_pod(_running("full", "b", priority=1000, cpu="4"))
    cluster.create_pod(pod_dict("hi", priority=10, cpu="3", memory="1Gi"))
    _until_idle(scheduler)
    hi = PodKey("default/hi")
    assert cluster.preempted == [PodKey("default/v")] and scheduler.nominator.nominated(hi) == "a"
    cluster.delete_pod(PodKey("default/full"))
    settle(scheduler)
    assert cluster.pods[hi].node_name == "a"
    scheduler.cache.check_consistency()


def test_a_pod_waiting_at_permit_is_a_victim_not_a_nomination() -> None:
    """Its nominatedNodeName is written while it waits; kube's nominator leaves such an assumed
    pod out, so a higher-priority pod preempts it (rejected at Permit, not deleted)."""
    cluster, scheduler = _world(permit=True)
    cluster.add_node(node_dict("a", cpu="4", memory="64Gi"))
    cluster.create_pod(pod_dict("low", priority=0, cpu="4", memory="1Gi", labels={"wait": "yes"}))
    _until_idle(scheduler)
    low, hi = PodKey("default/low"), PodKey("default/hi")
    assert scheduler.waiting_pods.get(low) is not None and nominated_node(cluster.pods[low]) == "a"
    assert scheduler.nominator.nominated(low) is None
    cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi"))
    settle(scheduler)
    assert scheduler.waiting_pods.get(low) is None  # rejected at Permit: its room is free
    preempted = f"Preempted by pod {cluster.pods[hi].uid} on node a"
    assert _events(cluster, "Preempted") == [("default/low", "Normal", preempted)]
    assert cluster.pods[hi].node_name == "a"
    scheduler.cache.check_consistency()


def test_a_victim_already_being_deleted_is_neither_deleted_again_nor_told() -> None:
    cluster, scheduler = _world()
    cluster.add_node(node_dict("a", cpu="4", memory="64Gi"))
    going = _running("going", "a", priority=0, cpu="4")
    going["metadata"]["deletionTimestamp"] = format_rfc3339(T0 - 5)
    cluster.create_pod(going)
    cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi"))
    _until_idle(scheduler)
    assert scheduler.nominator.nominated(PodKey("default/hi")) == "a"  # it waits for that room
    assert cluster.preempted == [] and _events(cluster, "Preempted") == []


def test_a_gang_member_its_sibling_released_at_permit_is_not_deleted() -> None:
    """Both waiting members of a gang are victims. Rejecting the first unreserves it, and its
    gang's Unreserve rejects the second: that one is back in the queue, its room free, and never
    ran. It is neither deleted (a pointless eviction of a pending pod) nor told it was preempted."""
    clock = VirtualClock(T0)
    cluster = SimulatedCluster(clock)
    registry = default_registry()
    scheduler = Scheduler(builtin_config(registry).only("default"), cluster, clock, registry)
    cluster.add_node(node_dict("a", cpu="12", memory="64Gi"))
    for i in range(3):
        member = pod_dict(f"g-{i}", priority=0, cpu="4", memory="1Gi", scheduler_name="default",
                          labels={JOB_LABEL: "g"}, annotations={MIN_MEMBERS: "3"})  # fmt: skip
        if i == 2:  # a member that exists but is held back: the other two wait at Permit
            member["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
        cluster.create_pod(member)
    _until_idle(scheduler)
    assert len(scheduler.waiting_pods) == 2
    cluster.create_pod(pod_dict("hi", priority=10, cpu="12", memory="1Gi", scheduler_name="default"))
    settle(scheduler)
    hi = cluster.pods[PodKey("default/hi")]
    assert cluster.preempted == [] and {PodKey("default/g-0"), PodKey("default/g-1")} <= cluster.pods.keys()
    assert _events(cluster, "Preempted") == [("default/g-0", "Normal", f"Preempted by pod {hi.uid} on node a")]
    assert hi.node_name == "a" and len(scheduler.waiting_pods) == 0
    assert int(scheduler.cache.nodes.requested[0, 0]) == 12000  # the preemptor alone
    scheduler.cache.check_consistency()


def test_budget_violating_candidates_are_kept_only_as_many_as_wanted() -> None:
    """kube's dry run keeps at most as many candidates of each kind as it looks for: with one
    wanted and every node's victim under a budget, the first node found is the only one
    compared, although b's victim has the lower priority."""
    cluster, scheduler = _world(preemption_args={"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1})
    for name, priority in (("a", 5), ("b", 1)):
        cluster.add_node(node_dict(name, cpu="4", memory="64Gi"))
        cluster.create_pod(_running(f"on-{name}", name, priority=priority, cpu="4", labels={"app": "db"}))
    _no_disruption_of_db(cluster)
    cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi"))
    _run(cluster, scheduler)
    assert cluster.preempted == [PodKey("default/on-a")]
    assert cluster.pods[PodKey("default/hi")].node_name == "a"


def test_a_nomination_is_cleared_when_the_pod_fails_past_the_filters() -> None:
    """kube clears nominatedNodeName when Reserve, Permit or the binding fails; kept, it would
    hold the room again at the pod's next update."""
    cluster, scheduler = _world(permit=True)
    cluster.add_node(node_dict("a", cpu="4", memory="64Gi"))
    cluster.create_pod(_running("low", "a", priority=0, cpu="4"))
    cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi", labels={"reject": "yes"}))
    _until_idle(scheduler)
    hi = PodKey("default/hi")
    assert nominated_node(cluster.pods[hi]) == "a" and scheduler.nominator.nominated(hi) == "a"
    settle(scheduler)  # its next cycle finds room on a, and Permit refuses it there
    assert cluster.nominations[-1] == (hi, None) and nominated_node(cluster.pods[hi]) is None
    assert scheduler.nominator.nominated(hi) is None and not scheduler.cache.is_nominated(hi)
    scheduler.cache.check_consistency()


def test_a_node_where_even_every_victim_gone_is_not_enough_names_the_filter_that_still_refuses() -> None:
    """kube's node status from the dry run: the filter that refuses the pod with every
    lower-priority pod gone (here NodeResourcesFit), not 'Preemption is not helpful'."""
    cluster, scheduler = _world()
    for name in ("a", "b"):
        cluster.add_node(node_dict(name, cpu="4", memory="64Gi"))
    cluster.add_node(node_dict("c", cpu="4", memory="64Gi", unschedulable=True))  # a cordon: no help
    cluster.create_pod(_running("kept", "a", priority=100, cpu="3"))
    cluster.create_pod(_running("low", "a", priority=0, cpu="1"))
    cluster.create_pod(_running("full", "b", priority=100, cpu="4"))
    cluster.create_pod(pod_dict("p", priority=10, cpu="2", memory="1Gi"))
    _until_idle(scheduler)
    (note,) = {note for _, _, note in _events(cluster, "FailedScheduling")}
    assert note.endswith(
        "preemption: 0/3 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    ), note
    assert cluster.preempted == []


class _ConditionsRefused(SimulatedCluster):
    """An API server that refuses every condition write (a webhook, a conflict storm)."""

    async def patch_pod_conditions(self, pod: PodInfo, *conditions: PodCondition) -> Status:
        return error(f"conditions of {pod.key} not written: refused")


def test_a_victim_is_not_deleted_without_its_disruption_target_condition() -> None:
    """kube deletes a victim only once the condition is written: its Job tells a preemption from
    a failure by it (podFailurePolicy), so one deleted without it would count as failed."""
    clock = VirtualClock(T0)
    cluster = _ConditionsRefused(clock)
    registry = default_registry()
    scheduler = Scheduler(parse_config(PROFILE, "t", registry), cluster, clock, registry)
    cluster.add_node(node_dict("a", cpu="4", memory="64Gi"))
    cluster.create_pod(_running("low", "a", priority=0, cpu="4"))
    cluster.create_pod(pod_dict("hi", priority=10, cpu="2", memory="1Gi"))
    _until_idle(scheduler)
    assert scheduler.nominator.nominated(PodKey("default/hi")) == "a"
    assert cluster.preempted == [] and _events(cluster, "Preempted") == []
    assert PodKey("default/low") in cluster.pods


def test_budgets_parse_bounded_and_bad_selectors_match_nothing() -> None:
    bad = budget_from_dict(
        {"metadata": {"name": "x"}, "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}}
    )
    assert bad.selector is None and bad.disruptions_allowed == 0
    try:
        budget_from_dict({"metadata": {"name": "x"}, "status": {"disruptionsAllowed": "many"}})
    except TypeError as err:
        assert "disruptionsAllowed" in str(err)
    else:
        raise AssertionError("a non-integer disruptionsAllowed was read")


# ----- the whole stack against the plain reference on small random clusters
_pods = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(0, 3), st.booleans(), st.booleans()),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(_pods, min_size=1, max_size=4),
    preemptor=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    budget_allowed=st.integers(0, 1),
)
def test_the_plugin_equals_the_reference(
    nodes: list[list[tuple[int, int, int, bool, bool]]], preemptor: tuple[int, int], budget_allowed: int
) -> None:
    cluster, scheduler = _world()
    ref_nodes = []
    for n, pods in enumerate(nodes):
        name = f"n{n}"
        cluster.add_node(node_dict(name, cpu="4", memory="64Gi", pods=8))
        placed: list[RefPod] = []
        used = 0
        for i, (priority, cpu, age, guarded, deadline) in enumerate(pods):
            if used + cpu > 4:
                continue
            used += cpu
            labels = {"app": "guarded"} if guarded else {"app": "free"}
            annotations = {"pysched.io/deadline": format_rfc3339(T0 + 1000 * (age + 1))} if deadline else {}
            pod = f"{name}-{i}"
            started = T0 - 10 * age
            cluster.create_pod(
                _running(
                    pod, name, priority=priority, cpu=str(cpu), started=started, labels=labels, annotations=annotations
                )
            )
            slack = 1000.0 * (age + 1) if deadline else None
            placed.append(RefPod(f"default/{pod}", priority, started, {"cpu": cpu * 1000}, labels, slack))
        ref_nodes.append((name, {"cpu": 4000, "pods": 8}, placed))
    cluster.add_budget(
        {
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "guarded"}}},
            "status": {"disruptionsAllowed": budget_allowed},
        }
    )
    priority, cpu = preemptor
    cluster.create_pod(pod_dict("hi", priority=priority, cpu=str(cpu), memory="1Gi"))
    fits_somewhere = any(sum(p.requests["cpu"] for p in pods) + cpu * 1000 <= 4000 for _, _, pods in ref_nodes)
    _run(cluster, scheduler)
    if fits_somewhere:
        assert cluster.preempted == []
        return
    expected = choose(
        ref_nodes, RefPod("hi", priority, T0, {"cpu": cpu * 1000}), [RefBudget({"app": "guarded"}, budget_allowed)]
    )
    if expected is None:
        assert cluster.preempted == []
        assert cluster.pods[PodKey("default/hi")].node_name is None
        return
    node, victims = expected
    assert cluster.preempted == [PodKey(v.name) for v in victims]
    assert cluster.pods[PodKey("default/hi")].node_name == node
    scheduler.cache.check_consistency()
