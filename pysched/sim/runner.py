"""Replays a scenario on the simulated cluster with the real scheduler, one policy at a time."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass

from pysched.backend.simulated import SimulatedCluster
from pysched.clock import VirtualClock
from pysched.framework.config import SchedulerConfig
from pysched.framework.registry import Registry
from pysched.ids import NodeName, PodKey, pod_key
from pysched.objects import PodInfo, node_from_dict, pod_from_dict
from pysched.scheduler import Scheduler
from pysched.sim.scenario import Job, Scenario

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: virtual time starts here
HORIZON = 30 * 86400.0  # a run that is still going after 30 virtual days is cut off


@dataclass(frozen=True, slots=True)
class PolicyResult:
    jobs: int
    deadline_jobs: int
    deadline_met: int
    deadline_met_ratio: float
    cpu_utilization: float
    mean_jct_s: float
    mean_queue_s: float
    makespan_s: float
    rescales: int
    skipped: int
    unfinished: int

    def as_json(self) -> dict[str, float | int]:
        """The simulate JSON fields of DESIGN §5 (cpu_utilization needs the training model: 0 until then)."""
        return {
            "jobs": self.jobs,
            "deadline_jobs": self.deadline_jobs,
            "deadline_met": self.deadline_met,
            "deadline_met_ratio": self.deadline_met_ratio,
            "cpu_utilization": self.cpu_utilization,
            "mean_jct_s": self.mean_jct_s,
            "mean_queue_s": self.mean_queue_s,
            "makespan_s": self.makespan_s,
            "rescales": self.rescales,
            "skipped": self.skipped,
        }


def _fits_somewhere(job: Job, scenario: Scenario) -> bool:
    pod = pod_from_dict(job.manifest("probe", EPOCH))
    for raw in scenario.nodes:
        node = node_from_dict(raw)
        if all(node.allocatable.get(name, 0) >= value for name, value in pod.requests.items()):
            return True
    return False


async def run_policy(scenario: Scenario, config: SchedulerConfig, policy: str, registry: Registry) -> PolicyResult:
    profile = config.profile(policy)
    if profile is None:
        raise KeyError(policy)
    clock = VirtualClock(EPOCH)
    cluster = SimulatedCluster(clock, record_events=False)
    for node in scenario.nodes:
        cluster.add_node(node)
    scheduler = Scheduler(SchedulerConfig((profile,), config.source), cluster, clock, registry)
    await scheduler.start()

    jobs: dict[PodKey, Job] = {}
    started: dict[PodKey, float] = {}
    finished: dict[PodKey, float] = {}
    events: list[tuple[float, int, str, PodKey]] = []
    seq = itertools.count()
    skipped = 0
    for job in scenario.jobs:
        if not _fits_somewhere(job, scenario):
            skipped += 1
            continue
        key = pod_key("sim", job.name)
        jobs[key] = job
        heapq.heappush(events, (EPOCH + job.submit, next(seq), "arrive", key))

    def on_bind(pod: PodInfo, node: NodeName) -> None:
        started[pod.key] = clock.now()
        heapq.heappush(events, (clock.now() + jobs[pod.key].run_seconds, next(seq), "finish", pod.key))

    cluster.bind_hooks.append(on_bind)
    while True:
        await scheduler.run_until_idle()
        if not events:
            break  # nothing runs and nothing arrives: pods still pending can never fit
        wake = scheduler.queue.next_wakeup()
        when = events[0][0] if wake is None else min(events[0][0], wake)
        if when - EPOCH > HORIZON:
            break
        clock.advance_to(max(when, clock.now()))
        while events and events[0][0] <= clock.now():
            _, _, kind, key = heapq.heappop(events)
            if kind == "arrive":
                cluster.create_pod(jobs[key].manifest(policy, EPOCH))
            else:
                finished[key] = clock.now()
                cluster.finish_pod(key)
    await scheduler.stop()

    with_deadline = [k for k, j in jobs.items() if j.deadline is not None]
    met = sum(1 for k in with_deadline if k in finished and finished[k] - EPOCH <= (jobs[k].deadline or 0.0))
    jct = [finished[k] - EPOCH - jobs[k].submit for k in finished]
    queue = [started[k] - EPOCH - jobs[k].submit for k in started]
    first_submit = min((j.submit for j in jobs.values()), default=0.0)
    return PolicyResult(
        jobs=len(jobs),
        deadline_jobs=len(with_deadline),
        deadline_met=met,
        deadline_met_ratio=round(met / len(with_deadline), 4) if with_deadline else 0.0,
        cpu_utilization=0.0,
        mean_jct_s=round(sum(jct) / len(jct), 1) if jct else 0.0,
        mean_queue_s=round(sum(queue) / len(queue), 1) if queue else 0.0,
        makespan_s=round(max(finished.values()) - EPOCH - first_submit, 1) if finished else 0.0,
        rescales=0,
        skipped=skipped,
        unfinished=len(jobs) - len(finished),
    )


def simulate(
    scenario: Scenario, config: SchedulerConfig, policies: list[str], registry: Registry
) -> dict[str, PolicyResult]:
    return {policy: asyncio.run(run_policy(scenario, config, policy, registry)) for policy in policies}
