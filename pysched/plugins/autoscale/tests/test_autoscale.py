import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from pysched.api.annotations import CPU_MAX, CPU_MIN, format_progress
from pysched.api.builders import node_dict, pod_dict
from pysched.api.containers import ContainerResize, container_cpus, cpu_resize
from pysched.api.ids import PodKey
from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS, ROLE_LABEL, JobSource, job_key
from pysched.api.objects import PodInfo, pod_from_dict
from pysched.api.times import format_rfc3339
from pysched.backend.simulated import SimulatedCluster
from pysched.cmd.metrics import SchedulerMetrics, plugin_metrics
from pysched.deadline.condition import JobRecord, parse_state, state_message
from pysched.framework.clock import VirtualClock
from pysched.framework.cluster import PodCondition
from pysched.framework.config import ConfigError, parse_config
from pysched.framework.registry import ArgsError, parse_args
from pysched.framework.status import Code, Status
from pysched.plugins import default_registry
from pysched.plugins.autoscale import Autoscale, AutoscaleArgs
from pysched.plugins.autoscale.tests.profile import pysched_scheduler
from pysched.testing.scheduler import parse_metrics


def state_of(condition: PodCondition) -> JobRecord:
    record = parse_state(condition.message)
    assert record is not None, condition.message
    return record


T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
KEY = PodKey("default/job")


def slack_of(plugin: Autoscale, key: PodKey) -> float:
    """The job's predicted slack as /metrics shows it."""
    (gauge,) = [f for f in plugin.metric_families() if f.name == "pysched_autoscale_predicted_slack_seconds"]
    (value,) = [v for labels, v in gauge.values.items() if labels[:2] == tuple(key.split("/", 1))]
    return value


def test_args_are_checked() -> None:
    raw = {
        "profiles": [
            {
                "schedulerName": "s",
                "plugins": {
                    "queueSort": [{"name": "DeadlineLaxity"}],
                    "bind": [{"name": "DefaultBinder"}],
                    "reconcile": [{"name": "Autoscale"}],
                },
                "pluginConfig": [{"name": "Autoscale", "args": {"maxStepFactor": 1}}],
            }
        ]
    }
    with pytest.raises(ConfigError, match="maxStepFactor"):
        parse_config(raw, "t", default_registry())
    assert AutoscaleArgs().cooldown_seconds == 120


class World:
    """The `pysched` profile on a simulated cluster; progress written by hand."""

    def __init__(
        self, node_cpu: str = "16", limits: dict[str, str] | None = None, node_memory: str = "64Gi", **args: Any
    ) -> None:
        self.limits = limits  # the container's limits (none by default)
        self.edit: Callable[[dict[str, Any]], None] | None = None  # changes to the pod's spec at submit
        self.clock = VirtualClock(T0)
        self.cluster = SimulatedCluster(self.clock)
        self.scheduler = pysched_scheduler(self.cluster, self.clock, **args)
        self.cluster.add_node(node_dict("n", cpu=node_cpu, memory=node_memory))
        plugin = self.scheduler.frameworks["pysched"].reconcile[0]
        assert isinstance(plugin, Autoscale)
        self.plugin = plugin
        self.writes: list[JobRecord] = []  # the State of every condition write, in order
        patch = self.cluster.patch_pod_conditions

        async def counted(pod: PodInfo, *conditions: PodCondition) -> Status:
            self.writes.extend(state_of(c) for c in conditions if c.type == "pysched.io/State")
            return await patch(pod, *conditions)

        self.cluster.patch_pod_conditions = counted  # type: ignore[method-assign]

    async def submit(self, deadline: str, **notes: str) -> None:
        await self.scheduler.start()
        annotations = {"pysched.io/deadline": deadline, "pysched.io/total-steps": "10000", **notes}
        raw: dict[str, Any] = pod_dict("job", cpu="2", created=T0, annotations=annotations, scheduler_name="pysched")
        if self.limits is not None:
            raw["spec"]["containers"][0]["resources"]["limits"] = self.limits
        if self.edit is not None:
            self.edit(raw["spec"])
        self.cluster.create_pod(raw)
        await self.scheduler.run_until_idle()
        assert self.cluster.pods[KEY].node_name == "n"

    async def progress(self, steps: int, seconds: float) -> None:
        self.clock.advance(seconds)
        self.cluster.set_annotations(KEY, {"pysched.io/progress": format_progress(steps, self.clock.now())})
        await self.scheduler.run_until_idle()

    def cpu(self) -> int:
        return self.cluster.pods[KEY].requests["cpu"]

    def reasons(self) -> list[str]:
        return [e.reason for e in self.cluster.events if e.reason != "Scheduled"]


def test_scale_up_when_at_risk_gradually_then_cooldown() -> None:
    async def run() -> World:
        world = World()
        await world.submit("20m")  # 10,000 steps at 0.2 s on 2 CPUs: 2,000 s, over the 1,200 s deadline
        await world.progress(300, 60)
        return world

    world = asyncio.run(run())
    assert world.cpu() == 4000  # needs 5 or more under the prior; an in-place container steps by 2x at most
    assert world.reasons() == ["DeadlineAtRisk", "Rescaled"]
    assert "6 CPUs needed" in world.cluster.events[-2].note or "5 CPUs needed" in world.cluster.events[-2].note
    condition = world.cluster.conditions[KEY]["pysched.io/Deadline"]
    assert condition.reason == "Rescaled" and condition.message.startswith("cpu 2 -> 4: finishes in ")
    assert condition.message.endswith(" before the deadline, at 4 CPUs") and condition.status == "True"
    state = state_of(world.cluster.conditions[KEY]["pysched.io/State"])
    assert state.reason == "Rescaled" and state.cpus == 4 and state.last_rescale == world.clock.now()

    async def later() -> None:
        await world.progress(900, 60)  # within the cooldown: no decision
        assert world.reasons() == ["DeadlineAtRisk", "Rescaled"]

    asyncio.run(later())


def test_no_headroom_no_scale_up() -> None:
    async def run() -> World:
        world = World(node_cpu="2")
        await world.submit("30m")
        await world.progress(300, 60)
        return world

    world = asyncio.run(run())
    assert world.cpu() == 2000 and "Rescaled" not in world.reasons()


def test_scale_down_when_slack_is_large_and_bounds_hold() -> None:
    async def run(**notes: str) -> World:
        world = World()
        await world.submit("10h", **notes)
        await world.progress(300, 60)
        await world.progress(600, 60)  # measured, not only estimated from the bind: it may go down
        return world

    assert asyncio.run(run()).cpu() == 1000  # the profile's 1-CPU floor
    assert asyncio.run(run(**{"pysched.io/cpu-min": "1500m"})).cpu() == 1500
    assert asyncio.run(run(**{"pysched.io/autoscale": "false"})).cpu() == 2000


def test_a_namespace_that_may_not_use_deadlines_is_not_scaled() -> None:
    async def run(labels: dict[str, str]) -> int:
        world = World(deadline_namespaces={"matchLabels": {"pysched.io/deadlines": "allowed"}})
        world.cluster.set_namespace("default", labels)
        await world.submit("20m")
        await world.progress(300, 60)
        return world.cpu()

    assert asyncio.run(run({})) == 2000
    assert asyncio.run(run({"pysched.io/deadlines": "allowed"})) == 4000

    async def ended(labels: dict[str, str]) -> World:  # it ends past its nominal deadline
        world = World(deadline_namespaces={"matchLabels": {"pysched.io/deadlines": "allowed"}})
        world.cluster.set_namespace("default", labels)
        await world.submit("10m")
        world.clock.advance(3600)
        world.cluster.finish_pod(KEY)
        await world.scheduler.run_until_idle()
        return world

    ignored, judged = asyncio.run(ended({})), asyncio.run(ended({"pysched.io/deadlines": "allowed"}))
    # Best-effort where deadlines are ignored: no verdict, and no count among deadline jobs.
    assert "DeadlineMissed" not in ignored.reasons() and "DeadlineMissed" in judged.reasons()
    counts = [
        next(f for f in w.plugin.metric_families() if f.name == "pysched_deadlines").values for w in (ignored, judged)
    ]
    assert counts == [{("met",): 0.0, ("missed",): 0.0}, {("met",): 0.0, ("missed",): 1.0}]


def test_cpu_max_caps_and_an_infeasible_job_is_left_alone() -> None:
    async def run() -> World:
        world = World()
        await world.submit("15m", **{"pysched.io/cpu-max": "3"})  # needs > 3 CPUs
        await world.progress(300, 60)
        return world

    world = asyncio.run(run())
    assert world.cpu() == 2000
    assert world.reasons() == ["DeadlineInfeasible"]
    assert world.cluster.conditions[KEY]["pysched.io/Deadline"].status == "False"


def test_a_deadline_passed_at_submission_is_told_once() -> None:
    """DeadlineLaxity demotes it when it is queued; Autoscale, finding it hopeless too once it
    runs, writes its own words to the condition but does not warn a second time."""

    async def run() -> World:
        world = World()
        await world.submit(format_rfc3339(T0 - 60))
        await world.progress(300, 60)
        await world.progress(600, 60)
        return world

    world = asyncio.run(run())
    assert world.reasons() == ["DeadlineInfeasible"]
    assert "the deadline passed 1m ago" in world.cluster.events[-1].note
    condition = world.cluster.conditions[KEY]["pysched.io/Deadline"]
    assert condition.reason == "DeadlineInfeasible" and condition.status == "False"


def test_a_cpu_max_below_cpu_min_is_ignored_as_told_not_a_cap() -> None:
    async def run(**notes: str) -> World:
        world = World()
        await world.submit("20m", **notes)
        for steps in (300, 600, 900):
            await world.progress(steps, 60)
        return world

    alone, contradicted = asyncio.run(run(**{CPU_MIN: "4"})), asyncio.run(run(**{CPU_MIN: "4", CPU_MAX: "2"}))
    assert [e.note for e in contradicted.cluster.events if e.reason == "InvalidAnnotation"] == [
        "pysched.io/cpu-max: '2' is not at least pysched.io/cpu-min ('4'); ignored"
    ]
    # Ignored: the job scales as it would without it (not kept at its cpu-min).
    assert [e.note for e in contradicted.cluster.events if e.reason != "InvalidAnnotation"] == [
        e.note for e in alone.cluster.events
    ]
    assert "Rescaled" in contradicted.reasons()


def test_a_huge_cpu_max_is_capped_by_the_node_before_any_search() -> None:
    async def run() -> World:
        world = World()
        # 9,700 steps left in 2 minutes cannot be met on 16 CPUs; 1e9 CPUs would be a billion predictions.
        await world.submit("3m", **{"pysched.io/cpu-max": "1e9"})
        await world.progress(300, 60)
        return world

    world = asyncio.run(run())
    infeasible = [e.note for e in world.cluster.events if e.reason == "DeadlineInfeasible"]
    assert len(infeasible) == 1 and "even at 16 CPUs" in infeasible[0]  # the node's 16, not 1e9


def test_a_running_pods_malformed_progress_is_warned_about_once() -> None:
    async def run() -> World:
        world = World()
        await world.submit("10h")
        for _ in range(2):
            world.clock.advance(61)
            world.cluster.set_annotations(KEY, {"pysched.io/progress": "1" * 4301 + "@2026-01-01T00:00:00Z"})
            await world.scheduler.run_until_idle()
        return world

    world = asyncio.run(run())
    warnings = [e.note for e in world.cluster.events if e.reason == "InvalidProgress"]
    assert len(warnings) == 1 and "(4322 chars)" in warnings[0] and "is not STEPS@RFC3339" in warnings[0]


def test_a_new_leader_keeps_the_cooldown_from_the_condition() -> None:
    async def run(message: str, kind: str = "pysched.io/Deadline") -> int:
        world = World()
        await world.scheduler.start()
        notes = {"pysched.io/deadline": "20m", "pysched.io/total-steps": "10000"}
        raw: dict[str, Any] = pod_dict("job", cpu="2", created=T0, annotations=notes, scheduler_name="pysched")
        raw["spec"]["nodeName"] = "n"
        raw.setdefault("status", {})["conditions"] = [
            {"type": kind, "status": "True", "reason": "Rescaled", "message": message}
        ]
        world.cluster.create_pod(raw)
        await world.progress(0, 60)
        await world.progress(300, 60)
        return world.cpu()

    # What this version writes: the State condition.
    state = JobRecord("Rescaled", "cpu 1 -> 2", T0 + 1200, last_rescale=T0 + 100)
    assert asyncio.run(run(state_message(state), "pysched.io/State")) == 2000  # rescaled 20 s ago
    assert asyncio.run(run(state_message(dataclasses.replace(state, last_rescale=0)), "pysched.io/State")) == 4000
    # What the previous version wrote into the Deadline message.
    assert asyncio.run(run(f"cpu 1 -> 2: ...; lastRescale={T0 + 100:.0f}")) == 2000
    assert asyncio.run(run("cpu 1 -> 2: ...; lastRescale=0")) == 4000


def test_progress_from_the_future_or_beyond_total_is_ignored_with_a_warning() -> None:
    async def run() -> World:
        world = World()
        await world.submit("20m")
        world.clock.advance(60)
        world.cluster.set_annotations(KEY, {"pysched.io/progress": format_progress(20_000, world.clock.now())})
        await world.scheduler.run_until_idle()
        world.clock.advance(60)
        later = format_progress(100, world.clock.now() + 3600)
        world.cluster.set_annotations(KEY, {"pysched.io/progress": later})
        await world.scheduler.run_until_idle()
        return world

    world = asyncio.run(run())
    notes = [e.note for e in world.cluster.events if e.reason == "InvalidProgress"]
    assert len(notes) == 2 and "exceeds total-steps" in notes[0] and "future" in notes[1]
    assert world.cpu() == 2000  # nothing trusted, nothing decided


def test_progress_stamped_before_the_run_began_is_ignored_with_a_warning() -> None:
    """Taken as the run's first report (its anchor), a stamp a day before the bind made the next
    report measure a day-long step: the job was told DeadlineInfeasible for good."""

    async def run() -> World:
        world = World()
        await world.submit("10h")
        world.clock.advance(60)
        world.cluster.set_annotations(KEY, {"pysched.io/progress": format_progress(300, T0 - 86400)})
        await world.scheduler.run_until_idle()
        for i in range(2, 12):
            await world.progress(300 * i, 60)
        return world

    world = asyncio.run(run())
    notes = [e.note for e in world.cluster.events if e.reason == "InvalidProgress"]
    assert len(notes) == 1 and "before the run began" in notes[0], notes
    assert "DeadlineInfeasible" not in world.reasons()
    measured = world.plugin.predictor.get(KEY).count_stats()  # type: ignore[union-attr]
    assert measured and all(s.step_seconds < 1.0 for s in measured)  # 300 steps a minute: 0.2 s a step


def test_a_pod_whose_deadline_is_taken_away_leaves_the_slack_series() -> None:
    async def run() -> World:
        world = World()
        await world.submit("10h")
        await world.progress(300, 60)
        assert any(k.startswith("pysched_autoscale_predicted_slack_seconds{") for k in scrape(world))
        world.cluster.set_annotations(KEY, {"pysched.io/deadline": None})
        await world.progress(600, 60)
        return world

    seen = scrape(asyncio.run(run()))
    assert not any(k.startswith("pysched_autoscale_predicted_slack_seconds{") for k in seen)  # frozen before
    assert sum(v for k, v in seen.items() if k.startswith("pysched_autoscale_deadline_jobs{")) == 0


def test_limits_scale_with_requests_so_the_qos_class_stays() -> None:
    async def run(limits: dict[str, str], deadline: str) -> dict[str, Any]:
        world = World(limits=limits)
        await world.submit(deadline)
        await world.progress(300, 60)
        await world.progress(600, 60)
        resources: dict[str, Any] = world.cluster.pods[KEY].raw["spec"]["containers"][0]["resources"]
        return resources

    guaranteed = asyncio.run(run({"cpu": "2", "memory": "1Gi"}, "20m"))  # scaled up 2 -> 4
    assert guaranteed["requests"] == {"cpu": "4", "memory": "1Gi"} and guaranteed["limits"] == guaranteed["requests"]
    burstable = asyncio.run(run({"cpu": "3"}, "20m"))  # limit 1.5 x the request, kept at 1.5 x
    assert burstable["requests"]["cpu"] == "4" and burstable["limits"] == {"cpu": "6"}
    down = asyncio.run(run({"cpu": "2", "memory": "1Gi"}, "10h"))  # scaled down 2 -> 1
    assert down["requests"]["cpu"] == "1" and down["limits"] == {"cpu": "1", "memory": "1Gi"}
    unlimited = asyncio.run(run({"memory": "1Gi"}, "20m"))  # no CPU limit stays none
    assert unlimited["requests"]["cpu"] == "4" and unlimited["limits"] == {"memory": "1Gi"}


def test_cpu_resize_keeps_the_ratio() -> None:
    def pod(resources: dict[str, Any]) -> Any:
        raw = pod_dict("p", cpu=None, memory=None)
        raw["spec"]["containers"][0]["resources"] = resources
        return pod_from_dict(raw)

    assert cpu_resize(pod({"requests": {"cpu": "1"}}), "main", 2500) == ContainerResize({"cpu": "2500m"})
    guaranteed = cpu_resize(pod({"requests": {"cpu": "1"}, "limits": {"cpu": "1000m"}}), "main", 2500)
    assert guaranteed == ContainerResize({"cpu": "2500m"}, {"cpu": "2500m"})
    # A limit without a request: the API defaulted the request to it (Guaranteed for CPU).
    assert cpu_resize(pod({"limits": {"cpu": "2"}}), "main", 3000).limits == {"cpu": "3"}
    assert cpu_resize(pod({"requests": {"cpu": "3"}, "limits": {"cpu": "4"}}), "main", 1000).limits == {"cpu": "1334m"}
    assert cpu_resize(pod({"requests": {"cpu": "0"}, "limits": {"cpu": "1"}}), "main", 2000).limits == {"cpu": "2"}
    assert cpu_resize(pod({"requests": {"cpu": "1"}}), "other", 2000) == ContainerResize({"cpu": "2"})


async def _ended(deadline: str, phase: str, late: float = 0.0) -> World:
    """A job that reported progress twice, then ended `late` seconds later in `phase`."""
    world = World()
    await world.submit(deadline)
    await world.progress(300, 60)
    await world.progress(600, 60)
    world.clock.advance(late)
    world.cluster.finish_pod(KEY, phase)
    await world.scheduler.run_until_idle()
    return world


def scrape(world: World) -> dict[str, float]:
    metrics = SchedulerMetrics()
    metrics.add_source(lambda: plugin_metrics(world.scheduler))
    return parse_metrics(metrics.render().decode())


def test_metrics_count_rescales_slack_and_deadlines_met_and_missed() -> None:
    at_risk = World()

    async def slack() -> None:
        await at_risk.submit("20m")
        await at_risk.progress(300, 60)

    asyncio.run(slack())
    seen = scrape(at_risk)
    labels = 'namespace="default",pod="job",profile="pysched",state="on_track"'  # sorted, as exposed
    # 300 steps a minute on 2 CPUs: ~1,940 s left, 1,140 s to the deadline (about -800 s of slack).
    # The rescale to 4 CPUs that followed is the slack's from then on: just inside the deadline.
    assert 0 < seen[f"pysched_autoscale_predicted_slack_seconds{{{labels}}}"] < 200
    assert seen['pysched_autoscale_rescales_total{direction="up",profile="pysched",result="ok"}'] == 1
    assert seen['pysched_autoscale_rescales_total{direction="down",profile="pysched",result="ok"}'] == 0
    assert seen['pysched_deadlines_total{profile="pysched",result="met"}'] == 0

    roomy = scrape(asyncio.run(_ended("10h", "Succeeded")))
    assert roomy['pysched_autoscale_rescales_total{direction="down",profile="pysched",result="ok"}'] == 1
    assert roomy['pysched_deadlines_total{profile="pysched",result="met"}'] == 1
    assert roomy['pysched_deadlines_total{profile="pysched",result="missed"}'] == 0
    assert not any(k.startswith("pysched_autoscale_predicted_slack_seconds{") for k in roomy)  # ended: gone
    late = scrape(asyncio.run(_ended("20m", "Succeeded", late=3600)))
    assert late['pysched_deadlines_total{profile="pysched",result="missed"}'] == 1
    failed = scrape(asyncio.run(_ended("10h", "Failed")))
    assert failed['pysched_deadlines_total{profile="pysched",result="missed"}'] == 1
    assert failed['pysched_deadlines_total{profile="pysched",result="met"}'] == 0


def _bound_with_condition(world: World, condition: PodCondition, cpu: str, progress: str) -> None:
    """The pod as a new leader finds it: bound, its progress and the old leader's condition on it."""
    notes = {"pysched.io/deadline": "20m", "pysched.io/total-steps": "10000", "pysched.io/progress": progress}
    raw: dict[str, Any] = pod_dict("job", cpu=cpu, created=T0, annotations=notes, scheduler_name="pysched")
    raw["spec"]["nodeName"] = "n"
    raw.setdefault("status", {})["conditions"] = [
        {"type": condition.type, "status": condition.status, "reason": condition.reason, "message": condition.message}
    ]
    world.cluster.create_pod(raw)


def test_a_new_leader_resumes_the_fitted_model_and_predicted_finish_from_the_condition() -> None:
    async def first() -> World:
        world = World()
        await world.submit("20m")
        await world.progress(300, 60)  # 2 -> 4 CPUs
        await world.progress(900, 60)  # the interval with the resize in it is not a measurement
        await world.progress(1500, 60)  # measured at 4 CPUs (the cooldown ends: 2 minutes)
        return world

    old = asyncio.run(first())
    assert old.cpu() == 4000
    saved = old.cluster.conditions[KEY]["pysched.io/State"]
    assert [c.cpus for c in state_of(saved).counts] == [2, 4]  # the new count's speed was written
    old_model = old.plugin.predictor.get(KEY)
    assert old_model is not None
    old_fit = old_model.speed()
    progress = old.cluster.pods[KEY].annotations["pysched.io/progress"]

    async def second() -> World:
        world = World()
        world.clock.advance(old.clock.now() - world.clock.now())
        await world.scheduler.start()
        _bound_with_condition(world, saved, "4", progress)
        world.clock.advance(world.plugin.args.interval_seconds)
        await world.scheduler.run_until_idle()
        return world

    new = asyncio.run(second())
    model = new.plugin.predictor.get(KEY)
    assert model is not None and old_fit is not None
    fit = model.speed()
    assert fit is not None and fit.counts == old_fit.counts  # fitted over the same counts, not relearnt
    assert fit.a == pytest.approx(old_fit.a, rel=1e-3, abs=1e-6) and fit.b == pytest.approx(old_fit.b, rel=1e-3)
    old_slack = slack_of(old.plugin, KEY)
    assert slack_of(new.plugin, KEY) == pytest.approx(old_slack, abs=30)  # same predicted finish, 1 minute later
    assert new.cpu() == 4000 and new.writes == []  # nothing new to say: no decision, no write

    async def no_condition() -> World:
        world = World()
        world.clock.advance(old.clock.now() - world.clock.now())
        await world.scheduler.start()
        _bound_with_condition(world, PodCondition("other", "True"), "4", progress)
        world.clock.advance(world.plugin.args.interval_seconds)
        await world.scheduler.run_until_idle()
        return world

    fresh = asyncio.run(no_condition()).plugin.predictor.get(KEY)
    assert fresh is not None and fresh.speed() is None  # without the condition it starts from nothing


def test_the_condition_is_rewritten_only_when_what_it_says_changes_enough() -> None:
    async def run() -> World:
        world = World()
        await world.submit("10h", **{"pysched.io/cpu-min": "2"})  # roomy, and already at its floor
        for minute in range(1, 31):
            await world.progress(300 * minute, 60)  # steady: 5 steps a second
        return world

    world = asyncio.run(run())
    assert world.cpu() == 2000
    # First OnTrack, then each time the measured steps double: 30 reconciles, a handful of writes.
    assert 2 <= len(world.writes) <= 6, world.writes
    assert all(w.reason == "OnTrack" for w in world.writes)
    measured = world.writes[-1].counts  # what a new leader would restore
    assert [c.cpus for c in measured] == [2] and measured[0].step_seconds == pytest.approx(0.2, rel=1e-3)

    async def moved(steps: int) -> World:
        world = World(review_max_seconds=0)  # looked at every reconcile, however large its slack
        await world.submit("2h", **{"pysched.io/cpu-min": "2"})
        await world.progress(300, 60)  # OnTrack: ~1,940 s to go, 7,140 s to the deadline
        await world.progress(600, 60)  # written again: the speed is measured now, not estimated
        await world.progress(steps, 60)
        return world

    # 4.3 steps a second instead of 5: the finish moves ~300 s, under 5% of the time left.
    assert len(asyncio.run(moved(860)).writes) == 2
    # Half a step a second: the finish moves by ~25 minutes, which users should read.
    slowed = asyncio.run(moved(630)).writes
    assert len(slowed) == 3 and slowed[1].finish != slowed[2].finish


def test_a_job_on_track_is_looked_at_again_after_half_its_slack_one_at_risk_every_reconcile() -> None:
    async def slowed(review_max_seconds: float, minutes: int) -> World:
        world = World(review_max_seconds=review_max_seconds)
        await world.submit("2h", **{"pysched.io/cpu-min": "2"})
        await world.progress(300, 60)  # OnTrack: ~1,940 s to go, 7,140 s to the deadline
        await world.progress(600, 60)  # measured (not only estimated from the bind): reviews start
        for minute in range(3, minutes + 1):  # then half a step a second: 25 minutes later
            await world.progress(600 + 30 * (minute - 2), 60)
        return world

    # Looked at every reconcile, the slowed finish is written at once; with reviews, not before
    # the job's review (here the 600 s bound, under half its slack), then it is. (The first two
    # writes: on track from the estimate at minute 1, measured at minute 2.)
    assert len(asyncio.run(slowed(0, 3)).writes) == 3
    assert len(asyncio.run(slowed(600, 11)).writes) == 2
    reviewed = asyncio.run(slowed(600, 12))
    _, first, second = (w.finish for w in reviewed.writes)
    assert first is not None and second is not None and second > first + 1200

    async def at_risk() -> World:
        world = World(node_cpu="4")
        filler = pod_dict("filler", cpu="2", created=T0, scheduler_name="pysched")
        world.cluster.create_pod(filler)  # no room to grow: it stays at risk
        await world.submit("35m")
        await world.progress(300, 60)
        await world.progress(500, 60)  # slower: the finish moves past what was written
        return world

    risky = asyncio.run(at_risk())
    assert risky.cpu() == 2000 and risky.reasons() == ["DeadlineAtRisk"]  # it wants CPUs it cannot have
    assert len(risky.writes) == 2  # looked at again a minute later


def test_a_job_no_count_saves_and_a_rescaled_one_wait_and_an_edited_deadline_does_not() -> None:
    def measured(world: World) -> int:
        model = world.plugin.predictor.get(KEY)
        return 0 if model is None else len(model.intervals)

    async def hopeless() -> list[int]:
        world = World(node_cpu="4")
        await world.submit("5m")  # 10,000 steps of 0.2 s on 2 CPUs: no count in 4 saves it
        seen = []
        for minute in range(1, 13):
            await world.progress(100 * minute, 60)
            seen.append(measured(world))
        return seen

    # Looked at at minute 1 (demoted), minute 2 (measured, not only estimated from the bind), then
    # after reviewMaxSeconds (600 s): minute 12.
    assert asyncio.run(hopeless()) == [1] + [2] * 10 + [3]

    async def rescaled() -> list[int]:
        world = World()
        await world.submit("20m")  # at risk: grows at minute 1, then waits out its 120 s cooldown
        seen = []
        for minute in range(1, 5):
            await world.progress(300 * minute, 60)
            seen.append(measured(world))
        assert world.cpu() > 2000
        return seen

    assert asyncio.run(rescaled())[:3] == [1, 1, 2]  # not read within the cooldown (minute 2), at minute 3 again

    async def edited() -> tuple[int, int]:
        world = World()
        await world.submit("10h", **{"pysched.io/cpu-min": "2"})
        await world.progress(300, 60)
        await world.progress(600, 60)  # measured and on track: next looked at in 10 minutes
        await world.progress(900, 60)
        before = measured(world)
        world.cluster.set_annotations(KEY, {"pysched.io/deadline": format_rfc3339(world.clock.now() + 1800)})
        await world.progress(1200, 60)
        return before, measured(world)

    assert asyncio.run(edited()) == (2, 3)


def test_a_pending_job_is_sized_from_the_profile_prior_before_binding() -> None:
    async def run(deadline: str, **args: Any) -> World:
        world = World(**args)
        await world.submit(deadline)
        return world

    # 10,000 steps of 0.2 s on one CPU under the 5%-serial prior: ~1,050 s at 2 CPUs, but the
    # guess is +-50%: planned at the band's upper edge, 2 CPUs miss 20 minutes.
    tight = asyncio.run(run("20m", prior_step_seconds=0.2))
    assert tight.cpu() > 2000
    assert tight.reasons() == ["Rescaled"]
    assert "before binding, from the profile's prior" in tight.cluster.events[0].note
    assert tight.scheduler.cache.nodes.requested[0, 0] == tight.cpu()  # bound and counted at the new size
    assert asyncio.run(run("10h", prior_step_seconds=0.2)).cpu() == 1000  # roomy: the 1-CPU floor
    assert asyncio.run(run("20m")).cpu() == 2000  # no prior: the request stands
    hopeless = asyncio.run(run("20m", prior_step_seconds=2.0))  # even 16 CPUs cannot: left as asked
    assert hopeless.cpu() == 2000
    # A prior is a guess: it never enters the predictor, which learns from the job's own progress.
    model = tight.plugin.predictor.get(KEY)
    assert model is not None and model.count_stats() == ()


def test_memory_grows_with_cpus_when_the_profile_asks_and_never_shrinks() -> None:
    async def run(deadline: str, node_memory: str = "64Gi", **args: Any) -> World:
        world = World(limits={"cpu": "2", "memory": "1Gi"}, node_memory=node_memory, **args)
        await world.submit(deadline)
        await world.progress(300, 60)
        await world.progress(600, 60)
        return world

    def resources(world: World) -> dict[str, Any]:
        found: dict[str, Any] = world.cluster.pods[KEY].raw["spec"]["containers"][0]["resources"]
        return found

    up = asyncio.run(run("20m", memory="withCpu"))
    assert resources(up)["requests"] == {"cpu": "4", "memory": "2Gi"} == resources(up)["limits"]
    assert "memory -> 2Gi" in up.cluster.conditions[KEY]["pysched.io/Deadline"].message
    fixed = asyncio.run(run("20m"))
    assert resources(fixed)["requests"] == {"cpu": "4", "memory": "1Gi"}
    down = asyncio.run(run("10h", memory="withCpu"))
    assert resources(down)["requests"] == {"cpu": "1", "memory": "1Gi"}  # memory is never given back
    # 1.5Gi of node memory: room for 3 CPUs' worth (1Gi per 2 CPUs), not 4.
    tight = asyncio.run(run("20m", node_memory="1536Mi", memory="withCpu"))
    assert resources(tight)["requests"] == {"cpu": "3", "memory": "1536Mi"}


def test_memory_mode_is_checked() -> None:
    with pytest.raises(ValueError, match="memory"):
        AutoscaleArgs(memory="double").validate()


def _kubelet_status(cpu: str, pending: str | None = None, memory: str = "1Gi") -> dict[str, Any]:
    """What a kubelet writes while a resize to more CPUs waits: the container still runs on `cpu`."""
    status: dict[str, Any] = {
        "phase": "Running",
        "containerStatuses": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if pending is not None:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": pending, "message": "no room"}]
    return status


def test_a_deferred_resize_is_waited_for_and_measured_at_the_cpus_the_job_really_has() -> None:
    async def run() -> World:
        world = World(cooldown_seconds=0)
        await world.submit("20m")
        await world.progress(300, 60)  # 2 -> 4 asked for
        world.cluster.set_status(KEY, _kubelet_status("2", "Deferred"))
        await world.progress(600, 60)
        await world.progress(900, 60)  # still at risk, no cooldown: but the last resize is pending
        return world

    world = asyncio.run(run())
    assert world.cpu() == 4000 and world.reasons() == ["DeadlineAtRisk", "Rescaled"]
    model = world.plugin.predictor.get(KEY)
    assert model is not None and {s.cpus for s in model.count_stats()} == {2.0}  # the Deferred time counts at 2

    async def actuated() -> None:
        world.cluster.set_status(KEY, _kubelet_status("4"))
        await world.progress(1500, 60)  # the count changed: this interval is not a measurement
        await world.progress(2100, 60)  # measured at 4, and deciding again
        assert "Rescaled" in world.reasons()[2:]

    asyncio.run(actuated())


def test_an_infeasible_resize_is_abandoned_with_an_event_and_the_spec_put_back() -> None:
    async def run() -> World:
        world = World()
        await world.submit("20m")
        await world.progress(300, 60)  # 2 -> 4 asked for
        world.cluster.set_status(KEY, _kubelet_status("2", "Infeasible"))
        await world.progress(600, 60)
        return world

    world = asyncio.run(run())
    assert world.cpu() == 2000  # asked back: spec == what the container has
    failed = [e for e in world.cluster.events if e.reason == "RescaleFailed"]
    assert len(failed) == 1 and "cpu 2 -> 4 refused by the kubelet (no room); back to 2 CPUs" in failed[0].note
    resources = world.cluster.pods[KEY].raw["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "2", "memory": "1Gi"}
    # Two requests the API took, each counted once: the refused one up, the put-back down.
    counted = {k: v for k, v in scrape(world).items() if k.startswith("pysched_autoscale_rescales_total") and v}
    assert counted == {
        'pysched_autoscale_rescales_total{direction="up",profile="pysched",result="ok"}': 1,
        'pysched_autoscale_rescales_total{direction="down",profile="pysched",result="ok"}': 1,
    }

    async def with_memory() -> World:
        world = World(memory="withCpu")
        await world.submit("20m")
        await world.progress(300, 60)  # 2 -> 4 CPUs, 1Gi -> 2Gi asked for
        world.cluster.set_status(KEY, _kubelet_status("2", "Infeasible"))
        await world.progress(600, 60)
        return world

    grown = asyncio.run(with_memory()).cluster.pods[KEY].raw["spec"]["containers"][0]["resources"]
    assert grown["requests"] == {"cpu": "2", "memory": "1Gi"}  # both put back


def test_a_put_back_the_apiserver_refuses_is_tried_again_only_after_the_cooldown() -> None:
    async def run() -> World:
        world = World()
        await world.submit("20m")
        await world.progress(300, 60)  # 2 -> 4 asked for at T0 + 60

        async def refuse(pod: PodInfo, containers: Any) -> Status:
            return Status(Code.ERROR, ("etcd is unhappy",))

        world.cluster.resize = refuse  # type: ignore[method-assign]
        world.cluster.set_status(KEY, _kubelet_status("2", "Infeasible"))
        for steps in (600, 900, 1200):  # T0 + 120, 180, 240: the retry waits out 120 s
            await world.progress(steps, 60)
        return world

    world = asyncio.run(run())
    failed = [e for e in world.cluster.events if e.reason == "RescaleFailed"]
    assert [e.time for e in failed] == [T0 + 120, T0 + 240]
    assert "reverting failed too: etcd is unhappy" in failed[0].note

    async def refused_up() -> World:
        world = World()
        await world.submit("20m")

        async def refuse(pod: PodInfo, containers: Any) -> Status:
            return Status(Code.ERROR, ("etcd is unhappy",))

        world.cluster.resize = refuse  # type: ignore[method-assign]
        await world.progress(300, 60)
        return world

    up = asyncio.run(refused_up())
    assert [e.note for e in up.cluster.events if e.reason == "RescaleFailed"] == ["cpu 2 -> 4: etcd is unhappy"]


@pytest.mark.parametrize(
    ("args", "key"),
    [
        ({"intervalSeconds": 1.0e-300}, "intervalSeconds: must be >= 0.1 and <= 86400"),
        ({"intervalSeconds": float("inf")}, "intervalSeconds"),
        ({"cooldownSeconds": 1e9}, "cooldownSeconds: must be >= 0"),
        ({"cooldownSeconds": 1e300}, "cooldownSeconds: expected a finite float"),
        ({"cooldownSeconds": float("nan")}, "cooldownSeconds"),
        ({"restartSeconds": -1}, "restartSeconds"),
        ({"priorStepSeconds": float("inf")}, "priorStepSeconds"),
        ({"safetyMargin": 1e300}, "safetyMargin"),
        ({"maxStepFactor": 1e300}, "maxStepFactor"),
        ({"cpuMin": float("nan")}, "cpuMin"),
    ],
)
def test_intervals_and_durations_are_bounded(args: dict[str, float], key: str) -> None:
    with pytest.raises(ArgsError, match=key):
        parse_args(AutoscaleArgs, args)
    assert parse_args(AutoscaleArgs, {"intervalSeconds": 0.2, "cooldownSeconds": 0}).interval_seconds == 0.2


PS_JOB = (("train-ps-0", "ps"), ("train-worker-0", "worker"), ("train-worker-1", "worker"))


async def _parameter_server_job(world: World) -> None:
    """A gang of a parameter server and two workers of 2 CPUs each, 10,000 steps due in 20 minutes, placed."""
    for name, role in PS_JOB:
        notes = {"pysched.io/deadline": "20m", "pysched.io/total-steps": "10000", MIN_MEMBERS: "3"}
        raw = pod_dict(name, cpu="2", created=T0, annotations=notes, scheduler_name="pysched",
                       labels={JOB_LABEL: "train", ROLE_LABEL: role})  # fmt: skip
        world.cluster.create_pod(raw)
    await world.scheduler.run_until_idle()


def test_a_gangs_workers_scale_together_from_rank_0s_progress_and_the_server_keeps_its_cpus() -> None:
    """A parameter-server job: rank 0 reports the job's global steps; every worker moves to the
    count chosen, the server stays, and the job's deadline counts once."""
    rank0 = PodKey("default/train-worker-0")

    async def run() -> World:
        world = World(node_cpu="32")
        await world.scheduler.start()
        await _parameter_server_job(world)
        assert all(world.cluster.pods[PodKey(f"default/{n}")].node_name for n, _ in PS_JOB)
        world.clock.advance(60)
        world.cluster.set_annotations(rank0, {"pysched.io/progress": format_progress(300, world.clock.now())})
        await world.scheduler.run_until_idle()
        return world

    world = asyncio.run(run())
    cpus = {key.split("/")[1]: pod.requests["cpu"] for key, pod in world.cluster.pods.items()}
    assert cpus["train-worker-0"] == cpus["train-worker-1"] == 4000  # both workers, one step up
    assert cpus["train-ps-0"] == 2000
    assert set(world.cluster.conditions) == {PodKey("default/train-worker-0")}  # rank 0 speaks for the job

    async def finish() -> None:  # one member at a time, rank 0 first, with reconciles between
        for key in sorted(world.cluster.pods, key=lambda k: k != rank0):
            world.cluster.finish_pod(key)
            world.clock.advance(60)
            await world.scheduler.run_until_idle()

    asyncio.run(finish())
    (deadlines,) = [f for f in world.plugin.metric_families() if f.name == "pysched_deadlines"]
    assert deadlines.values == {("met",): 1.0, ("missed",): 0.0}  # the job once, not once per pod

    # Every member carries the job's verdict; one of them (the first to end) counts it.
    states = {key: state_of(world.cluster.conditions[key]["pysched.io/State"]) for key in world.cluster.pods}
    assert {s.verdict for s in states.values()} == {"met"} and [k for k, s in states.items() if s.counted] == [rank0]
    reasons = {world.cluster.conditions[key]["pysched.io/Deadline"].reason for key in world.cluster.pods}
    assert reasons == {"DeadlineMet"}

    # A new leader counts the job once again from what the pods say, and writes nothing.
    leader = World(node_cpu="32")
    leader.scheduler.take_over(list(world.cluster.pods.values()))
    (rebuilt,) = [f for f in leader.plugin.metric_families() if f.name == "pysched_deadlines"]
    assert rebuilt.values == {("met",): 1.0, ("missed",): 0.0} and leader.writes == []


def test_a_job_that_ends_gets_a_verdict_condition_and_event_saying_by_how_much() -> None:
    met = asyncio.run(_ended("10h", "Succeeded"))
    condition = met.cluster.conditions[KEY]["pysched.io/Deadline"]
    assert (condition.status, condition.reason) == ("True", "DeadlineMet")
    assert condition.message.startswith("met: finished 9h 58m before the deadline (")
    state = state_of(met.cluster.conditions[KEY]["pysched.io/State"])
    assert (state.verdict, state.ended_at, state.counted, state.deadline) == ("met", met.clock.now(), True, T0 + 36000)
    assert state.counts  # what was measured stays with the verdict
    (event,) = [e for e in met.cluster.events if e.reason == "DeadlineMet"]
    assert event.type == "Normal" and event.note == condition.message

    late = asyncio.run(_ended("20m", "Succeeded", late=3600))
    condition = late.cluster.conditions[KEY]["pysched.io/Deadline"]
    assert (condition.status, condition.reason) == ("False", "DeadlineMissed")
    assert condition.message.startswith("missed: finished 42m after the deadline (")
    assert [e.type for e in late.cluster.events if e.reason == "DeadlineMissed"] == ["Warning"]

    failed = asyncio.run(_ended("10h", "Failed"))
    condition = failed.cluster.conditions[KEY]["pysched.io/Deadline"]
    assert condition.reason == "DeadlineMissed" and condition.message.startswith("missed: failed 9h 58m before")


def test_a_standby_judges_nothing_and_a_new_leader_judges_what_ended_meanwhile() -> None:
    async def run() -> tuple[World, list[PodInfo]]:
        world = World()
        await world.submit("10h")
        world.scheduler.frameworks["pysched"].handle.pod_lifecycle.leading = False  # as `pysched run` builds a standby
        await world.progress(300, 60)
        world.cluster.finish_pod(KEY, "Succeeded")
        await world.scheduler.run_until_idle()
        assert world.writes == [] or all(w.verdict is None for w in world.writes)
        assert "DeadlineMet" not in world.reasons()
        # Another job a previous leader judged, then this one takes over.
        notes = {"pysched.io/deadline": "1h", "pysched.io/total-steps": "10"}
        judged = pod_dict("old", cpu="1", created=T0, annotations=notes, node_name="n")
        judged.setdefault("status", {})["phase"] = "Succeeded"
        record = JobRecord("DeadlineMissed", "missed", T0 + 3600, verdict="missed", ended_at=T0 + 4000, counted=True)
        judged["status"]["conditions"] = [
            {"type": "pysched.io/State", "status": "True", "message": state_message(record)}
        ]
        finished = {"name": "main", "state": {"terminated": {"finishedAt": format_rfc3339(world.clock.now())}}}
        world.cluster.set_status(KEY, {**world.cluster.pods[KEY].raw["status"], "containerStatuses": [finished]})
        ended = [world.cluster.pods[KEY], pod_from_dict(judged)]
        world.clock.advance(600)  # the kubelet's finish is what counts, not when a leader learns it
        world.scheduler.take_over(ended)
        await world.scheduler.run_until_idle()
        return world, ended

    world, _ = asyncio.run(run())
    (deadlines,) = [f for f in world.plugin.metric_families() if f.name == "pysched_deadlines"]
    assert deadlines.values == {("met",): 1.0, ("missed",): 1.0}
    condition = world.cluster.conditions[KEY]["pysched.io/Deadline"]
    assert condition.reason == "DeadlineMet" and "9h 59m before the deadline" in condition.message
    assert PodKey("default/old") not in world.cluster.conditions  # judged already: not written again


def test_the_slack_of_a_job_past_its_deadline_is_clamped_and_labelled_infeasible() -> None:
    async def run() -> World:
        world = World()
        await world.submit("2020-01-01T00:00:00Z")  # six years ago: no count can make it
        await world.progress(300, 60)
        return world

    world = asyncio.run(run())
    (gauge,) = [f for f in world.plugin.metric_families() if f.name == "pysched_autoscale_predicted_slack_seconds"]
    assert gauge.values == {("default", "job", "infeasible"): -30 * 86400.0}
    (jobs,) = [f for f in world.plugin.metric_families() if f.name == "pysched_autoscale_deadline_jobs"]
    assert jobs.values == {("on_track",): 0.0, ("at_risk",): 0.0, ("infeasible",): 1.0}


def test_per_pod_slack_series_are_capped_while_the_count_by_state_stays_complete() -> None:
    async def run(limit: int) -> World:
        world = World(slack_series_limit=limit)
        await world.submit("10h")
        await world.progress(300, 60)
        return world

    for limit, series in ((0, 0), (1, 1)):
        families = {f.name: f for f in asyncio.run(run(limit)).plugin.metric_families()}
        assert len(families["pysched_autoscale_predicted_slack_seconds"].values) == series
        assert families["pysched_autoscale_deadline_jobs"].values[("on_track",)] == 1.0


def test_at_take_over_pods_of_one_job_that_are_no_gang_are_judged_each_on_its_own() -> None:
    """A Job that runs its pods one after the other: a verdict on one is not the other's."""

    def ended(name: str, verdict: str | None) -> PodInfo:
        notes = {"pysched.io/deadline": "1h", "pysched.io/total-steps": "10"}
        raw = pod_dict(name, cpu="1", created=T0, annotations=notes, node_name="n", labels={JOB_LABEL: "seq"})
        raw.setdefault("status", {})["phase"] = "Succeeded"
        if verdict is not None:
            record = JobRecord("DeadlineMissed", "missed", T0 + 3600, verdict=verdict, ended_at=T0 + 4000, counted=True)
            raw["status"]["conditions"] = [
                {"type": "pysched.io/State", "status": "True", "message": state_message(record)}
            ]
        return pod_from_dict(raw)

    async def run() -> World:
        world = World()
        world.clock.advance(60)  # the second pod ended well within its deadline
        world.scheduler.take_over([ended("seq-0", "missed"), ended("seq-1", None)])
        await world.scheduler.run_until_idle()
        return world

    world = asyncio.run(run())
    (deadlines,) = [f for f in world.plugin.metric_families() if f.name == "pysched_deadlines"]
    assert deadlines.values == {("met",): 1.0, ("missed",): 1.0}


def test_a_pod_being_deleted_is_not_scaled() -> None:
    """Its room goes back when it leaves: none is taken from jobs that can still be saved."""

    async def run() -> World:
        world = World()
        await world.submit("20m")  # at risk: the first progress would scale it up
        world.cluster.begin_deletion(KEY)
        await world.progress(300, 60)
        return world

    world = asyncio.run(run())
    assert world.cluster.pods[KEY].deleting
    assert world.cpu() == 2000 and world.reasons() == []


def test_a_workers_refused_resize_is_put_back_and_its_gang_decided_again() -> None:
    """Rank 0 got its CPUs, worker 1's kubelet refused them for good: the gang waited for worker
    1 for ever (past its deadline, no word). Worker 1 is put back, and the gang is decided again,
    below the count refused."""
    rank0, worker1 = PodKey("default/train-worker-0"), PodKey("default/train-worker-1")

    async def run() -> World:
        world = World(node_cpu="32", cooldown_seconds=120)
        await world.scheduler.start()
        await _parameter_server_job(world)
        steps = 300
        for minute in range(8):
            world.clock.advance(60)
            world.cluster.set_annotations(rank0, {"pysched.io/progress": format_progress(steps, world.clock.now())})
            await world.scheduler.run_until_idle()
            if minute == 0:  # 2 -> 4 asked for both workers: rank 0 gets them, worker 1 never will
                world.cluster.set_status(rank0, _kubelet_status("4"))
                world.cluster.set_status(worker1, _kubelet_status("2", "Infeasible"))
            steps += 250
        return world

    world = asyncio.run(run())
    failed = [e for e in world.cluster.events if e.reason == "RescaleFailed"]
    assert [(e.pod, e.time) for e in failed] == [(worker1, T0 + 120)]
    assert "cpu 2 -> 4 refused by the kubelet (no room); back to 2 CPUs" in failed[0].note
    # Decided again once worker 1 runs on what it has, never for 4 CPUs a worker again.
    (verdict,) = [e for e in world.cluster.events if e.time > T0 + 120]
    assert verdict.reason == "DeadlineInfeasible" and verdict.note == "cannot meet the deadline even at 3 CPUs"
    assert world.cluster.conditions[rank0]["pysched.io/Deadline"].reason == "DeadlineInfeasible"


def test_a_count_the_kubelet_refused_for_good_is_not_asked_for_again() -> None:
    """Infeasible (a count beyond its node, or any change under the static CPU manager) does not
    pass with time: the job is not sent up to it, then put back, after every cooldown."""

    async def run() -> World:
        world = World(cooldown_seconds=120)
        await world.submit("20m")
        steps = 0
        for _ in range(20):  # the kubelet runs it on 2 CPUs and refuses any other count
            spec = world.cluster.pods[KEY].raw["spec"]["containers"][0]["resources"]["requests"]["cpu"]
            world.cluster.set_status(KEY, _kubelet_status("2", None if spec == "2" else "Infeasible"))
            steps += 500
            await world.progress(steps, 60)
        return world

    world = asyncio.run(run())
    notes = [(e.time - T0, e.reason, e.note.split(":")[0]) for e in world.cluster.events if e.reason != "Scheduled"]
    assert notes == [
        (60, "DeadlineAtRisk", "at 2 CPUs the job would miss its deadline 2026-01-01T00"),
        (60, "Rescaled", "cpu 2 -> 3"),
        (120, "RescaleFailed", "cpu 2 -> 3 refused by the kubelet (no room); back to 2 CPUs"),
        (240, "DeadlineInfeasible", "cannot meet the deadline even at 2 CPUs"),  # not 3 again
    ]
    assert world.cpu() == 2000


@pytest.mark.parametrize(("memory", "cpus"), [("withCpu", 6000), ("fixed", 4000)])
def test_memory_that_restarts_its_container_makes_a_scale_up_a_restart(memory: str, cpus: int) -> None:
    """resizePolicy memory RestartContainer: memory grown with the CPUs restarts the container, so
    the job moves straight to its share as a restarting one does; with memory fixed it resizes
    in place, stepping up gradually."""

    async def run() -> World:
        world = World(memory=memory)
        await world.scheduler.start()
        notes = {"pysched.io/deadline": "20m", "pysched.io/total-steps": "10000"}
        raw: dict[str, Any] = pod_dict(
            "job", cpu="2", memory="1Gi", created=T0, annotations=notes, scheduler_name="pysched"
        )
        raw["spec"]["containers"][0]["resizePolicy"] = [
            {"resourceName": "cpu", "restartPolicy": "NotRequired"},
            {"resourceName": "memory", "restartPolicy": "RestartContainer"},
        ]
        world.cluster.create_pod(raw)
        await world.scheduler.run_until_idle()
        await world.progress(300, 60)
        return world

    assert asyncio.run(run()).cpu() == cpus


def test_a_deadline_moved_while_the_job_runs_is_written_at_its_next_look() -> None:
    async def run() -> World:
        world = World()
        await world.submit("30h", **{"pysched.io/total-steps": "100000"})
        steps = 0
        for _ in range(120):  # on track at a steady 150 steps a minute: its forecast settled
            steps += 150
            await world.progress(steps, 60)
        world.cluster.set_annotations(KEY, {"pysched.io/deadline": "25h"})  # five hours earlier
        await world.progress(steps + 150, 60)
        return world

    world = asyncio.run(run())
    state = parse_state(world.cluster.conditions[KEY]["pysched.io/State"].message)
    assert state is not None and state.deadline == T0 + 25 * 3600


def test_each_at_risk_episode_is_warned_of() -> None:
    """On track again ends an episode: a job that falls behind once more is warned again."""

    async def run() -> World:
        world = World(review_max_seconds=0)
        await world.submit("40m")
        steps = 0
        for minute in range(1, 31):
            slow = 1.4 if minute >= 12 else 1.0  # from minute 12 every step takes 1.4 times as long
            steps = min(10000, steps + round(60 / (slow * (0.03 + 0.5 / (world.cpu() / 1000)))))
            await world.progress(steps, 60)
        return world

    world = asyncio.run(run())
    reasons = [e.reason for e in world.cluster.events if e.reason in ("DeadlineAtRisk", "Rescaled")]
    assert reasons.count("DeadlineAtRisk") == 2 and reasons[0] == "DeadlineAtRisk", reasons


def _job_pod(name: str, created: float) -> dict[str, Any]:
    """A pod of the batch/v1 Job `train` (one pod at a time), as its controller makes them."""
    notes = {"pysched.io/deadline": "10h", "pysched.io/total-steps": "10000"}
    raw: dict[str, Any] = pod_dict(name, cpu="2", created=created, annotations=notes, scheduler_name="pysched")
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid", "controller": True}
    ]
    return raw


@pytest.mark.parametrize("evicted", [False, True])
def test_a_pod_its_job_replaces_is_not_the_jobs_end(evicted: bool) -> None:
    """The Job's first pod fails (or is evicted while it runs), its replacement succeeds in time:
    one job, met; the failed attempt gets no verdict and counts nowhere."""
    first, second = PodKey("default/train-a"), PodKey("default/train-b")

    async def run() -> World:
        world = World()
        world.cluster.add_owner("job-uid", T0)
        await world.scheduler.start()
        world.cluster.create_pod(_job_pod("train-a", T0))
        await world.scheduler.run_until_idle()
        if evicted:
            world.cluster.begin_deletion(first)
        world.cluster.finish_pod(first, "Failed")
        await world.scheduler.run_until_idle()
        world.clock.advance(10)
        world.cluster.create_pod(_job_pod("train-b", world.clock.now()))
        await world.scheduler.run_until_idle()
        world.clock.advance(1800)
        world.cluster.finish_pod(second)
        await world.scheduler.run_until_idle()
        return world

    world = asyncio.run(run())
    (deadlines,) = [f for f in world.plugin.metric_families() if f.name == "pysched_deadlines"]
    assert deadlines.values == {("met",): 1.0, ("missed",): 0.0}
    verdicts = [(e.pod, e.reason) for e in world.cluster.events if e.reason in ("DeadlineMet", "DeadlineMissed")]
    assert verdicts == [(second, "DeadlineMet")]


def test_a_failed_pod_no_other_replaces_is_its_jobs_end() -> None:
    """Missed once the Job gives up (its Failed condition), or once the deadline passes with no
    pod of the job left."""

    async def run(gives_up: bool) -> World:
        world = World()
        world.cluster.add_owner("job-uid", T0)
        await world.scheduler.start()
        world.cluster.create_pod(_job_pod("train-a", T0))
        await world.scheduler.run_until_idle()
        world.cluster.finish_pod(PodKey("default/train-a"), "Failed")
        await world.scheduler.run_until_idle()
        if gives_up:
            world.cluster.failed_jobs.add(job_key("default", JobSource.BATCH, "train"))
        for _ in range(3):
            world.clock.advance(60)
            await world.scheduler.run_until_idle()
        if not gives_up:
            world.clock.advance(10 * 3600)  # past the deadline
            await world.scheduler.run_until_idle()
        return world

    for gives_up in (True, False):
        world = asyncio.run(run(gives_up))
        (deadlines,) = [f for f in world.plugin.metric_families() if f.name == "pysched_deadlines"]
        assert deadlines.values == {("met",): 0.0, ("missed",): 1.0}, gives_up
        assert [e.reason for e in world.cluster.events if e.reason.startswith("DeadlineM")] == ["DeadlineMissed"]


def test_a_job_resumed_from_a_checkpoint_is_not_scaled_down_on_its_first_report() -> None:
    """5,000 steps were done before this pod; it does one a second on its 2 CPUs. Its first
    report, read against its bind, says 84 steps a second: it is not scaled down on that, and its
    second report shows it at risk."""

    async def run() -> World:
        world = World()
        await world.submit("1h")
        await world.progress(5_060, 60)
        assert world.cpu() == 2000 and world.reasons() == []
        await world.progress(5_120, 60)
        return world

    world = asyncio.run(run())
    assert world.cpu() == 4000 and world.reasons() == ["DeadlineAtRisk", "Rescaled"]


def test_progress_written_before_a_deferred_resize_took_effect_is_not_measured_at_the_new_count() -> None:
    """2 -> 3 CPUs is asked for at 120 s and takes effect at 175 s, after the report of 125 s:
    that report was made on 2 CPUs, so the new count is measured from the next one (0.4 / c s a
    step: 2 -> 3 CPUs is 5 -> 7.5 steps a second)."""

    async def run() -> tuple[World, list[bool]]:
        world = World()
        await world.submit("30m")
        done, seen = 0.0, []

        async def at(seconds: float, steps_per_s: float, report: bool, look: bool) -> None:
            nonlocal done
            done += (T0 + seconds - world.clock.now()) * steps_per_s
            world.clock.advance(T0 + seconds - world.clock.now())
            if report:
                world.cluster.set_annotations(
                    KEY, {"pysched.io/progress": format_progress(int(done), world.clock.now())}
                )
            if look:
                await world.scheduler.run_until_idle()

        await at(65, 5.0, report=True, look=False)
        await at(120, 5.0, report=False, look=True)  # at risk: 2 -> 3 CPUs asked for
        target = world.cpu() / 1000
        world.cluster.set_status(KEY, _kubelet_status("2", "Deferred"))
        await at(125, 5.0, report=True, look=False)
        await at(175, 5.0, report=False, look=False)
        world.cluster.set_status(KEY, _kubelet_status(f"{target:g}"))  # the kubelet actuates
        await at(180, 2.5 * target, report=False, look=True)
        await at(185, 2.5 * target, report=True, look=False)
        await at(240, 2.5 * target, report=False, look=True)
        model = world.plugin.predictor.get(KEY)
        assert model is not None
        seen.append(model.is_measured(target))
        await at(245, 2.5 * target, report=True, look=False)
        await at(300, 2.5 * target, report=False, look=True)
        seen.append(model.is_measured(target))
        return world, seen

    world, seen = asyncio.run(run())
    model = world.plugin.predictor.get(KEY)
    assert model is not None and seen == [False, True]
    target = max(s.cpus for s in model.count_stats())
    measured = model.measured()[target]
    assert not measured.estimate and measured.step_seconds == pytest.approx(0.4 / target, rel=0.02)


def test_a_gang_whose_worker_still_waits_for_its_resize_is_not_measured_at_rank_0s_new_count() -> None:
    """Both workers go 2 -> 4 CPUs; worker 1's resize is deferred until 200 s, and the gang goes
    at its pace meanwhile. Nothing is measured at 4 CPUs before it runs on 4 CPUs too."""
    rank0, worker1 = PodKey("default/train-worker-0"), PodKey("default/train-worker-1")

    async def run() -> World:
        world = World(node_cpu="32")
        await world.scheduler.start()
        await _parameter_server_job(world)
        done, pace = 0.0, 5.0  # the slowest worker's: 0.4 / c s a step

        async def minute(seconds: float) -> None:
            nonlocal done
            done += (T0 + seconds - world.clock.now()) * pace
            world.clock.advance(T0 + seconds - world.clock.now())
            world.cluster.set_annotations(rank0, {"pysched.io/progress": format_progress(int(done), world.clock.now())})
            await world.scheduler.run_until_idle()

        await minute(60)  # at risk: both workers asked to go 2 -> 4
        world.cluster.set_status(rank0, _kubelet_status("4"))
        world.cluster.set_status(worker1, _kubelet_status("2", "Deferred"))
        await minute(120)
        await minute(180)
        done += 20 * pace
        world.clock.advance(20)
        world.cluster.set_status(worker1, _kubelet_status("4"))
        pace = 10.0
        await minute(240)
        model = world.plugin.predictor.get(rank0)
        assert model is not None and not model.is_measured(4.0)  # its one report at 4 CPUs anchors
        await minute(300)
        return world

    world = asyncio.run(run())
    model = world.plugin.predictor.get(rank0)
    assert model is not None and model.is_measured(4.0)
    assert model.measured()[4.0].step_seconds == pytest.approx(0.1, rel=0.02)


def test_a_job_predicted_to_finish_past_year_9999_gets_its_conditions_not_an_internal_error() -> None:
    async def run() -> World:
        world = World()
        await world.submit("10h", **{"pysched.io/total-steps": "9999999999999999"})  # 16 digits: accepted
        for steps in (1, 2, 3):  # a step a minute: done in 10^16 minutes
            await world.progress(steps, 60)
        return world

    world = asyncio.run(run())
    assert dict(world.scheduler.incidents.counts) == {}
    condition = world.cluster.conditions[KEY]["pysched.io/Deadline"]
    assert condition.reason == "DeadlineInfeasible" and "(after 9999)" in condition.message


def test_pods_whose_cpus_a_container_resize_cannot_change_are_never_resized() -> None:
    """What the API refuses is not sent: a BestEffort pod's container given a CPU request before
    its bind (its QoS class would change), a container under pod-level CPU resources (the sum
    would pass them); and a main container without a CPU request is not read as holding its
    pod's other containers' CPUs (a loader's 3 CPUs were read as the main one's, then 3 more
    added on top)."""

    def best_effort(spec: dict[str, Any]) -> None:
        spec["containers"][0]["resources"] = {}

    def pod_level(spec: dict[str, Any]) -> None:
        spec["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}

    def loader_beside(spec: dict[str, Any]) -> None:
        spec["containers"][0]["resources"] = {"requests": {"memory": "1Gi"}}
        spec["containers"].append({"name": "loader", "image": "x", "resources": {"requests": {"cpu": "3"}}})

    sent: list[Mapping[str, ContainerResize]] = []

    async def run(edit: Callable[[dict[str, Any]], None], **args: Any) -> World:
        world = World(**args)
        resize = world.cluster.resize

        async def recorded(pod: PodInfo, containers: Mapping[str, ContainerResize]) -> Status:
            sent.append(containers)
            return await resize(pod, containers)

        world.cluster.resize = recorded  # type: ignore[method-assign]
        world.edit = edit
        await world.submit("20m")
        await world.progress(300, 60)
        await world.progress(600, 60)
        return world

    for edit, args in ((best_effort, {"prior_step_seconds": 0.2}), (pod_level, {}), (loader_beside, {})):
        world = asyncio.run(run(edit, **args))
        assert "Rescaled" not in world.reasons(), (edit.__name__, world.cluster.events)
        assert sent == [], edit.__name__
    pod = asyncio.run(run(loader_beside)).cluster.pods[KEY]
    assert container_cpus(pod, "main") == 0.0 and pod.requests["cpu"] == 3000


def test_memory_grown_with_cpus_keeps_the_jobs_first_ratio_after_a_step_down() -> None:
    """`memory: withCpu` grows memory in proportion to CPUs and never takes it back. After a step
    down the spec's own ratio is inflated; growing by it again ratcheted memory up (2 CPUs / 1Gi
    went to 18Gi at 6 CPUs after one cycle down and up). The job's first ratio, 0.5Gi a CPU, caps it."""

    async def run() -> World:
        world = World(memory="withCpu", cooldown_seconds=0, review_max_seconds=0)
        await world.submit("20m")
        steps = 0
        for _ in range(2):
            steps += 300
            await world.progress(steps, 60)
        world.cluster.set_annotations(KEY, {"pysched.io/deadline": format_rfc3339(T0 + 86400)})
        for _ in range(4):
            steps += 600
            await world.progress(steps, 60)
        world.cluster.set_annotations(KEY, {"pysched.io/deadline": format_rfc3339(T0 + 24 * 60)})
        for _ in range(3):
            steps += 300
            await world.progress(steps, 60)
        return world

    world = asyncio.run(run())
    grown = [e.note for e in world.cluster.events if e.reason == "Rescaled"]
    assert any(" -> 1" in note for note in grown), grown  # it did step down, then up again
    assert grown[-1].startswith("cpu 4 -> 6:")  # back at 6 CPUs: 3Gi, as the first time
    assert world.cluster.pods[KEY].requests == {"cpu": 6000, "memory": 3 * 2**30}


def test_a_job_below_its_cpu_min_but_on_time_is_raised_without_a_risk_warning() -> None:
    """A job on 2 CPUs with `cpu-min: 4` and ten hours to spare: raised to its floor as its bounds
    say ("up to its cpu-min"), or left on track when its node has no room; never told it would
    miss its deadline (DeadlineAtRisk "at 2 CPUs the job would miss", 9h 26m early)."""

    async def run(filler: str | None) -> World:
        world = World()
        if filler is not None:
            world.cluster.create_pod(pod_dict("filler", cpu=filler, node_name="n", scheduler_name="other"))
        await world.submit("10h", **{CPU_MIN: "4"})
        await world.progress(300, 60)
        await world.progress(600, 60)
        return world

    roomy = asyncio.run(run(None))
    assert "DeadlineAtRisk" not in roomy.reasons(), roomy.cluster.events
    assert any(e.note.startswith("cpu 2 -> 4 up to its cpu-min:") for e in roomy.cluster.events), roomy.cluster.events
    full = asyncio.run(run("14"))
    assert "DeadlineAtRisk" not in full.reasons(), full.cluster.events
    assert full.cluster.conditions[KEY]["pysched.io/Deadline"].reason == "OnTrack"


def test_a_deferred_resize_leaves_the_forecast_on_the_count_the_job_runs_on() -> None:
    """Asked to go from 2 to 4 CPUs, the kubelet defers the resize and the job keeps running on 2:
    its Deadline condition and slack follow what 2 CPUs give (a miss), where they kept saying the
    job was on time at 4 for as long as the resize waited."""

    async def run() -> World:
        world = World()
        await world.submit("20m")
        await world.progress(300, 60)  # 2 -> 4 asked for
        assert world.cpu() == 4000
        deferred = {
            "phase": "Running",
            "containerStatuses": [{"name": "main", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
            "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred", "message": "cpu"}],
        }
        world.cluster.set_status(KEY, deferred)
        steps = 300
        for _ in range(10):
            steps += 300
            await world.progress(steps, 60)
        return world

    world = asyncio.run(run())
    condition = world.cluster.conditions[KEY]["pysched.io/Deadline"]
    assert condition.status == "False" and "after the deadline, at 2 CPUs" in condition.message, condition
    assert world.plugin.controller._slack[KEY] < 0
