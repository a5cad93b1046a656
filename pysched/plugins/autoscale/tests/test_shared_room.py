"""Running jobs on one node share its room in deadline order, and give back what they can spare."""

import asyncio
from typing import Any

from pysched.api.annotations import format_progress
from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import PodKey
from pysched.backend.simulated import SimulatedCluster
from pysched.framework.clock import VirtualClock
from pysched.plugins.autoscale import Autoscale
from pysched.plugins.autoscale.tests.profile import pysched_scheduler

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
RESTARTS = [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]


class Node:
    """One node of the `pysched` profile on a simulated cluster; jobs' progress written by hand."""

    def __init__(self, cpu: str, **args: Any) -> None:
        self.clock = VirtualClock(T0)
        self.cluster = SimulatedCluster(self.clock)
        self.scheduler = pysched_scheduler(self.cluster, self.clock, **args)
        self.cluster.add_node(node_dict("n", cpu=cpu, memory="64Gi"))

    async def submit(self, name: str, cpu: str, deadline: str, restarts: bool = False, **notes: str) -> None:
        await self.scheduler.start()
        annotations = {"pysched.io/deadline": deadline, "pysched.io/total-steps": "10000", **notes}
        raw = pod_dict(name, cpu=cpu, created=self.clock.now(), annotations=annotations)
        if restarts:
            raw["spec"]["containers"][0]["resizePolicy"] = RESTARTS
        self.cluster.create_pod(raw)
        await self.scheduler.run_until_idle()
        assert self.cluster.pods[PodKey(f"default/{name}")].node_name == "n"

    async def progress(self, seconds: float, **steps: int) -> None:
        """Every named job reports its steps after `seconds`, then one reconcile decides for all."""
        self.clock.advance(seconds)
        for name, done in steps.items():
            progress = {"pysched.io/progress": format_progress(done, self.clock.now())}
            self.cluster.set_annotations(PodKey(f"default/{name}"), progress)
        await self.scheduler.run_until_idle()

    def cpus(self, name: str) -> float:
        return self.cluster.pods[PodKey(f"default/{name}")].requests["cpu"] / 1000

    def notes(self, name: str, reason: str) -> list[str]:
        return [e.note for e in self.cluster.events if e.pod == f"default/{name}" and e.reason == reason]

    def condition(self, name: str) -> tuple[str, str]:
        condition = self.cluster.conditions[PodKey(f"default/{name}")]["pysched.io/Deadline"]
        return condition.status, condition.reason


def grown_first(urgent: str, relaxed: str) -> tuple[float, float]:
    """Two jobs at 2 CPUs, both needing more, on a node with 2 CPUs free: the CPUs each holds after
    one reconcile. 10,000 steps at 0.2 s on 2 CPUs take 2,000 s."""

    async def run() -> Node:
        node = Node(cpu="6")
        await node.submit(relaxed, "2", "35m")
        await node.submit(urgent, "2", "25m")
        await node.progress(60, **{urgent: 300, relaxed: 300})
        return node

    node = asyncio.run(run())
    return node.cpus(urgent), node.cpus(relaxed)


def test_the_earlier_deadline_grows_first_whatever_the_pods_order() -> None:
    assert grown_first(urgent="a", relaxed="b") == (4, 2)
    assert grown_first(urgent="b", relaxed="a") == (4, 2)


def test_a_job_that_needs_cpus_its_node_does_not_have_says_it_is_at_risk_once() -> None:
    async def run() -> Node:
        node = Node(cpu="6")
        await node.submit("relaxed", "2", "35m")
        await node.submit("urgent", "2", "25m")
        await node.progress(60, urgent=300, relaxed=300)  # the urgent job takes the 2 free CPUs
        await node.progress(60, urgent=700, relaxed=600)
        return node

    node = asyncio.run(run())
    assert node.cpus("relaxed") == 2 and node.cpus("urgent") == 4
    assert node.condition("relaxed")[1] == "DeadlineAtRisk"  # it was "OnTrack" while it wanted CPUs
    (note,) = node.notes("relaxed", "DeadlineAtRisk")  # two reconciles, one warning
    assert note.endswith("CPUs needed, none to spare on its node now"), note
    message = node.cluster.conditions[PodKey("default/relaxed")]["pysched.io/Deadline"].message
    assert message.startswith("needs ") and "none to spare on its node" in message, message


def test_a_job_whose_share_is_its_own_fractional_cpu_max_gets_it() -> None:
    """Steps are whole CPUs, but not past the share: floored, the 2.5 CPUs it needs were 2, the
    count it had, and it stayed there, said on track while predicted late."""

    async def run() -> Node:
        node = Node(cpu="16")
        capped = {"pysched.io/cpu-max": "2500m"}  # it needs 2.5 CPUs: no whole CPU more
        await node.submit("capped", "2", "33m", False, **capped)
        await node.progress(60, capped=300)
        await node.progress(60, capped=600)
        return node

    node = asyncio.run(run())
    assert node.cpus("capped") == 2.5 and node.condition("capped") == ("True", "Rescaled")
    (note,) = node.notes("capped", "Rescaled")
    assert note.startswith("cpu 2 -> 2.5: ")


def test_a_job_above_its_share_gives_the_surplus_to_an_earlier_deadline_and_still_meets_its_own() -> None:
    async def run() -> Node:
        node = Node(cpu="8", down_slack=0.95)  # alone, the relaxed job would never go down
        await node.submit("relaxed", "6", "8h")
        await node.progress(60, relaxed=900)
        await node.submit("urgent", "2", "25m")
        await node.progress(60, relaxed=1800, urgent=300)
        return node

    node = asyncio.run(run())
    assert node.cpus("urgent") == 4  # one in-place step (2x); the whole share fits with the surplus
    assert node.cpus("relaxed") == 4
    (note,) = node.notes("relaxed", "Rescaled")
    assert "cpu 6 -> 4 for a job with an earlier deadline" in note
    assert node.condition("relaxed") == ("True", "Rescaled")  # it still meets its deadline


def measured(node: Node, name: str) -> int:
    """Intervals of progress the job's model has read."""
    plugin = node.scheduler.frameworks["pysched"].reconcile[0]
    assert isinstance(plugin, Autoscale)
    model = plugin.predictor.get(PodKey(f"default/{name}"))
    return 0 if model is None else len(model.intervals)


def test_a_job_not_due_for_review_still_gives_when_a_neighbour_wants_cpus() -> None:
    async def run() -> Node:
        node = Node(cpu="8", down_slack=0.95)
        await node.submit("relaxed", "6", "8h")
        await node.progress(60, relaxed=900)
        await node.progress(60, relaxed=1800)  # on track with hours to spare: next looked at in 10 minutes
        await node.progress(60, relaxed=2700)
        assert measured(node, "relaxed") == 2  # not looked at a minute later
        await node.submit("urgent", "2", "25m")
        await node.progress(60, relaxed=3600, urgent=300)
        assert measured(node, "relaxed") == 3  # looked at with the urgent job
        return node

    node = asyncio.run(run())
    assert node.cpus("urgent") == 4 and node.cpus("relaxed") == 4  # in the reconcile the urgent job asked
    assert any("for a job with an earlier deadline" in n for n in node.notes("relaxed", "Rescaled"))


def test_a_job_no_count_saves_gives_its_cpus_to_one_that_can_still_be_saved() -> None:
    async def run(lost_restarts: bool) -> Node:
        node = Node(cpu="8")
        await node.submit("lost", "6", "5m", restarts=lost_restarts, **{"pysched.io/cpu-max": "6"})
        await node.progress(60, lost=300)  # measured at its next report: it gives only then
        await node.submit("urgent", "2", "25m")
        await node.progress(60, lost=600, urgent=300)
        return node

    node = asyncio.run(run(lost_restarts=False))
    assert node.cpus("urgent") == 4 and node.cpus("lost") == 4
    assert node.condition("lost") == ("False", "DeadlineInfeasible")  # still demoted, now with fewer CPUs
    assert any("for jobs its CPUs can still save" in n for n in node.notes("lost", "Rescaled"))
    # A container that restarts on a resize would lose its progress: it is not taken from.
    node = asyncio.run(run(lost_restarts=True))
    assert node.cpus("lost") == 6 and node.cpus("urgent") == 2


def test_spares_go_only_to_a_job_whose_whole_share_then_fits() -> None:
    async def run() -> Node:
        node = Node(cpu="8", down_slack=0.95)
        await node.submit("relaxed", "4", "60m")  # needs 2 or more itself
        await node.submit("urgent", "2", "18m")  # needs 7: more than the 2 free and what relaxed spares
        await node.progress(60, relaxed=600, urgent=300)
        return node

    node = asyncio.run(run())
    assert node.cpus("relaxed") == 4  # nothing taken for a job it cannot save
    assert node.cpus("urgent") == 4  # what was free
    assert "7 CPUs needed" in node.notes("urgent", "DeadlineAtRisk")[0]


def test_a_job_whose_speed_is_only_estimated_from_its_bind_gives_nothing() -> None:
    """The neighbour resumed from a checkpoint at 9,000 steps: against its bind it looks 150 times
    faster than it is (it needs all its CPUs), so the urgent job gets none of them yet."""

    async def run() -> Node:
        node = Node(cpu="8", down_slack=0.95)
        await node.submit("resumed", "6", "8h")
        await node.submit("urgent", "2", "25m")
        await node.progress(60, resumed=9_060, urgent=300)
        return node

    node = asyncio.run(run())
    assert node.cpus("resumed") == 6 and node.cpus("urgent") == 2
    assert node.notes("resumed", "Rescaled") == []


def test_a_job_going_down_on_its_own_frees_its_cpus_before_a_neighbour_grows() -> None:
    """On a 4-CPU node, a relaxed job goes 2 -> 1 in the reconcile where an urgent one, first in
    arrival order, wants more: the urgent one grew a reconcile later."""

    async def run() -> Node:
        node = Node(cpu="4")
        await node.submit("urgent", "2", "25m")
        await node.submit("relaxed", "2", "10h")
        await node.progress(60, urgent=300, relaxed=300)
        await node.progress(60, urgent=600, relaxed=600)  # both measured: one reconcile decides both
        return node

    node = asyncio.run(run())
    assert (node.cpus("urgent"), node.cpus("relaxed")) == (3, 1)  # in the same reconcile
