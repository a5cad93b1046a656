import asyncio
import dataclasses
from typing import Any

import pytest
from pysched.plugins import default_registry
from pysched.plugins.autoscale import Autoscale, AutoscaleArgs, choose

from pysched.backend.simulated import SimulatedCluster
from pysched.builders import node_dict, pod_dict
from pysched.clock import VirtualClock
from pysched.framework.cluster import ContainerResize, cpu_resize
from pysched.framework.config import ConfigError, parse_config
from pysched.ids import PodKey
from pysched.metrics import SchedulerMetrics, plugin_metrics
from pysched.objects import pod_from_dict
from pysched.predictor import JobModel
from pysched.profiles import builtin_config
from pysched.scheduler import Scheduler
from pysched.testing.scheduler import parse_metrics
from pysched.workload.progress import format_progress

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
KEY = PodKey("default/job")


def _model(step_s: float, cpus: float, total: int = 10_000) -> JobModel:
    """Measured at `cpus`: 600 s of steps at `step_s`, observed at T0 + 600."""
    model = JobModel(total)
    model.observe(0, T0, cpus, T0)
    model.observe(round(600 / step_s), T0 + 600, cpus, T0 + 600)
    return model


def test_choose_the_smallest_count_that_makes_the_deadline() -> None:
    model = _model(0.2, 2.0)  # 3,000 of 10,000 steps done: 1,400 s left at 2 CPUs
    now = T0 + 600
    roomy = choose(model, now + 5000, now, 2.0, 1.0, 16.0, 0.05, False, 0.0, 1.0)
    assert roomy is not None and roomy.cpus == 1.0  # slack: fewer CPUs would do
    tight = choose(model, now + 1200, now, 2.0, 1.0, 16.0, 0.05, False, 0.0, 1.0)
    assert tight is not None and tight.cpus == 3.0 and tight.finish <= now + 1200
    hopeless = choose(model, now + 100, now, 2.0, 1.0, 16.0, 0.05, False, 0.0, 1.0)
    assert hopeless is not None and hopeless.cpus is None
    # A restarting container pays the whole run again when it moves: more CPUs needed.
    restart = choose(model, now + 1200, now, 2.0, 1.0, 16.0, 0.05, True, 30.0, 1.0)
    assert restart is not None and restart.cpus is not None and restart.cpus > 3.0
    assert choose(JobModel(100), now + 10, now, 2.0, 1.0, 4.0, 0.0, False, 0.0) is None  # nothing known


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

    def __init__(self, node_cpu: str = "16", limits: dict[str, str] | None = None) -> None:
        self.limits = limits  # the container's limits (none by default)
        self.clock = VirtualClock(T0)
        self.cluster = SimulatedCluster(self.clock)
        registry = default_registry()
        self.scheduler = Scheduler(builtin_config(registry).only("pysched"), self.cluster, self.clock, registry)
        self.cluster.add_node(node_dict("n", cpu=node_cpu, memory="64Gi"))
        plugin = self.scheduler.frameworks["pysched"].reconcile[0]
        assert isinstance(plugin, Autoscale)
        self.plugin = plugin

    async def submit(self, deadline: str, **notes: str) -> None:
        await self.scheduler.start()
        annotations = {"pysched.io/deadline": deadline, "pysched.io/total-steps": "10000", **notes}
        raw: dict[str, Any] = pod_dict("job", cpu="2", created=T0, annotations=annotations, scheduler_name="pysched")
        if self.limits is not None:
            raw["spec"]["containers"][0]["resources"]["limits"] = self.limits
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
    assert condition.reason == "Rescaled" and "cpu 2 -> 4" in condition.message and "lastRescale=" in condition.message

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
        return world

    assert asyncio.run(run()).cpu() == 1000  # the profile's 1-CPU floor
    assert asyncio.run(run(**{"pysched.io/cpu-min": "1500m"})).cpu() == 1500
    assert asyncio.run(run(**{"pysched.io/autoscale": "false"})).cpu() == 2000


def test_a_namespace_that_may_not_use_deadlines_is_not_scaled() -> None:
    async def run(labels: dict[str, str]) -> int:
        world = World()
        world.plugin.args = dataclasses.replace(
            world.plugin.args, deadline_namespaces={"matchLabels": {"pysched.io/deadlines": "allowed"}}
        )
        world.cluster.set_namespace("default", labels)
        await world.submit("20m")
        await world.progress(300, 60)
        return world.cpu()

    assert asyncio.run(run({})) == 2000
    assert asyncio.run(run({"pysched.io/deadlines": "allowed"})) == 4000


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


def test_a_new_leader_keeps_the_cooldown_from_the_condition() -> None:
    async def run(message: str) -> int:
        world = World()
        await world.scheduler.start()
        notes = {"pysched.io/deadline": "20m", "pysched.io/total-steps": "10000"}
        raw: dict[str, Any] = pod_dict("job", cpu="2", created=T0, annotations=notes, scheduler_name="pysched")
        raw["spec"]["nodeName"] = "n"
        raw.setdefault("status", {})["conditions"] = [
            {"type": "pysched.io/Deadline", "status": "True", "reason": "Rescaled", "message": message}
        ]
        world.cluster.create_pod(raw)
        await world.progress(0, 60)
        await world.progress(300, 60)
        return world.cpu()

    assert asyncio.run(run(f"cpu 1 -> 2: ...; lastRescale={T0 + 100:.0f}")) == 2000  # rescaled 20 s ago
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


def test_limits_scale_with_requests_so_the_qos_class_stays() -> None:
    async def run(limits: dict[str, str], deadline: str) -> dict[str, Any]:
        world = World(limits=limits)
        await world.submit(deadline)
        await world.progress(300, 60)
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


def test_metrics_count_rescales_slack_and_deadlines_met_and_missed() -> None:
    def scrape(world: World) -> dict[str, float]:
        metrics = SchedulerMetrics()
        metrics.add_source(lambda: plugin_metrics(world.scheduler))
        return parse_metrics(metrics.render().decode())

    async def run(deadline: str, phase: str, late: float = 0.0) -> World:
        world = World()
        await world.submit(deadline)
        await world.progress(300, 60)
        world.clock.advance(late)
        world.cluster.finish_pod(KEY, phase)
        await world.scheduler.run_until_idle()
        return world

    at_risk = World()

    async def slack() -> None:
        await at_risk.submit("20m")
        await at_risk.progress(300, 60)

    asyncio.run(slack())
    seen = scrape(at_risk)
    labels = 'namespace="default",pod="job",profile="pysched"'  # sorted, as exposed
    # 300 steps a minute on 2 CPUs: ~1,940 s left, 1,140 s to the deadline.
    assert -900 < seen[f"pysched_autoscale_predicted_slack_seconds{{{labels}}}"] < -700
    assert seen['pysched_autoscale_rescales_total{direction="up",profile="pysched",result="ok"}'] == 1
    assert seen['pysched_autoscale_rescales_total{direction="down",profile="pysched",result="ok"}'] == 0
    assert seen['pysched_deadlines_total{profile="pysched",result="met"}'] == 0

    roomy = scrape(asyncio.run(run("10h", "Succeeded")))
    assert roomy['pysched_autoscale_rescales_total{direction="down",profile="pysched",result="ok"}'] == 1
    assert roomy['pysched_deadlines_total{profile="pysched",result="met"}'] == 1
    assert roomy['pysched_deadlines_total{profile="pysched",result="missed"}'] == 0
    assert not any(k.startswith("pysched_autoscale_predicted_slack_seconds{") for k in roomy)  # ended: gone
    late = scrape(asyncio.run(run("20m", "Succeeded", late=3600)))
    assert late['pysched_deadlines_total{profile="pysched",result="missed"}'] == 1
    failed = scrape(asyncio.run(run("10h", "Failed")))
    assert failed['pysched_deadlines_total{profile="pysched",result="missed"}'] == 1
    assert failed['pysched_deadlines_total{profile="pysched",result="met"}'] == 0
