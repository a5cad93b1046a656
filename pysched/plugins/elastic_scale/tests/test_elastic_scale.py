"""ElasticScale on the simulated cluster: elastic GPU jobs scaled through their Indexed Job to meet
deadlines, admission, bad ranges, and the topology score."""

import asyncio
import dataclasses
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from pysched.api.annotations import DEADLINE, EXPECTED_DURATION, PROGRESS, TOTAL_STEPS, ProgressReport
from pysched.api.builders import pod_dict
from pysched.api.ids import JobKey, PodKey
from pysched.api.jobs import JOB_LABEL, JobRef, JobSource, job_key
from pysched.api.objects import PodInfo
from pysched.api.resources import GPU
from pysched.api.times import format_rfc3339, parse_time
from pysched.backend.simulated import SimulatedCluster
from pysched.deadline.condition import earliest_finish_of
from pysched.deadline.predictor import JobModel
from pysched.framework.clock import VirtualClock
from pysched.framework.cluster import PodCondition
from pysched.framework.config import SchedulerConfig
from pysched.framework.registry import ArgsError, parse_args
from pysched.framework.status import Status, error, unschedulable
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.elastic_scale import IGNORED_REASON, NAME, ElasticScale, ElasticScaleArgs
from pysched.plugins.elastic_scale.jobs import GpuJob
from pysched.scheduler.scheduler import Scheduler
from pysched.sim.runner import EPOCH, PolicyResult, Replay, metrics
from pysched.sim.scenario import cpu_nodes
from pysched.workload.gang_jobs import elastic_gpu_job
from pysched.workload.job import Job
from pysched.workload.speed import Throughput

REGISTRY = default_registry()
CONFIG = builtin_config(REGISTRY)
TABLE = Throughput((1, 2, 4, 8), (1.0, 1.9, 3.6, 6.8))  # steps/s by GPU count
REJECTED = "DeadlineRejected"


def elastic(name: str, steps: int, deadline: float, gpus: int = 2, submit: float = 0.0, top: int = 8) -> Job:
    expected = steps / (TABLE.rate(gpus) or 1.0)
    job = Job(name, submit, steps, 1000 * gpus, f"{gpus}Gi", TABLE, gpu=gpus, deadline=deadline, expected_s=expected)
    return elastic_gpu_job(job, 8, top, random.Random(1))


class CountingCluster(SimulatedCluster):
    """Counts the condition writes per pod and reason (`conditions` keeps the last only); the
    first `failing` scales fail as an API error would, each with `failure`."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock)
        self.condition_writes: Counter[tuple[str, str]] = Counter()
        self.failing = 0
        self.failure = error("the apiserver answered 503: etcd leader changed")

    async def scale_job(self, job: JobRef, workers: int) -> Status:
        if self.failing > 0:
            self.failing -= 1
            return self.failure
        return await super().scale_job(job, workers)

    async def patch_pod_conditions(self, pod: PodInfo, *conditions: PodCondition) -> Status:
        for condition in conditions:
            self.condition_writes[(pod.key, condition.reason)] += 1
        return await super().patch_pod_conditions(pod, *conditions)


PLUGINS: list[ElasticScale] = []  # the plugin of each replay, last one last


def replay(
    jobs: Sequence[Job],
    policy: str = "pysched",
    nodes: int = 1,
    args: Mapping[str, Any] | None = None,
    failing: int = 0,
    failure: Status | None = None,
) -> tuple[CountingCluster, PolicyResult]:
    async def run() -> tuple[CountingCluster, PolicyResult]:
        clock = VirtualClock(EPOCH)
        cluster = CountingCluster(clock)
        cluster.failing = failing
        cluster.failure = failure or cluster.failure
        for node in cpu_nodes(nodes, "64", "256Gi", gpu=8):
            cluster.add_node(node)
        profile = CONFIG.profile(policy)
        assert profile is not None
        if args is not None:
            profile = dataclasses.replace(profile, plugin_args={**profile.plugin_args, "ElasticScale": args})
        scheduler = Scheduler(SchedulerConfig((profile,), CONFIG.source), cluster, clock, REGISTRY)
        plugin = scheduler.frameworks[policy].plugins.get("ElasticScale")
        if isinstance(plugin, ElasticScale):
            PLUGINS.append(plugin)
        await scheduler.start()
        run = Replay(policy, scheduler, cluster, clock, list(jobs), 7, 60.0, 0.0)
        await run.run(None)
        await scheduler.stop()
        return cluster, metrics(run, 0)

    return asyncio.run(run())


def test_an_elastic_job_is_scaled_up_through_its_owner_to_meet_a_deadline_it_would_miss() -> None:
    job = elastic("grow", 3600, deadline=1200.0)  # 2 workers: ~1900 s; 8 workers: ~530 s
    _, rigid = replay([job], "edf")
    cluster, result = replay([job])
    assert (rigid.deadline_met, result.deadline_met) == (0, 1)
    assert result.rescales >= 1
    key = JobKey("sim/Job/grow")
    assert cluster.scales and all(k == key for k, _ in cluster.scales)
    assert max(n for _, n in cluster.scales) > 2
    assert cluster.job_minimums[key] == cluster.scales[-1][1]  # the owner's parallelism is the count


def test_a_job_that_would_make_an_admitted_one_miss_is_rejected_and_runs_best_effort() -> None:
    first = elastic("first", 4000, deadline=800.0, gpus=8)  # needs every GPU for ~590 s
    second = elastic("second", 4000, deadline=810.0, gpus=8, submit=10.0)
    cluster, result = replay([first, second])
    rejected = [e for e in cluster.events if e.reason == REJECTED]
    assert [e.pod.split("/")[1].rsplit("-", 1)[0] for e in rejected] == ["second"]
    assert "earliest deadline it would be admitted with" in rejected[0].note
    assert rejected[0].note.endswith("runs as best-effort")
    assert result.deadline_met == 1 and result.unfinished == 0  # the second still ran, after the first
    condition = cluster.conditions[rejected[0].pod]["pysched.io/Deadline"]
    assert (condition.status, condition.reason) == ("False", "DeadlineMissed")  # the verdict, once it ended
    # Written once, though the first member (never removed by a scale) came back through
    # preEnqueue after each of its failed attempts.
    assert cluster.condition_writes[(rejected[0].pod, "Unschedulable")] >= 2
    assert cluster.condition_writes[(rejected[0].pod, REJECTED)] == 1
    counted = {f.name: f.values[()] for f in PLUGINS[-1].metric_families()}
    assert counted == {"pysched_elastic_scales": float(len(cluster.scales)), "pysched_deadline_rejected": 1.0}


def test_a_range_that_contradicts_itself_is_refused_with_one_event_and_the_job_stays_rigid() -> None:
    job = dataclasses.replace(elastic("bad", 3600, deadline=1200.0), elastic=(4, 2))
    cluster, result = replay([job])
    ignored = [e for e in cluster.events if e.reason == IGNORED_REASON]
    assert len(ignored) == 1 and "workers-min 4 is above pysched.io/workers-max 2" in ignored[0].note
    assert cluster.scales == [] and result.deadline_met == 0


def test_a_range_whose_minimum_the_cluster_cannot_hold_is_refused_and_the_job_runs_as_submitted() -> None:
    job = dataclasses.replace(elastic("big", 3600, deadline=1200.0), elastic=(16, 32))  # one-GPU workers, 8 GPUs
    cluster, result = replay([job])
    ignored = [e.note for e in cluster.events if e.reason == IGNORED_REASON]
    assert ignored == [
        "elastic range ignored: workers-min 16 x 1 GPUs per worker is more than the cluster's 8 GPUs; "
        "the job runs at its submitted size"
    ]
    assert cluster.scales == [] and result.unfinished == 0


def test_a_jobs_workers_land_on_as_few_nodes_as_hold_them() -> None:
    # A rigid 3-GPU job fills part of one node; the 6 one-GPU workers that follow would fit in
    # neither hole alone if packed into the fuller node first: they all go to the empty one.
    other = Job("other", 0.0, 100_000, 3000, "3Gi", TABLE, gpu=3)
    job = elastic("pack", 100, deadline=10_000.0, gpus=6, submit=1.0, top=6)
    cluster, result = replay([other, job], nodes=2)
    nodes = {cluster.pods[k].node_name for k in cluster.pods if k.startswith("sim/pack-")}
    assert len(nodes) == 1 and cluster.pods["sim/other"].node_name not in nodes  # type: ignore[index]
    assert result.deadline_met == 1


def test_a_new_elastic_job_starts_where_it_can_grow_in_place() -> None:
    # A rigid 5-GPU job leaves a hole of 3 GPUs on one node; the other node is empty. Two workers
    # of a job that may grow to 8 go to the empty node, where a scale-up stays on their node; two
    # of a job that may not grow take the hole, the tightest fit.
    for top, into_the_hole in ((8, False), (2, True)):
        other = Job("other", 0.0, 100_000, 5000, "5Gi", TABLE, gpu=5)
        job = elastic("new", 100, deadline=100_000.0, gpus=2, submit=1.0, top=top)
        cluster, _ = replay([other, job], nodes=2)
        first = {cluster.pods[PodKey(f"sim/new-{i}")].node_name for i in range(2)}
        assert len(first) == 1
        assert (first == {cluster.pods[PodKey("sim/other")].node_name}) is into_the_hole


def test_a_job_with_slack_gives_back_only_the_gpus_another_job_needs() -> None:
    # Alone, the elastic job takes the GPUs that pay; a short job needing 6 of the 8 then arrives,
    # and the elastic one, with slack to spare, shrinks to make room.
    grow = elastic("grow", 20_000, deadline=20_000.0)
    short = Job("short", 600.0, 600, 6000, "6Gi", TABLE, gpu=6, expected_s=600 / (TABLE.rate(6) or 1.0))
    cluster, result = replay([grow, short])
    counts = [n for _, n in cluster.scales]
    # up first; down to exactly the 2 GPUs the short job leaves; up again once it is done
    assert counts[0] > 2 and counts[1] == 2 and counts[2] > 2, counts
    assert result.deadline_met == 1 and result.unfinished == 0
    assert cluster.pods["sim/short"].phase == "Succeeded"  # type: ignore[index]


def rigid(name: str, deadline: float, expected_s: float, submit: float = 0.0) -> Job:
    """4000 steps on all 8 GPUs of the node: about 590 s."""
    return Job(name, submit, 4000, 8000, "8Gi", TABLE, gpu=8, deadline=deadline, expected_s=expected_s)


WAIT = {"notAdmitted": "Wait"}
ALONE_S = 4000 / 6.8


def test_with_wait_a_job_not_admitted_is_held_back_and_admitted_once_the_plan_has_room() -> None:
    # The first job was expected to take 1200 s and takes about 590: the second, which the plan
    # could not fit behind 1200 s, waits, and is admitted once the first is done.
    first = rigid("first", deadline=1500.0, expected_s=1200.0)
    second = rigid("second", deadline=1310.0, expected_s=ALONE_S, submit=10.0)
    cluster, result = replay([first, second], args=WAIT)
    rejected = [e for e in cluster.events if e.reason == REJECTED]
    assert [e.pod for e in rejected] == ["sim/second"]
    assert rejected[0].note.endswith("waits until it can be admitted")
    admitted = [e for e in cluster.events if e.reason == "DeadlineAdmitted"]
    assert [e.pod for e in admitted] == ["sim/second"]
    assert cluster.condition_writes[("sim/second", "DeadlineAdmitted")] == 1
    condition = cluster.conditions["sim/second"]["pysched.io/Deadline"]  # type: ignore[index]
    assert (condition.status, condition.reason) == ("True", "DeadlineMet")  # the verdict, once it ended
    assert result.deadline_met == 2 and result.unfinished == 0


def test_with_wait_a_job_that_can_no_longer_meet_its_deadline_even_alone_runs_best_effort() -> None:
    first = rigid("first", deadline=1500.0, expected_s=ALONE_S)
    second = rigid("second", deadline=1000.0, expected_s=ALONE_S, submit=10.0)  # alone it could, behind not
    cluster, result = replay([first, second], args=WAIT)
    assert [e.note.endswith("waits until it can be admitted") for e in cluster.events if e.reason == REJECTED] == [
        True,
        False,
    ]
    released = [e for e in cluster.events if e.reason == REJECTED][1]
    assert "no longer be met even on an empty cluster: runs as best-effort" in released.note
    assert not [e for e in cluster.events if e.reason == "DeadlineAdmitted"]
    assert result.deadline_met == 1 and result.unfinished == 0  # nothing is held back for good


def test_a_job_that_could_not_meet_its_deadline_even_alone_never_waits() -> None:
    first = rigid("first", deadline=1500.0, expected_s=ALONE_S)
    hopeless = rigid("hopeless", deadline=300.0, expected_s=ALONE_S, submit=10.0)
    cluster, result = replay([first, hopeless], args=WAIT)
    notes = [e.note for e in cluster.events if e.reason == REJECTED]
    assert len(notes) == 1 and notes[0].endswith("runs as best-effort")
    assert "cannot be planned even with every GPU;" in notes[0]  # no admitted job is to blame
    assert result.unfinished == 0


def test_not_admitted_takes_best_effort_or_wait_only() -> None:
    with pytest.raises(ArgsError, match="notAdmitted: expected BestEffort or Wait, got 'Later'"):
        parse_args(ElasticScaleArgs, {"notAdmitted": "Later"})


def test_a_scale_the_api_failed_is_retried_with_a_backoff_and_the_job_still_meets_its_deadline() -> None:
    job = elastic("grow", 3600, deadline=1500.0)  # 2 workers: ~1900 s; 8 workers: ~530 s
    cluster, result = replay([job], failing=2)
    failed = [e.note for e in cluster.events if e.reason == "ScaleFailed"]
    assert len(failed) == 2 and "503: etcd leader changed" in failed[0]
    assert failed[0].endswith("retried in 60s") and failed[1].endswith("retried in 120s")
    assert not [e for e in cluster.events if e.reason == IGNORED_REASON]  # still elastic
    assert cluster.scales and max(n for _, n in cluster.scales) > 2
    assert result.deadline_met == 1


def test_a_scale_the_api_refuses_makes_the_job_rigid_with_the_apis_reason() -> None:
    job = elastic("grow", 3600, deadline=1200.0)
    refusal = unschedulable("scaling Job sim/grow is forbidden: admission webhook denied the request")
    cluster, result = replay([job], failing=1, failure=refusal)
    ignored = [e.note for e in cluster.events if e.reason == IGNORED_REASON]
    assert ignored == [
        "elastic scaling stopped: scaling Job sim/grow is forbidden: admission webhook denied the request; "
        "the job keeps 2 workers"
    ]
    assert cluster.scales == [] and result.deadline_met == 0


def test_judging_an_arrival_feeds_the_jobs_it_does_not_price_as_a_plan_would() -> None:
    """Admission prices only the admitted jobs; the refused one is still fed its progress, so the
    plan after it sees the model a plan at every step would have built."""

    def plugin() -> ElasticScale:
        made = ElasticScale(ElasticScaleArgs(), handle=None)  # type: ignore[arg-type]
        made._capacity = 16
        for name, admitted in (("kept", True), ("refused", False)):
            job = GpuJob(JobKey(name), None, 10_000, EPOCH + 9000.0, 8, 1, 1, 1, JobModel(10_000), admitted=admitted)
            job.expect(5000.0)
            job.held, job.running_since = 8, EPOCH
            job.model.observe(0, EPOCH, 8.0, EPOCH)
            made.jobs[job.key] = job
        return made

    lazy, eager = plugin(), plugin()
    for minute in range(1, 6):
        now = EPOCH + 60.0 * minute
        for made in (lazy, eager):
            for job in made.jobs.values():
                job.unread = ProgressReport.written(int(now - EPOCH) * (2 if job.admitted else 1), now)
        admitted, others = lazy._demands(now, admitted_only=True)
        assert [d.key for d in admitted] == ["kept"] and others == []
        eager._demands(now)
    now = EPOCH + 400.0
    assert lazy._demands(now) == eager._demands(now)
    refused = lazy.jobs[JobKey("refused")].model
    assert refused.count_stats() == eager.jobs[JobKey("refused")].model.count_stats()
    assert refused.last is not None and refused.last.steps == 300  # the last report was read


def test_a_new_worker_set_keeps_the_steps_its_checkpoint_holds() -> None:
    """A scale restarts the workers from a checkpoint: until the new set reports, the plan counts
    the steps done before it, not the whole job (which made a job just scaled up look hopeless, so
    the next reconcile scaled it back down, again and again)."""
    job = GpuJob(JobKey("grown"), None, 10_000, EPOCH + 9000.0, 1, 1, 8, 2, JobModel(10_000))
    job.held, job.running_since = 2, EPOCH
    job.model.observe(0, EPOCH, 2.0, EPOCH)
    job.unread = ProgressReport.written(6000, EPOCH + 600.0)
    before = job.demand(16, EPOCH + 600.0, 0.0, 60.0, 2)
    job.model.restarted()  # what the reconcile does when the worker set changes
    job.held, job.running_since = 4, EPOCH + 600.0
    after = job.demand(16, EPOCH + 600.0, 0.0, 60.0, 4)
    assert before is not None and after is not None
    assert after.seconds == before.seconds == {2: pytest.approx(400.0, rel=0.01)}  # 4,000 steps left, about 0.1 s each


def test_with_wait_a_job_judged_only_once_it_runs_is_not_held_back() -> None:
    # No expected duration: the second job is judged at its first progress, already running
    # beside the elastic one, and refused (its deadline is too near); it cannot wait any more, so
    # it runs as best-effort.
    first = elastic("first", 4000, deadline=1300.0, gpus=2)
    second = Job("second", 10.0, 2000, 4000, "4Gi", TABLE, gpu=4, deadline=500.0)
    cluster, result = replay([first, second], args=WAIT)
    notes = [e.note for e in cluster.events if e.reason == REJECTED and e.pod == "sim/second"]
    assert len(notes) == 1 and notes[0].endswith("runs as best-effort"), notes
    assert result.unfinished == 0


def test_a_job_whose_pod_its_owner_replaces_keeps_its_admission() -> None:
    # The first job is admitted before the second takes the plan's other slot; its pod then fails
    # and the Job controller makes another: that is the same job, not an arrival to judge again.
    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.job("a", 1, _deadline(1300, 1000), gpus=8)
        await world.scheduler.run_until_idle()
        world.clock.advance(10)
        world.job("b", 1, _deadline(1600, 400), gpus=8)
        await world.scheduler.run_until_idle()
        world.clock.advance(90)
        world.cluster.finish_pod(PodKey("sim/a-0"), "Failed")
        world.pod("a-1", _deadline(1300, 1000), gpus=8, job="a")
        await world.scheduler.run_until_idle()
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    assert [e for e in world.cluster.events if e.reason == REJECTED] == []
    assert world.plugin.rejected == 0
    assert {key: job.admitted for key, job in world.plugin.jobs.items()} == {
        JobKey("sim/Job/a"): True,
        JobKey("sim/Job/b"): True,
    }


def test_the_earliest_deadline_told_is_admitted_when_asked_for_a_little_later() -> None:
    """A job refused is told the earliest deadline it would be admitted with; submitted again
    with that deadline a little later (before the running job's first progress report), it is
    admitted. The running job's run time so far was not credited: it needed its whole expected
    run time again at every plan, and the deadline told moved on with the clock."""

    async def run() -> tuple[_Owned, float]:
        world = _Owned()
        await world.scheduler.start()
        world.job("a", 1, _deadline(5000, 600), gpus=8)
        await world.scheduler.run_until_idle()
        world.clock.advance(100)
        world.job("b", 1, _deadline(700, 600), gpus=8)
        await world.scheduler.run_until_idle()
        told = [e.note for e in world.cluster.events if e.reason == REJECTED and e.pod == "sim/b-0"]
        assert len(told) == 1, told
        match = re.search(r"\((\d{4}-\d\d-\d\dT[\d:]+Z)\)", told[0])
        assert match is not None, told[0]
        earliest = parse_time(match[1])
        world.clock.advance(20)
        world.job("c", 1, _deadline(earliest + 2 - EPOCH, 600), gpus=8)
        await world.scheduler.run_until_idle()
        await world.scheduler.stop()
        return world, earliest

    world, earliest = asyncio.run(run())
    assert earliest < EPOCH + 2000  # after a, b fits: not "never"
    assert [e.pod for e in world.cluster.events if e.reason == REJECTED] == ["sim/b-0"]
    assert world.plugin.jobs[JobKey("sim/Job/c")].admitted is True


class _Owned:
    """One node of `gpus` GPUs under the `pysched` profile, and GPU pods made as a Job controller
    makes them (`job`: its Indexed Job, whose scales create and delete its members)."""

    def __init__(self, gpus: int = 8, nodes: int = 1, args: Mapping[str, Any] | None = None) -> None:
        self.clock = VirtualClock(EPOCH)
        self.cluster = CountingCluster(self.clock)
        for node in cpu_nodes(nodes, "64", "256Gi", gpu=gpus):
            self.cluster.add_node(node)
        config = CONFIG.only("pysched")
        if args:
            profile = config.profiles[0]
            plugin_args = {**profile.plugin_args, NAME: {**profile.plugin_args.get(NAME, {}), **args}}
            config = SchedulerConfig((dataclasses.replace(profile, plugin_args=plugin_args),), config.source)
        self.config = config
        self.lead(config)
        self.templates: dict[str, dict[str, str]] = {}
        self.cluster.scale_hooks.append(self._scaled)

    def lead(self, config: SchedulerConfig) -> None:
        """A scheduler (a new one: a new leader) over the same cluster."""
        self.scheduler = Scheduler(config, self.cluster, self.clock, REGISTRY)
        plugin = self.scheduler.frameworks["pysched"].plugins.get("ElasticScale")
        assert isinstance(plugin, ElasticScale)
        self.plugin = plugin

    def job(self, name: str, workers: int, notes: Mapping[str, str], gpus: int = 1) -> None:
        self.cluster.add_owner(f"uid-{name}", self.clock.now())
        self.cluster.set_job_minimum(job_key("sim", JobSource.BATCH, name), workers)
        self.templates[name] = dict(notes)
        for index in range(workers):
            self.pod(f"{name}-{index}", notes, gpus, job=name, index=index)

    def pod(
        self,
        name: str,
        notes: Mapping[str, str] | None = None,
        gpus: int = 1,
        job: str | None = None,
        index: int = 0,
        labels: Mapping[str, str] | None = None,
        group: str | None = None,
    ) -> None:
        """A pod of `gpus` GPUs (none: a launcher), of the Indexed Job `job` when given, in the
        Workload API PodGroup `group` when given."""
        labels = dict(labels or {}) if job is None else {"batch.kubernetes.io/job-completion-index": str(index)}
        raw = pod_dict(
            name,
            namespace="sim",
            cpu="1",
            memory="1Gi",
            scheduler_name="pysched",
            created=self.clock.now(),
            extended={GPU: str(gpus)} if gpus else None,
            labels=labels,
            annotations=dict(notes or {}),
        )
        if job is not None:
            raw["metadata"]["ownerReferences"] = [
                {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": f"uid-{job}", "controller": True}
            ]
        if group is not None:
            raw["spec"]["schedulingGroup"] = {"podGroupName": group}
        self.cluster.create_pod(raw)

    def _scaled(self, ref: JobRef, workers: int) -> None:
        members = sorted((k for k in self.cluster.pods if k.startswith(f"sim/{ref.name}-")), key=_index)
        for key in members[workers:]:
            self.cluster.delete_pod(key)
        for index in range(len(members), workers):
            self.pod(f"{ref.name}-{index}", self.templates[ref.name], job=ref.name, index=index)

    def bound(self, prefix: str) -> int:
        return sum(1 for k, p in self.cluster.pods.items() if k.startswith(f"sim/{prefix}-") and p.node_name)

    async def until(self, seconds: float) -> None:
        """Reconcile after reconcile up to `seconds` after the start."""
        while self.clock.now() < EPOCH + seconds:
            self.clock.advance(min(30.0, EPOCH + seconds - self.clock.now()))
            await self.scheduler.run_until_idle()


def _index(key: str) -> int:
    return int(key.rsplit("-", 1)[1])


ELASTIC = {
    TOTAL_STEPS: "10000",
    DEADLINE: format_rfc3339(EPOCH + 20000),
    EXPECTED_DURATION: "3000s",
    "pysched.io/workers-min": "1",
    "pysched.io/workers-max": "8",
}


def test_gpus_held_outside_the_plan_are_not_planned_for() -> None:
    # GPU pods outside the plan (no total steps: inference) hold 7 of the 8 GPUs: the pending job
    # of 2 workers is never scaled to a size that cannot start, and grows when 4 come free.
    async def run() -> tuple[_Owned, list[tuple[JobKey, int]]]:
        world = _Owned()
        await world.scheduler.start()
        world.pod("inference", gpus=4)
        world.pod("short", gpus=3)
        await world.scheduler.run_until_idle()
        world.job("el", 2, ELASTIC)
        await world.until(200)
        while_held = list(world.cluster.scales)
        world.cluster.finish_pod(PodKey("sim/short"))
        await world.until(1000)
        await world.scheduler.stop()
        return world, while_held

    world, while_held = asyncio.run(run())
    assert all(n <= 1 for _, n in while_held)  # one GPU was free
    workers = world.plugin.jobs[JobKey("sim/Job/el")].workers
    assert workers > 1 and world.bound("el") == workers  # it grew into the GPUs freed, and runs


def test_a_job_never_scaled_is_not_shrunk_when_a_worker_fails() -> None:
    async def run() -> _Owned:
        world = _Owned(gpus=4)  # all four run: nothing to grow into
        await world.scheduler.start()
        world.job("el", 4, {**ELASTIC, DEADLINE: format_rfc3339(EPOCH + 7200), EXPECTED_DURATION: "1800s"})
        await world.until(90)
        world.cluster.scale_hooks.clear()  # the replacement comes later than the next reconciles
        world.cluster.finish_pod(PodKey("sim/el-1"), "Failed")
        await world.until(400)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    assert world.cluster.scales == []


def test_a_scale_refused_while_the_job_is_pending_is_told_on_one_of_its_pods() -> None:
    async def run() -> _Owned:
        world = _Owned()
        world.cluster.failing, world.cluster.failure = 1, unschedulable("jobs.batch is forbidden: cannot patch")
        await world.scheduler.start()
        world.pod("other", gpus=8)
        world.job("el", 2, ELASTIC)
        await world.scheduler.run_until_idle()
        job = world.plugin.jobs[JobKey("sim/Job/el")]
        await world.plugin._scale(job, 4, [], world.clock.now())  # none of its pods runs
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    told = [(e.pod, e.note) for e in world.cluster.events if e.reason == IGNORED_REASON]
    note = "elastic scaling stopped: jobs.batch is forbidden: cannot patch; the job keeps 2 workers"
    assert told == [("sim/el-0", note)]
    assert world.plugin.jobs[JobKey("sim/Job/el")].ref is None


@pytest.mark.parametrize("launcher_first", [True, False])
def test_a_member_without_gpus_is_no_gpu_worker_of_its_job(launcher_first: bool) -> None:
    # An MPI-style job: a launcher and two 4-GPU workers, alone on an 8-GPU node: it asks 8 GPUs,
    # not 3 x 4, and is admitted whichever of its pods comes first.
    notes = {**ELASTIC, "pysched.io/min-members": "3"}
    del notes["pysched.io/workers-min"], notes["pysched.io/workers-max"]

    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        order = [("mpi-launcher", 0), ("mpi-worker-0", 4), ("mpi-worker-1", 4)]
        for name, gpus in order if launcher_first else order[1:] + order[:1]:
            world.pod(name, notes, gpus, labels={JOB_LABEL: "mpi"})
        await world.scheduler.run_until_idle()
        await world.until(120)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    job = world.plugin.jobs[JobKey("sim/pysched.io/job/mpi")]
    assert (job.workers, job.gpus_per_worker, job.admitted) == (2, 4, True)
    assert [e for e in world.cluster.events if e.reason == REJECTED] == []


def test_an_indexed_job_seen_after_its_pods_is_counted_at_its_parallelism() -> None:
    # The Job watch delivers the Job a moment after its 4 pods: counted 1 worker until then, it
    # must count 4 afterwards, so that it gives GPUs back to a deadline job that needs 6 of 8.
    urgent = {TOTAL_STEPS: "1000", DEADLINE: format_rfc3339(EPOCH + 1500), EXPECTED_DURATION: "600s"}

    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        notes = {**ELASTIC, DEADLINE: format_rfc3339(EPOCH + 50000), EXPECTED_DURATION: "4000s"}
        world.templates["el"] = notes
        for index in range(4):
            world.pod(f"el-{index}", notes, job="el", index=index)
        world.cluster.add_owner("uid-el", world.clock.now())
        world.cluster.set_job_minimum(job_key("sim", JobSource.BATCH, "el"), 4)
        await world.scheduler.run_until_idle()
        world.clock.advance(10)
        world.job("b", 1, urgent, gpus=6)
        await world.until(700)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    assert world.plugin.jobs[JobKey("sim/Job/el")].workers == 2
    assert world.bound("b") == 1 and world.plugin.jobs[JobKey("sim/Job/b")].admitted


def _deadline(seconds: float, expected: float, steps: int = 1000) -> dict[str, str]:
    """A deadline job's notes: `seconds` after the start, `expected` at its submitted size."""
    return {TOTAL_STEPS: str(steps), DEADLINE: format_rfc3339(EPOCH + seconds), EXPECTED_DURATION: f"{expected}s"}


def _reasons(world: _Owned, *reasons: str) -> list[tuple[str, str]]:
    return [(e.pod, e.reason) for e in world.cluster.events if e.reason in reasons]


@pytest.mark.parametrize("how", ["finished", "deleted"])
def test_a_job_that_ended_since_the_last_reconcile_no_longer_blocks_an_arrival(how: str) -> None:
    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.job("a", 1, _deadline(2300, 2000), gpus=8)
        await world.scheduler.run_until_idle()
        world.clock.advance(5)
        if how == "deleted":
            world.cluster.delete_pod(PodKey("sim/a-0"))
        else:
            world.cluster.finish_pod(PodKey("sim/a-0"))
        await world.scheduler.run_until_idle()
        world.clock.advance(5)  # before the next reconcile
        world.job("b", 1, _deadline(800, 600), gpus=8)  # fits the empty node alone
        await world.scheduler.run_until_idle()
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    assert world.plugin.jobs[JobKey("sim/Job/b")].admitted and _reasons(world, REJECTED) == []


def test_a_gpu_jobs_unusable_progress_is_told_once_per_text() -> None:
    """Autoscale tells CPU jobs; a GPU job's progress is read only when a plan needs it, so what
    no model could use is told at the reconcile that sees it."""
    bad = ("lots", "100@2099-01-01T00:00:00Z", "99999@" + format_rfc3339(EPOCH + 60))

    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.job("a", 1, _deadline(7200, 3600, steps=10_000), gpus=2)
        await world.scheduler.run_until_idle()
        for text in bad:
            world.cluster.set_annotations(PodKey("sim/a-0"), {PROGRESS: text})
            for _ in range(3):
                world.clock.advance(60)
                await world.scheduler.run_until_idle()
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    told = [e.note for e in world.cluster.events if e.reason == "InvalidProgress"]
    assert [note.split(" ")[1] for note in told] == [repr(text) for text in bad]
    assert "is not STEPS@RFC3339" in told[0]
    assert "in the future" in told[1] and "exceeds total-steps 10000" in told[2]


@pytest.mark.parametrize("job_first", [True, False])
def test_an_indexed_job_seen_after_its_pods_is_judged_at_its_parallelism(job_first: bool) -> None:
    # 6 of 8 GPUs are held by an admitted job; a 4-worker job expected to take 600 s at 4 cannot
    # start before its deadline, whichever of its Job and its pods is seen first.
    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.job("x", 1, _deadline(2000, 1500), gpus=6)
        await world.scheduler.run_until_idle()
        world.clock.advance(10)
        notes = _deadline(800, 600)
        world.templates["b"] = notes
        if job_first:
            world.cluster.add_owner("uid-b", world.clock.now())
            world.cluster.set_job_minimum(job_key("sim", JobSource.BATCH, "b"), 4)
        for index in range(4):
            world.pod(f"b-{index}", notes, job="b", index=index)
        await world.scheduler.run_until_idle()
        if not job_first:
            world.cluster.add_owner("uid-b", world.clock.now())
            world.cluster.set_job_minimum(job_key("sim", JobSource.BATCH, "b"), 4)
        await world.until(120)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    job = world.plugin.jobs[JobKey("sim/Job/b")]
    assert job.admitted is False and job.workers == 4
    demand = world.plugin._demand(job, world.clock.now(), world.plugin.capacity())
    assert demand is not None and demand.seconds == {4: pytest.approx(660.0)}  # 600 s at 4, the band's edge


def test_free_gpus_split_over_nodes_are_no_room_for_a_worker_that_needs_them_on_one() -> None:
    # One GPU free on each of two nodes: a job of 2-GPU workers is not scaled up into them.
    async def run() -> _Owned:
        world = _Owned()
        for node in cpu_nodes(2, "64", "256Gi", gpu=8)[1:]:
            world.cluster.add_node(node)
        await world.scheduler.start()
        world.pod("inference-a", gpus=7)
        world.pod("inference-b", gpus=3)
        await world.scheduler.run_until_idle()
        notes = {**ELASTIC, DEADLINE: format_rfc3339(EPOCH + 2500), EXPECTED_DURATION: "3000s"}
        world.job("el", 2, notes, gpus=2)
        await world.until(600)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    assert world.bound("el") == 2 and world.cluster.scales == []


@pytest.mark.parametrize(
    ("given", "submitted", "expected"),
    [
        ({"pysched.io/workers-max": "8"}, 2, (2, 8)),  # the minimum was 1: shrunk below what it asked
        ({"pysched.io/workers-min": "1"}, 4, (1, 4)),  # the maximum was 1: outside its own range
        ({"pysched.io/workers-min": "1", "pysched.io/workers-max": "99999"}, 4, (1, 4)),  # past 10000: absent
    ],
)
def test_a_bound_not_given_is_the_submitted_workers(
    given: Mapping[str, str], submitted: int, expected: tuple[int, int]
) -> None:
    notes = {k: v for k, v in ELASTIC.items() if not k.startswith("pysched.io/workers-")} | dict(given)

    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.job("el", submitted, notes)
        await world.until(120)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    job = world.plugin.jobs[JobKey("sim/Job/el")]
    assert (job.workers_min, job.workers_max) == expected and job.elastic
    assert not [e for e in world.cluster.events if e.reason == IGNORED_REASON]


def test_a_range_on_a_job_without_gpus_is_told_once_per_pod_and_ignored() -> None:
    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.job("cpu", 2, ELASTIC, gpus=0)
        await world.until(300)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    told = sorted((e.pod, e.note) for e in world.cluster.events if e.reason == IGNORED_REASON)
    note = "elastic range ignored: the job's workers ask for no GPUs (a CPU job's CPUs are sized in place)"
    assert told == [("sim/cpu-0", note), ("sim/cpu-1", note)]
    assert world.cluster.scales == [] and world.bound("cpu") == 2


def test_a_job_whose_owner_is_gone_stays_at_the_workers_that_run() -> None:
    """The Job deleted with its pods left running reads as a parallelism of 1: the job was told
    it kept 1 worker, and planned on 1 GPU while it held 2."""
    notes = {**ELASTIC, "pysched.io/workers-min": "2", DEADLINE: format_rfc3339(EPOCH + 2400)}

    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.job("el", 2, notes)
        await world.scheduler.run_until_idle()
        world.cluster.set_job_minimum(job_key("sim", JobSource.BATCH, "el"), None)  # the Job is gone
        await world.until(900)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    job = world.plugin.jobs[JobKey("sim/Job/el")]
    assert job.ref is None and (job.workers, job.workers_min, job.workers_max, job.size()) == (2, 2, 2, 2)
    (note,) = [e.note for e in world.cluster.events if e.reason == IGNORED_REASON]
    assert note.startswith("elastic scaling stopped: ") and note.endswith("; the job keeps 2 workers")
    assert world.bound("el") == 2 and world.cluster.scales == []


def test_a_job_whose_parallelism_is_outside_its_range_is_told_and_never_scaled_below_its_minimum() -> None:
    notes = {**ELASTIC, "pysched.io/workers-min": "4", DEADLINE: format_rfc3339(EPOCH + 2500)}

    async def submitted_below() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.pod("inference", gpus=5)
        world.job("el", 2, notes)
        await world.until(300)
        await world.scheduler.stop()
        return world

    world = asyncio.run(submitted_below())
    assert world.cluster.scales == []
    (note,) = [e.note for e in world.cluster.events if e.reason == IGNORED_REASON]
    assert "its Job runs 2 workers, outside workers-min 4 to workers-max 8" in note

    async def shrunk_by_someone_else() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.pod("inference", gpus=4)
        world.job("el", 4, notes)  # the 8 GPUs all held
        await world.until(60)
        world.cluster.set_job_minimum(job_key("sim", JobSource.BATCH, "el"), 2)  # a user's edit
        world.cluster.delete_pod(PodKey("sim/el-3"))
        world.cluster.delete_pod(PodKey("sim/el-2"))
        world.pod("inference-2", gpus=1)  # one GPU left free: 3 workers would be below the range
        await world.until(600)
        await world.scheduler.stop()
        return world

    world = asyncio.run(shrunk_by_someone_else())
    assert all(workers >= 4 for _, workers in world.cluster.scales), world.cluster.scales


def test_with_wait_the_admission_is_told_on_pods_that_exist() -> None:
    # A gated pod of the waiting job is deleted and its owner makes another: the job's one
    # DeadlineAdmitted event goes on a pod the user can see.
    async def run() -> _Owned:
        world = _Owned()
        profile = CONFIG.profile("pysched")
        assert profile is not None
        args = {**profile.plugin_args, "ElasticScale": {"notAdmitted": "Wait"}}
        config = SchedulerConfig((dataclasses.replace(profile, plugin_args=args),), CONFIG.source)
        world.scheduler = Scheduler(config, world.cluster, world.clock, REGISTRY)
        await world.scheduler.start()
        world.job("a", 1, _deadline(2300, 2000), gpus=8)
        await world.scheduler.run_until_idle()
        world.clock.advance(10)
        world.job("w", 2, _deadline(1000, 600), gpus=4)  # refused: waits, gated
        await world.scheduler.run_until_idle()
        world.clock.advance(10)
        world.cluster.delete_pod(PodKey("sim/w-0"))
        world.pod("w-0-x7k2p", _deadline(1000, 600), gpus=4, job="w", index=0)  # its replacement
        await world.scheduler.run_until_idle()
        world.clock.advance(10)
        world.cluster.delete_pod(PodKey("sim/a-0"))  # room frees up
        await world.until(200)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    admitted = [pod for pod, _ in _reasons(world, "DeadlineAdmitted")]
    assert admitted == ["sim/w-0-x7k2p"] and all(pod in world.cluster.pods for pod in admitted)


@pytest.mark.parametrize("arrives", [60.0, 60.4])
def test_a_job_due_before_a_running_one_is_admitted_when_it_can_wait_for_it(arrives: float) -> None:
    """A running job is never stopped: a newcomer due before it is planned after it, not ahead of
    it (which took the running job's GPUs and refused the newcomer), and a refused one is told a
    deadline that would have been admitted, in whole seconds (arriving between two, the deadline
    of its plan rounded down was refused)."""

    async def run(deadline: float) -> _Owned:
        world = _Owned()  # one node of 8 GPUs
        await world.scheduler.start()
        world.job("a", 1, _deadline(3 * 3600, 1000), gpus=8)  # about 1,100 s on all 8, due in 3 h
        await world.until(arrives)
        world.job("b", 1, _deadline(deadline, 500), gpus=8)  # about 550 s on all 8
        await world.scheduler.run_until_idle()
        await world.scheduler.stop()
        return world

    refused = asyncio.run(run(900))  # a finishes after 900 s: b cannot make it
    (event,) = [e for e in refused.cluster.events if e.reason == REJECTED]
    told = earliest_finish_of(event.note)
    assert told is not None and math.isfinite(told)
    for deadline in (told - EPOCH, told - EPOCH + 600, 3 * 3600 - 60):
        world = asyncio.run(run(deadline))
        assert world.plugin.jobs[JobKey("sim/Job/b")].admitted is True, deadline
        assert not [e for e in world.cluster.events if e.reason == REJECTED]


async def _then_b(world: _Owned, first: Callable[[_Owned], None], at: float) -> _Owned:
    """`first` made at the start, then at `at` seconds the job `b` (8 GPUs for about 660 s, due
    in 25 minutes), which fits an empty node; run to 120 s."""
    await world.scheduler.start()
    first(world)
    await world.until(at)
    world.job("b", 1, _deadline(1500, 600), gpus=8)
    await world.until(120)
    await world.scheduler.stop()
    return world


def test_a_gang_still_missing_members_is_not_planned_as_admitted() -> None:
    """Not judged and not placed, it holds nothing: a job that fits the empty node is admitted."""

    def first(world: _Owned) -> None:
        world.pod("g-0", {**_deadline(3000, 2400), "pysched.io/min-members": "2"}, 4, labels={JOB_LABEL: "g"})

    world = asyncio.run(_then_b(_Owned(), first, 60))
    assert world.plugin.jobs[JobKey("sim/pysched.io/job/g")].admitted is None
    assert world.plugin.jobs[JobKey("sim/Job/b")].admitted is True and world.bound("b") == 1
    assert not _reasons(world, REJECTED)


def test_a_job_whose_pods_no_node_can_hold_is_refused_and_holds_no_gpus_in_the_plan() -> None:
    world = asyncio.run(_then_b(_Owned(nodes=2), lambda w: w.job("huge", 1, _deadline(3500, 3000), gpus=16), 30))
    assert world.plugin.jobs[JobKey("sim/Job/huge")].admitted is False
    (note,) = [e.note for e in world.cluster.events if e.reason == REJECTED]
    assert "its pods ask for 16 GPUs each, more than any node has" in note
    assert world.plugin.jobs[JobKey("sim/Job/b")].admitted is True and world.bound("b") == 1


def test_a_job_held_back_gets_no_gpus_in_the_plan_and_is_not_scaled_while_it_waits() -> None:
    """`notAdmitted: Wait`: nothing is shrunk for a job whose pods are gated, nor is it grown."""
    grow = {"pysched.io/workers-min": "1", "pysched.io/workers-max": "8"}

    async def run() -> tuple[_Owned, list[bool]]:
        world = _Owned(nodes=2, args=WAIT)
        await world.scheduler.start()
        world.job("a", 1, _deadline(20000, 6000), gpus=8)
        world.job("e", 8, {**_deadline(60000, 3000, steps=10000), **grow})
        await world.until(60)
        world.job("w", 1, {**_deadline(1800, 6000, steps=10000), **grow})
        waiting = []
        for t in range(90, 420, 30):
            await world.until(t)
            waiting.append(world.plugin.jobs[JobKey("sim/Job/w")].waiting)
        await world.scheduler.stop()
        return world, waiting

    world, waiting = asyncio.run(run())
    assert all(waiting)  # held back all along (released later, when it cannot be met at all)
    assert world.cluster.scales == []  # e keeps its 8 workers, w its 1
    assert world.bound("e") == 8 and world.bound("w") == 0


@pytest.mark.parametrize("refused", [False, True])
def test_a_new_leader_takes_over_the_running_elastic_jobs_with_their_verdicts(refused: bool) -> None:
    """Placed before it led, the job never passes its PreEnqueue: it is known from its placed pods
    and scaled toward its deadline as the old leader would have; a job the old leader refused
    stays refused (its condition says so)."""
    notes = {**ELASTIC, DEADLINE: format_rfc3339(EPOCH + 2400), EXPECTED_DURATION: "3000s"}  # 2 workers: 3000 s

    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.job("el", 2, notes)
        await world.scheduler.run_until_idle()
        await world.scheduler.stop()
        if refused:
            for member in ("sim/el-0", "sim/el-1"):
                pod = world.cluster.pods[PodKey(member)]
                await world.cluster.patch_pod_conditions(pod, PodCondition("pysched.io/Deadline", "False", REJECTED))
        world.lead(CONFIG.only("pysched"))
        await world.scheduler.start()
        await world.until(900)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    job = world.plugin.jobs[JobKey("sim/Job/el")]
    assert job.admitted is not refused and job.held == world.bound("el")
    assert world.plugin._placed_gpus(job.key) == world.bound("el")  # its GPUs are its own in the plan
    if not refused:
        assert world.cluster.scales == [("sim/Job/el", 6)] and world.bound("el") == 6


@pytest.mark.parametrize("first", [6, 2])
def test_a_gang_of_unlike_pods_is_planned_at_the_sum_of_their_gpus(first: int) -> None:
    """A 6-GPU and a 2-GPU pod of one gang hold 8 GPUs: planned as 2 x the first pod's they were
    refused on an empty node (12) or planned at 4, whichever came first."""

    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        notes = {**_deadline(2000, 600), "pysched.io/min-members": "2"}
        for name, gpus in sorted([("mix-a", 6), ("mix-b", 2)], key=lambda p: p[1] != first):
            world.pod(name, notes, gpus, labels={JOB_LABEL: "mix"})
        await world.until(120)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    job = world.plugin.jobs[JobKey("sim/pysched.io/job/mix")]
    demand = world.plugin._demand(job, world.clock.now(), world.plugin.capacity())
    assert demand is not None and list(demand.seconds) == [8]
    assert job.admitted is True and world.bound("mix") == 2


def test_a_member_replaced_while_the_leader_changed_keeps_its_jobs_admission() -> None:
    """Six one-GPU workers of an admitted job run on an 8-GPU node; one is replaced while no
    scheduler leads. The new leader sees the replacement pending before its first reconcile: its
    running members are the job's, not GPUs held outside the plan, and the job is not refused
    ("never", though it fits easily)."""
    notes = _deadline(1200, 600)

    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.job("train", 6, notes)
        await world.scheduler.run_until_idle()
        await world.scheduler.stop()
        world.cluster.finish_pod(PodKey("sim/train-5"), "Failed")
        world.pod("train-6", notes, job="train", index=5)
        world.lead(CONFIG.only("pysched"))
        await world.scheduler.start()
        await world.scheduler.run_until_idle()
        await world.until(60)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    assert [e.note for e in world.cluster.events if e.reason == REJECTED] == []
    assert world.plugin.rejected == 0 and world.plugin.jobs[JobKey("sim/Job/train")].admitted is True
    assert world.cluster.pods[PodKey("sim/train-6")].node_name is not None  # the replacement runs


def test_a_scale_the_old_leader_made_is_taken_back_when_its_new_members_cannot_run() -> None:
    """The old leader scaled a job from 2 to 6 workers and stopped leading; another pod took the
    free GPUs before the new members bound. The new leader takes the job over and, once the scale
    timeout passes with the new members still pending, scales it back to the workers that run (a
    new leader kept the scale for good: 4 pods pending, the gang's training stopped)."""
    notes = {**ELASTIC, DEADLINE: format_rfc3339(EPOCH + 20000), EXPECTED_DURATION: "3000s"}

    async def run() -> _Owned:
        world = _Owned(args={"scaleTimeoutSeconds": 60})
        await world.scheduler.start()
        world.job("el", 2, notes)
        await world.scheduler.run_until_idle()
        await world.scheduler.stop()
        assert world.bound("el") == 2
        world.cluster.set_job_minimum(job_key("sim", JobSource.BATCH, "el"), 6)  # the old leader's scale
        for index in range(2, 6):
            world.pod(f"el-{index}", notes, job="el", index=index)
        hog = pod_dict("hog", namespace="sim", cpu="1", memory="1Gi", node_name="node-0", extended={GPU: "6"})
        world.cluster.create_pod(hog)
        world.lead(world.config)
        await world.scheduler.start()
        await world.until(200)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    assert world.cluster.scales == [("sim/Job/el", 2)]  # taken back to the two that run
    assert world.plugin.jobs[JobKey("sim/Job/el")].workers == 2
    told = [e.note for e in world.cluster.events if e.reason == "Scaled"]
    assert told == ["workers 6 -> 2 back: its new workers did not all run within 60s"], told


def test_a_parallelism_set_by_hand_outside_the_range_is_told_and_the_job_kept_at_it() -> None:
    """A user sets an elastic job's parallelism to 6, above its workers-max of 4: told once, as a
    Job submitted outside its range is, and the job runs rigid at 6 from then on (it was kept
    silently, and still scaled as if elastic)."""
    notes = {**ELASTIC, "pysched.io/workers-max": "4"}

    async def run() -> _Owned:
        world = _Owned()
        await world.scheduler.start()
        world.job("el", 2, notes)
        await world.until(60)
        world.cluster.set_job_minimum(job_key("sim", JobSource.BATCH, "el"), 6)  # the user's edit
        for index in range(world.bound("el"), 6):
            world.pod(f"el-{index}", notes, job="el", index=index)
        scales = len(world.cluster.scales)
        await world.until(1200)
        await world.scheduler.stop()
        assert len(world.cluster.scales) == scales  # not scaled since
        return world

    world = asyncio.run(run())
    told = [e.note for e in world.cluster.events if e.reason == IGNORED_REASON]
    assert told == ["elastic range ignored: its Job now runs 6 workers, outside workers-min 1 to workers-max 4; "
                    "the job runs at that size"]  # fmt: skip
    job = world.plugin.jobs[JobKey("sim/Job/el")]
    assert job.ref is None and job.workers == 6 and world.bound("el") == 6


def test_a_range_on_a_workload_api_gang_is_told_why_it_is_ignored() -> None:
    """The Job controller (WorkloadWithJob) made the Indexed Job's gang a PodGroup: the apiserver
    refuses a change of its parallelism, and the note says so, not that the owner is no Job."""

    async def run() -> _Owned:
        world = _Owned()
        world.cluster.add_owner("uid-wl", world.clock.now())
        world.cluster.set_job_minimum(job_key("sim", JobSource.WORKLOAD, "wl-group"), 2)
        await world.scheduler.start()
        for index in range(2):
            world.pod(f"wl-{index}", ELASTIC, job="wl", index=index, group="wl-group")
        await world.until(300)
        await world.scheduler.stop()
        return world

    world = asyncio.run(run())
    told = {e.note for e in world.cluster.events if e.reason == IGNORED_REASON}
    assert told == {
        "elastic range ignored: its pods are in a Workload API gang, whose size is its PodGroup's, not its "
        "owner's; the job runs at its submitted size"
    }
    assert world.cluster.scales == []
