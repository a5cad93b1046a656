"""DeadlineLaxity's run history: a rerun of a kind of job that ran before (same images, same total
steps) is predicted from those runs, so that its laxity is known and an infeasible deadline is
demoted before it runs; runs that were resized, failed or deleted teach nothing."""

import asyncio
import dataclasses

import pytest

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.api.jobs import JOB_LABEL, ROLE_LABEL
from pysched.api.objects import PodInfo, pod_from_dict
from pysched.backend.simulated import SimulatedCluster
from pysched.deadline.predictor import prior_step_ratio
from pysched.framework.clock import VirtualClock
from pysched.framework.config import ConfigError, parse_config
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle, QueuedPod
from pysched.framework.nodetable import NodeTable
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.deadline_laxity import DeadlineLaxity, DeadlineLaxityArgs, factory
from pysched.plugins.deadline_laxity import history as history_module
from pysched.plugins.deadline_laxity.history import RunHistory, kind_of
from pysched.scheduler.scheduler import Scheduler

T0 = 1_767_225_600.0
PROFILE = "pysched-noscale"


def training_pod(
    name: str, steps: int, cpu: str = "2", image: str = "trainer", created: float = T0, **notes: str
) -> PodInfo:
    annotations = {"pysched.io/total-steps": str(steps), **{f"pysched.io/{k}": v for k, v in notes.items()}}
    raw = pod_dict(name, cpu=cpu, created=created, annotations=annotations, scheduler_name=PROFILE)
    raw["spec"]["containers"][0]["image"] = image
    return pod_from_dict(raw)


def test_a_finished_run_predicts_its_reruns_and_nothing_else() -> None:
    clock = VirtualClock(T0)
    history = RunHistory(clock, samples=3)
    first = training_pod("first", 1000)
    history.bound(first)
    clock.advance(900)
    history.ended(dataclasses.replace(first, phase="Succeeded"))
    expected = 900 / 1000 / prior_step_ratio(2.0)
    assert history.step_seconds(training_pod("rerun", 1000, cpu="8")) == pytest.approx(expected)
    assert history.step_seconds(training_pod("longer", 2000)) is None  # other total steps
    assert history.step_seconds(training_pod("other", 1000, image="other:v1")) is None  # other image
    assert kind_of(training_pod("a", 1000, image="trainer:latest")) == kind_of(first)  # names normalised
    # The median of the recent runs: one slow run among fast ones does not move it much.
    for seconds in (600, 3000, 600):
        pod = training_pod("again", 1000)
        history.bound(pod)
        clock.advance(seconds)
        history.ended(dataclasses.replace(pod, phase="Succeeded"))
    assert history.step_seconds(first) == pytest.approx(600 / 1000 / prior_step_ratio(2.0))  # 3 kept: 600, 3000, 600


def test_resized_failed_deleted_and_untimed_runs_teach_nothing() -> None:
    clock = VirtualClock(T0)
    history = RunHistory(clock, samples=4)
    resized, failed, deleted, untimed = (training_pod(n, 1000) for n in ("resized", "failed", "deleted", "untimed"))
    for pod in (resized, failed, deleted):
        history.bound(pod)
    history.bound(pod_from_dict(pod_dict("plain", cpu="1")))
    assert len(history) == 3  # a pod without total steps is not a training job: not timed
    clock.advance(500)
    grown = dataclasses.replace(resized, phase="Succeeded", requests={**resized.requests, "cpu": 4000})
    history.ended(grown)
    history.ended(dataclasses.replace(failed, phase="Failed"))
    history.forget(deleted)
    history.ended(dataclasses.replace(untimed, phase="Succeeded"))  # bound before this scheduler started
    assert len(history) == 0 and history.step_seconds(resized) is None


def test_a_run_reported_gone_before_its_end_is_still_timed_unless_it_was_being_deleted() -> None:
    """A live informer that watches only pods that have not ended reports an ending pod as deleted,
    then its end once read back: that run counts. A run that ended while being deleted (cancelled,
    preempted: it may still exit 0) does not."""
    clock = VirtualClock(T0)
    history = RunHistory(clock, samples=4)
    ended, cancelled = training_pod("ended", 1000), training_pod("cancelled", 1000)
    for pod in (ended, cancelled):
        history.bound(pod)
    clock.advance(400)
    history.forget(cancelled)
    history.ended(dataclasses.replace(cancelled, phase="Succeeded", deleting=True))
    assert history.step_seconds(ended) is None
    history.forget(ended)
    history.ended(dataclasses.replace(ended, phase="Succeeded"))
    assert history.step_seconds(ended) == pytest.approx(400 / 1000 / prior_step_ratio(2.0))
    assert len(history) == 0


def test_gang_members_are_not_timed_and_keep_the_prior() -> None:
    clock = VirtualClock(T0)
    cluster = SimulatedCluster(clock)
    plugin = factory(DeadlineLaxityArgs(), Handle(cluster, clock, NodeTable()))
    assert plugin.history is not None
    notes = {"pysched.io/total-steps": "1000", "pysched.io/min-members": "2"}
    members = []
    for name, role in (("train-ps-0", "ps"), ("train-worker-0", "worker")):
        raw = pod_dict(name, cpu="2", created=T0, annotations=notes, labels={JOB_LABEL: "train", ROLE_LABEL: role})
        members.append(pod_from_dict(raw))
        plugin.handle.jobs.observe(members[-1])
    alone = training_pod("alone", 1000)
    for pod in (*members, alone):
        plugin.post_bind(CycleState(), pod, NodeName("n"))
    assert len(plugin.history) == 1  # the one-pod job alone
    clock.advance(900)
    plugin.pod_terminated(dataclasses.replace(alone, phase="Succeeded"))
    assert plugin.remaining(training_pod("rerun", 1000), 2000) == pytest.approx(900)
    # The gang's one worker has the same images and steps, but runs at its gang's pace.
    assert plugin.remaining(members[1], 2000) == 0.0


def test_kinds_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_module, "MAX_KINDS", 2)
    clock = VirtualClock(T0)
    history = RunHistory(clock, samples=2)
    for steps in (100, 200, 300):
        pod = training_pod(f"job-{steps}", steps)
        history.bound(pod)
        clock.advance(100)
        history.ended(dataclasses.replace(pod, phase="Succeeded"))
    assert history.step_seconds(training_pod("x", 100)) is None  # the least recently finished went
    assert history.step_seconds(training_pod("y", 300)) is not None


def test_the_profile_times_runs_and_demotes_a_rerun_that_cannot_make_it() -> None:
    """End to end through the pysched-noscale profile: a job of 1000 steps runs 900 s; then a rerun
    due in 10 minutes is demoted (without the history, the prior knows nothing and keeps it), a
    rerun due in 20 minutes is put before a job of an unseen kind due sooner."""

    async def run() -> None:
        clock = VirtualClock(T0)
        cluster = SimulatedCluster(clock)
        registry = default_registry()
        scheduler = Scheduler(builtin_config(registry).only(PROFILE), cluster, clock, registry)
        cluster.add_node(node_dict("n", cpu="2", memory="8Gi"))
        await scheduler.start()
        cluster.create_pod(training_pod("first", 1000).raw)
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/first")].node_name == "n"
        clock.advance(900)
        cluster.finish_pod(PodKey("default/first"))
        plugin = scheduler.frameworks[PROFILE].queue_sort
        assert isinstance(plugin, DeadlineLaxity)
        now = clock.now()
        rerun = training_pod("rerun", 1000, created=now, deadline="20m")
        late = training_pod("late", 1000, created=now, deadline="10m")
        unseen = training_pod("unseen", 5000, created=now, deadline="15m")
        assert plugin.remaining(rerun, 2000) == pytest.approx(900)
        assert plugin.remaining(unseen, 2000) == 0.0  # no prior, no history: unknown
        for pod in (rerun, late, unseen):
            cluster.create_pod(pod.raw)
            plugin.pre_enqueue(pod)
        order = sorted((QueuedPod(p, added=clock.now()) for p in (unseen, late, rerun)), key=plugin.sort_key)
        assert [q.pod.name for q in order] == ["rerun", "unseen", "late"]  # laxity 300 s, 900 s; demoted
        await asyncio.sleep(0)
        demoted = [e.pod for e in cluster.events if e.reason == "DeadlineInfeasible"]
        assert demoted == [PodKey("default/late")]
        await scheduler.stop()

    asyncio.run(run())


def test_history_samples_is_an_arg_and_zero_turns_it_off() -> None:
    def profile(args: object) -> dict[str, object]:
        return {
            "profiles": [
                {
                    "schedulerName": "s",
                    "plugins": {"queueSort": [{"name": "DeadlineLaxity"}], "bind": [{"name": "DefaultBinder"}]},
                    "pluginConfig": [{"name": "DeadlineLaxity", "args": args}],
                }
            ]
        }

    registry = default_registry()
    parse_config(profile({"historySamples": 0}), "t", registry)
    for bad in (-1, 1025, "many"):
        with pytest.raises(ConfigError, match="historySamples"):
            parse_config(profile({"historySamples": bad}), "t", registry)
    # The built-in profiles that order by laxity time their runs at PostBind; the learned profile,
    # trained with admission under the prior alone, keeps it off.
    config = builtin_config(registry)
    for name in ("pysched-noscale", "pysched"):
        profile_config = config.profile(name)
        assert profile_config is not None
        assert "DeadlineLaxity" in [p.name for p in profile_config.enabled("postBind")]
    learned = config.profile("learned")
    assert learned is not None and learned.plugin_args["DeadlineLaxity"]["historySamples"] == 0


def test_a_waiting_pod_judged_feasible_is_judged_again_when_its_time_runs_out_or_its_kind_is_timed() -> None:
    """The verdict on a pod that waits is kept while nothing it rests on changes: it returns to
    the queue and is sorted again and again. Time passing or a run of its kind ending still
    demote it."""

    async def run() -> None:
        clock = VirtualClock(T0)
        cluster = SimulatedCluster(clock)
        plugin = DeadlineLaxity(DeadlineLaxityArgs(prior_step_seconds=0.01), Handle(cluster, clock, NodeTable()))
        plugin.history = RunHistory(clock, samples=3)
        fastest = 1000 * 0.01 * prior_step_ratio(2.0)  # 1,000 steps on its 2 CPUs under the prior
        waiting = training_pod("waiting", 1000, deadline="1h")
        cluster.create_pod(waiting.raw)

        async def demoted() -> bool:
            plugin.pre_enqueue(waiting)
            await asyncio.sleep(0)  # the event it may have sent
            return any(e.reason == "DeadlineInfeasible" for e in cluster.events)

        assert not await demoted()
        ran = training_pod("ran", 1000)  # the same kind, slower than the prior says
        plugin.history.bound(ran)
        clock.advance(600)
        plugin.history.ended(dataclasses.replace(ran, phase="Succeeded"))  # 600 s a run: still in time
        assert not await demoted()
        slow = training_pod("slow", 1000)
        plugin.history.bound(slow)
        clock.advance(2400)
        plugin.history.ended(dataclasses.replace(slow, phase="Succeeded"))  # median 1,500 s, 600 s left
        assert await demoted()

        late = training_pod("late", 1000, deadline="1h")  # under the prior alone, until time runs out
        plugin = DeadlineLaxity(DeadlineLaxityArgs(prior_step_seconds=0.01), Handle(cluster, clock, NodeTable()))
        cluster.events.clear()
        clock.advance_to(T0 + 3600 - fastest)
        waiting = late
        assert not await demoted()
        clock.advance(1.0)
        assert await demoted()

    asyncio.run(run())
