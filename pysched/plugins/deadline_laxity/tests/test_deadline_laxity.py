import asyncio
import collections
from typing import Any

import pytest
import yaml

from pysched.api.builders import make_pod, node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.api.jobs import JOB_LABEL, ROLE_LABEL
from pysched.api.objects import pod_from_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.deadline.predictor import prior_step_ratio
from pysched.framework.clock import VirtualClock
from pysched.framework.config import ConfigError, parse_config
from pysched.framework.interfaces import Handle, QueuedPod
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import ArgsError, parse_args
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.deadline_laxity import NAME, DeadlineLaxity, DeadlineLaxityArgs
from pysched.scheduler.scheduler import Scheduler

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def _plugin(now: float = T0, prior: float = 0.0) -> tuple[DeadlineLaxity, SimulatedCluster]:
    clock = VirtualClock(now)
    cluster = SimulatedCluster(clock)
    return DeadlineLaxity(DeadlineLaxityArgs(prior), Handle(cluster, clock, NodeTable())), cluster


def _queued(name: str, created: float = T0, priority: int = 0, cpu: str = "2", **notes: str) -> QueuedPod:
    annotations = {f"pysched.io/{k.replace('_', '-')}": v for k, v in notes.items()}
    pod = make_pod(name, priority=priority, created=created, cpu=cpu, annotations=annotations)
    return QueuedPod(pod, added=created)


def _order(plugin: DeadlineLaxity, *pods: QueuedPod) -> list[str]:
    return [q.pod.name for q in sorted(pods, key=plugin.sort_key)]


def test_priority_then_deadline_jobs_then_best_effort_then_creation() -> None:
    plugin, _ = _plugin()
    best_old = _queued("best-old", created=T0 - 10)
    best_new = _queued("best-new", created=T0 - 5)
    late = _queued("late", deadline="3h")
    soon = _queued("soon", deadline="1h")
    vip = _queued("vip", priority=5)
    assert _order(plugin, best_new, late, best_old, soon, vip) == ["vip", "soon", "late", "best-old", "best-new"]


def test_least_laxity_first_with_a_prior() -> None:
    # Due later but needs far longer: less laxity. 0.1 s/step on one CPU, 2 CPUs planned.
    plugin, _ = _plugin(prior=0.1)
    long = _queued("long", deadline="3h", total_steps="100000")  # 100k steps: ~5,250 s at 2 CPUs
    short = _queued("short", deadline="2h", total_steps="1000")
    assert plugin.remaining(long.pod, 2000) == 100_000 * 0.1 * prior_step_ratio(2.0)
    assert _order(plugin, short, long) == ["long", "short"]
    # Without a prior (the default) laxity is the time to the deadline: EDF.
    edf, _ = _plugin()
    assert _order(edf, short, long) == ["short", "long"]


def test_an_infeasible_deadline_is_demoted_with_an_event_and_a_condition() -> None:
    async def run() -> None:
        plugin, cluster = _plugin(now=T0 + 7200)
        missed = _queued("missed", deadline="1h")  # passed an hour ago
        ok = _queued("ok", deadline="3h")
        plain = _queued("plain", created=T0 - 100)
        for q in (missed, ok, plain):
            cluster.create_pod(q.pod.raw)
            assert plugin.pre_enqueue(q.pod).ok  # admission never gates
        await asyncio.sleep(0)
        # Demoted: after the feasible job, among best-effort jobs by creation.
        assert _order(plugin, missed, plain, ok) == ["ok", "plain", "missed"]
        reasons = [(e.pod, e.reason) for e in cluster.events]
        assert reasons == [(PodKey("default/missed"), "DeadlineInfeasible")]
        condition = cluster.conditions[PodKey("default/missed")]["pysched.io/Deadline"]
        assert condition.reason == "DeadlineInfeasible" and condition.status == "False"
        assert condition.message.startswith("the deadline passed 1h ago (")  # in words, no prediction of 0 s
        # A new leader reads the demotion back from the condition.
        fresh, _ = _plugin(now=T0)
        raw = pod_dict("missed", created=T0, annotations={"pysched.io/deadline": "1h"})
        raw.setdefault("status", {})["conditions"] = [{"type": "pysched.io/Deadline", "reason": "DeadlineInfeasible"}]
        assert fresh.is_demoted(pod_from_dict(raw))

    asyncio.run(run())


def test_a_demoted_job_whose_deadline_is_moved_to_one_it_can_meet_is_a_deadline_job_again() -> None:
    async def run() -> None:
        plugin, cluster = _plugin(now=T0 + 7200)
        missed, other = _queued("missed", deadline="1h"), _queued("other", deadline="5h")  # one passed
        for q in (missed, other):
            cluster.create_pod(q.pod.raw)
            plugin.pre_enqueue(q.pod)
        await asyncio.sleep(0)
        assert _order(plugin, missed, other) == ["other", "missed"]
        # The user moves the deadline to 3h from creation, an hour from now: before the other's.
        moved = cluster.set_annotations(missed.pod.key, {"pysched.io/deadline": "3h"})
        assert plugin.pre_enqueue(moved).ok
        await asyncio.sleep(0)
        assert _order(plugin, QueuedPod(moved, added=T0), other) == ["missed", "other"]
        condition = cluster.conditions[moved.key]["pysched.io/Deadline"]
        assert (condition.status, condition.reason) == ("True", "OnTrack")
        assert "the deadline in 1h (" in condition.message and "can be met" in condition.message
        # Its pod still shows the condition of the deadline before until the write lands: it is
        # the deadline it has now that counts.
        stale = dict(
            moved.raw, status={"conditions": [{"type": "pysched.io/Deadline", "reason": "DeadlineInfeasible"}]}
        )
        assert not plugin.is_demoted(pod_from_dict(stale))
        writes: list[PodKey] = []
        patch = cluster.patch_pod_conditions

        async def counted(pod: Any, *conditions: Any) -> Any:
            writes.append(pod.key)
            return await patch(pod, *conditions)

        cluster.patch_pod_conditions = counted  # type: ignore[method-assign]
        plugin.judge(pod_from_dict(stale))  # judged again before its new condition shows: told once
        await asyncio.sleep(0)
        assert writes == []
        cluster.patch_pod_conditions = patch  # type: ignore[method-assign]
        # Moved back to one long past: demoted again.
        back = cluster.set_annotations(missed.pod.key, {"pysched.io/deadline": "1h"})
        plugin.pre_enqueue(back)
        await asyncio.sleep(0)
        assert plugin.is_demoted(back) and _order(plugin, QueuedPod(back, added=T0), other) == ["other", "missed"]
        assert [e.reason for e in cluster.events] == ["DeadlineInfeasible", "DeadlineInfeasible"]

    asyncio.run(run())


def test_malformed_annotations_warn_once_and_read_as_absent() -> None:
    async def run() -> None:
        plugin, cluster = _plugin()
        q = _queued("bad", deadline="tomorrow", cpu_max="lots", autoscale="maybe", total_steps="-3")
        cluster.create_pod(q.pod.raw)
        assert plugin.pre_enqueue(q.pod).ok
        assert plugin.pre_enqueue(q.pod).ok  # a second look does not warn again
        await asyncio.sleep(0)
        notes = [e.note for e in cluster.events if e.reason == "InvalidAnnotation"]
        assert len(notes) == 4
        assert any("pysched.io/deadline: 'tomorrow'" in n and "RFC 3339" in n for n in notes)
        assert any("pysched.io/cpu-max: 'lots'" in n and "500m" in n for n in notes)
        assert any("pysched.io/autoscale" in n and '"false"' in n for n in notes)
        assert _order(plugin, q, _queued("plain", created=T0 - 1)) == ["plain", "bad"]  # best-effort, by creation

    asyncio.run(run())


def test_demoted_jobs_still_run_when_there_is_room() -> None:
    async def run() -> dict[PodKey, str | None]:
        clock = VirtualClock(T0 + 7200)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        scheduler = Scheduler(builtin_config(registry).only("pysched-noscale"), cluster, clock, registry)
        cluster.add_node(node_dict("n", cpu="4", memory="8Gi"))
        await scheduler.start()
        for name, deadline in (("missed", "1h"), ("ok", "3h")):
            notes = {"pysched.io/deadline": deadline}
            cluster.create_pod(pod_dict(name, cpu="2", created=T0, annotations=notes, scheduler_name="pysched-noscale"))
        await scheduler.run_until_idle()
        await scheduler.stop()
        return {k: p.node_name for k, p in cluster.pods.items()}

    assert asyncio.run(run()) == {PodKey("default/missed"): "n", PodKey("default/ok"): "n"}


def test_deadline_namespaces_restrict_who_may_use_deadlines() -> None:
    async def run() -> None:
        clock = VirtualClock(T0)
        cluster = SimulatedCluster(clock)
        cluster.set_namespace("ml", {"team": "ml", "pysched.io/deadlines": "allowed"})
        cluster.set_namespace("web", {"team": "web"})
        selector = {"matchLabels": {"pysched.io/deadlines": "allowed"}}
        plugin = DeadlineLaxity(DeadlineLaxityArgs(deadline_namespaces=selector), Handle(cluster, clock, NodeTable()))

        def queued(name: str, namespace: str, created: float, **notes: str) -> QueuedPod:
            raw = pod_dict(name, namespace=namespace, created=created, annotations=notes)
            return QueuedPod(pod_from_dict(raw), added=created)

        allowed = queued("a", "ml", T0, **{"pysched.io/deadline": "1h"})
        refused = queued("r", "web", T0 - 20, **{"pysched.io/deadline": "5m"})  # soonest, but not allowed
        unknown = queued("u", "nowhere", T0 - 30, **{"pysched.io/deadline": "5m"})  # no such labels
        plain = queued("p", "web", T0 - 10)
        for q in (allowed, refused, unknown, plain):
            cluster.create_pod(q.pod.raw)
            assert plugin.pre_enqueue(q.pod).ok
        # The refused deadline pods order as best-effort, by creation.
        assert _order(plugin, plain, refused, allowed, unknown) == ["a", "u", "r", "p"]
        assert _order(plugin, refused, allowed) == ["a", "r"]  # asked again: still one event each
        await asyncio.sleep(0)
        events = [(e.pod, e.reason) for e in cluster.events]
        assert events == [(PodKey("web/r"), "DeadlineNotAllowed"), (PodKey("nowhere/u"), "DeadlineNotAllowed")]
        assert "namespace web does not match" in cluster.events[0].note
        # An infeasible deadline in a refused namespace is not judged: it was never a deadline job.
        late = queued("late", "web", T0, **{"pysched.io/deadline": "2025-01-01T00:00:00Z"})
        plugin.judge(late.pod)
        assert PodKey("web/late") not in cluster.conditions
        # matchExpressions work too; the apiserver's metadata.name label selects single namespaces.
        names = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["web"]}]}
        by_name = DeadlineLaxity(DeadlineLaxityArgs(deadline_namespaces=names), Handle(cluster, clock, NodeTable()))
        assert by_name.deadline_allowed(refused.pod) and not by_name.deadline_allowed(allowed.pod)

    asyncio.run(run())


def test_deadline_namespaces_is_checked_when_the_profile_loads() -> None:
    def profile(selector: object) -> dict[str, Any]:
        return {
            "profiles": [
                {
                    "schedulerName": "s",
                    "plugins": {"queueSort": [{"name": "DeadlineLaxity"}], "bind": [{"name": "DefaultBinder"}]},
                    "pluginConfig": [{"name": "DeadlineLaxity", "args": {"deadlineNamespaces": selector}}],
                }
            ]
        }

    registry = default_registry()
    parse_config(profile({"matchLabels": {"a": "b"}}), "t", registry)
    for bad in (
        {"matchLabel": {"a": "b"}},
        {"matchLabels": {"a": 1}},
        {"matchExpressions": [{"key": "a", "operator": "Is"}]},
        {"matchExpressions": [{"key": "a", "operator": "In"}]},
        "team=ml",
    ):
        with pytest.raises(ConfigError, match="deadlineNamespaces"):
            parse_config(profile(bad), "t", registry)


FORGETTING = """
profiles:
  - schedulerName: d
    plugins:
      queueSort: [{name: DeadlineLaxity}]
      preEnqueue: [{name: DeadlineLaxity}]
      filter: [{name: NodeResourcesFit}]
      bind: [{name: DefaultBinder}]
    pluginConfig:
      - name: DeadlineLaxity
        args: {deadlineNamespaces: {matchLabels: {pysched.io/deadlines: allowed}}}
"""


def _two_namespaces(config: dict[str, Any]) -> tuple[SimulatedCluster, Scheduler]:
    """One 4-CPU node, namespace `ml` that may use deadlines and `web` that may not, two hours
    after T0."""
    clock = VirtualClock(T0 + 7200)
    cluster = SimulatedCluster(clock)
    cluster.set_namespace("ml", {"pysched.io/deadlines": "allowed"})
    cluster.set_namespace("web", {})
    cluster.add_node(node_dict("n", cpu="4", memory="64Gi"))
    registry = default_registry()
    return cluster, Scheduler(parse_config(config, "t", registry), cluster, clock, registry)


def test_what_it_remembers_of_a_pod_goes_when_the_pod_ends_or_is_deleted() -> None:
    """Each pod is told once (a demotion, a malformed value, a namespace that may not use deadlines);
    once the pod has ended or is gone the plugin has forgotten it: the same pod again is told again."""

    async def run() -> None:
        cluster, scheduler = _two_namespaces(yaml.safe_load(FORGETTING))
        plugin = scheduler.frameworks["d"].plugins[NAME]
        assert isinstance(plugin, DeadlineLaxity)
        await scheduler.start()
        kinds = (
            ("ml", {"pysched.io/deadline": "1h"}, "DeadlineInfeasible"),  # passed an hour ago: demoted
            ("ml", {"pysched.io/total-steps": "-3"}, "InvalidAnnotation"),  # malformed: warned about
            ("web", {"pysched.io/deadline": "5h"}, "DeadlineNotAllowed"),  # this namespace may not: refused
        )
        raws = []
        for i in range(60):
            namespace, notes, _ = kinds[i % 3]
            raws.append(
                pod_dict(f"p{i}", namespace=namespace, cpu="1", created=T0 + i, annotations=notes, scheduler_name="d")
            )

        def told() -> collections.Counter[str]:
            return collections.Counter(e.reason for e in cluster.events if e.reason != "FailedScheduling")

        for raw in raws:
            cluster.create_pod(raw)
        await scheduler.run_until_idle()
        once = {"DeadlineInfeasible": 20, "InvalidAnnotation": 20, "DeadlineNotAllowed": 20, "Scheduled": 4}
        assert told() == once
        bound = [k for k, p in cluster.pods.items() if p.node_name is not None]
        # A demotion also lives in the pod's condition: the ended pod stays demoted, untold.
        again = collections.Counter(
            kind for key in bound if (kind := kinds[int(cluster.pods[key].name[1:]) % 3][2]) != "DeadlineInfeasible"
        )
        for key in bound:  # an ended pod never comes back to the queue: forgotten at once
            ended = cluster.finish_pod(key)
            plugin.pre_enqueue(ended)
        await asyncio.sleep(0)  # let the events it spawned run
        assert told() == collections.Counter(once) + again
        for key in list(cluster.pods):
            cluster.delete_pod(key)
        cluster.events.clear()
        for raw in raws:  # the very same pods again: each is told again
            cluster.create_pod(raw)
        await scheduler.run_until_idle()
        assert told() == once
        await scheduler.stop()

    asyncio.run(run())


def test_the_shared_queue_order_tells_another_profiles_pods_once_and_keeps_nothing_of_them() -> None:
    """Profiles run together share the first one's QueueSort, which orders the other profiles'
    pods too: they are judged and told once, by their own profile's DeadlineLaxity (the sort
    judged them again, with its own run history, and told each twice), and the same pods made
    again are told again."""

    (profile,) = yaml.safe_load(FORGETTING)["profiles"]
    two = {"profiles": [{**profile, "schedulerName": "first"}, {**profile, "schedulerName": "second"}]}

    async def run() -> None:
        cluster, scheduler = _two_namespaces(two)
        await scheduler.start()
        raws = [
            pod_dict(
                f"p{i}",
                namespace=("ml", "web")[i % 2],
                cpu="1",
                created=T0 + i,
                annotations={"pysched.io/deadline": "1h"},  # passed an hour ago
                scheduler_name="second",
            )
            for i in range(8)
        ]
        once = {"DeadlineInfeasible": 4, "DeadlineNotAllowed": 4}
        for rounds in range(2):
            for raw in raws:
                cluster.create_pod(raw)
            await scheduler.run_until_idle()
            told = collections.Counter(e.reason for e in cluster.events if e.reason in once)
            assert told == once, f"round {rounds}: {told}"
            for key in [k for k, p in cluster.pods.items() if p.node_name is not None]:
                cluster.finish_pod(key)
            await scheduler.run_until_idle()
            for key in list(cluster.pods):
                cluster.delete_pod(key)
            await scheduler.run_until_idle()
            cluster.events.clear()
        first = scheduler.frameworks["first"].plugins[NAME]
        assert isinstance(first, DeadlineLaxity)
        assert not first._feasible and not first._demoted and not first._refused
        await scheduler.stop()

    asyncio.run(run())


def test_deleting_an_old_pod_keeps_a_demotion_of_the_pod_recreated_under_its_name() -> None:
    plugin, _ = _plugin(now=T0 + 7200)
    old = make_pod("job-0", created=T0, uid="old", annotations={"pysched.io/deadline": "1h"})
    new = make_pod("job-0", created=T0, uid="new", annotations={"pysched.io/deadline": "1h"})
    plugin.judge(old)
    plugin.judge(new)  # the new pod is known before the old one's deletion arrives
    plugin.pod_deleted(old)
    assert plugin.is_demoted(new) and not plugin.is_demoted(old)
    plugin.pod_deleted(new)
    assert not plugin.is_demoted(new)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0, 1e300])
def test_prior_step_seconds_is_finite_and_bounded(value: float) -> None:
    with pytest.raises(ArgsError, match="priorStepSeconds"):
        parse_args(DeadlineLaxityArgs, {"priorStepSeconds": value})


def test_a_huge_selector_is_quoted_short() -> None:
    with pytest.raises(ArgsError, match="deadlineNamespaces") as info:
        parse_args(DeadlineLaxityArgs, {"deadlineNamespaces": {"matchExpressions": [{"values": ["x" * 10**6] * 100}]}})
    assert len(str(info.value)) < 200
    with pytest.raises(ArgsError, match="unknown selector field"):
        parse_args(DeadlineLaxityArgs, {"deadlineNamespaces": {1: "a", "b" * 10**6: "c"}})


def test_a_gangs_workers_share_its_steps_so_a_job_feasible_in_parallel_is_not_demoted() -> None:
    """40,000 global steps at 0.1 s a step on one CPU: 4,000 s for one pod, 1,000 s for four workers
    sharing them, against a deadline in 30 minutes."""

    async def run() -> None:
        plugin, cluster = _plugin(prior=0.1)
        notes = {"pysched.io/deadline": "30m", "pysched.io/total-steps": "40000", "pysched.io/min-members": "5"}
        roles = [("train-ps-0", "ps")] + [(f"train-worker-{i}", "worker") for i in range(4)]
        members = []
        for name, role in roles:
            raw = pod_dict(name, cpu="1", created=T0, annotations=notes, labels={JOB_LABEL: "train", ROLE_LABEL: role})
            members.append(QueuedPod(pod_from_dict(raw), added=T0))
        alone = _queued("alone", cpu="1", deadline="30m", total_steps="40000")
        for q in (*members, alone):
            cluster.create_pod(q.pod.raw)
            plugin.handle.jobs.observe(q.pod)
        for q in (*members, alone):
            assert plugin.pre_enqueue(q.pod).ok
        await asyncio.sleep(0)
        assert {e.pod for e in cluster.events if e.reason == "DeadlineInfeasible"} == {PodKey("default/alone")}
        # Every member, the server too, is ordered by the job's laxity: 1,800 s - 1,000 s.
        assert {plugin.sort_key(q)[2] for q in members} == {T0 + 1800 - 1000}

    asyncio.run(run())


def test_a_demotion_is_written_before_the_scheduler_goes_idle() -> None:
    """A pod whose deadline passes while it waits for room is demoted when the periodic retry
    lets it out, and refused again without a cycle; the condition that says so is on the pod
    when `run_until_idle` returns (the simulator's next step reads it), not whenever the event
    loop next happens to run."""

    async def run() -> None:
        clock = VirtualClock(T0)
        cluster = SimulatedCluster(clock)
        cluster.add_node(node_dict("n", cpu="2", memory="8Gi"))
        registry = default_registry()
        scheduler = Scheduler(builtin_config(registry).only("pysched-noscale"), cluster, clock, registry)
        await scheduler.start()
        cluster.create_pod(pod_dict("blocker", cpu="2", created=T0, scheduler_name="pysched-noscale"))
        await scheduler.run_until_idle()
        notes = {"pysched.io/deadline": "10m"}
        cluster.create_pod(pod_dict("late", cpu="1", created=T0, annotations=notes, scheduler_name="pysched-noscale"))
        await scheduler.run_until_idle()  # no room: refused by a whole cycle
        assert scheduler.stats.unschedulable == 1
        clock.advance(660.0)  # the deadline has passed; the retry lets the pod out
        await scheduler.run_until_idle()
        assert scheduler.stats.unschedulable == 1  # refused again without a cycle
        shown = cluster.pods[PodKey("default/late")].raw["status"]["conditions"]
        assert any(c["type"] == "pysched.io/Deadline" and c["reason"] == "DeadlineInfeasible" for c in shown)
        await scheduler.stop()

    asyncio.run(run())
