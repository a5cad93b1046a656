import asyncio
import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.builders import node_dict, pod_dict
from pysched.api.ids import NodeName, PodKey
from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS, POD_GROUP_LABEL, JobSource, job_key
from pysched.api.objects import PodInfo
from pysched.backend.simulated import SimulatedCluster
from pysched.cmd.bench import run_bench
from pysched.framework.clock import VirtualClock
from pysched.framework.status import Status, error
from pysched.plugins import default_registry
from pysched.plugins.builtin import builtin_config
from pysched.plugins.coscheduling import INVALID_JOB, JOB_INCOMPLETE, JOB_UNSCHEDULABLE
from pysched.scheduler.scheduler import Scheduler


def _member(job: str, index: int, size: int, cpu: str = "4") -> dict[str, object]:
    return pod_dict(
        f"{job}-{index}",
        cpu=cpu,
        memory="1Gi",
        scheduler_name="pysched",
        labels={JOB_LABEL: job},
        annotations={MIN_MEMBERS: str(size)},
    )


def _world(nodes: int, cpu: str = "4") -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    for i in range(nodes):
        cluster.add_node(node_dict(f"n{i}", cpu=cpu, memory="16Gi"))
    registry = default_registry()
    scheduler = Scheduler(builtin_config(registry).only("pysched"), cluster, clock, registry)
    return clock, cluster, scheduler


def _bound(cluster: SimulatedCluster, job: str) -> int:
    return sum(1 for key, pod in cluster.pods.items() if key.startswith(f"default/{job}-") and pod.node_name)


def test_a_gang_waiting_for_members_another_scheduler_places_is_told_so() -> None:
    async def run() -> list[str]:
        clock, cluster, scheduler = _world(2)
        await scheduler.start()
        cluster.create_pod(_member("mpi", 0, 3))
        for i in (1, 2):  # the launcher and a worker left on the default scheduler
            other = _member("mpi", i, 3)
            other["spec"]["schedulerName"] = "default-scheduler"  # type: ignore[index]
            cluster.create_pod(other)
        await scheduler.run_until_idle()
        cluster.delete_pod(PodKey("default/mpi-1"))
        cluster.delete_pod(PodKey("default/mpi-2"))
        clock.advance(400)  # the periodic retry of unschedulable pods
        await scheduler.run_until_idle()
        await scheduler.stop()
        return [e.note for e in cluster.events if e.pod == "default/mpi-0" and e.reason == "FailedScheduling"]

    told = asyncio.run(run())
    assert told[0].startswith(
        "0/2 nodes are available: pysched.io/job default/mpi has 1 pod of the 3 it needs; waiting for 2 more "
        "(mpi-1 and 1 more of its pods name schedulerName default-scheduler: a gang is placed by one scheduler, "
        "give all its pods this one's)."
    )
    assert "waiting for 2 more." in told[-1] and "schedulerName" not in told[-1]  # they were deleted


def test_a_gang_that_does_not_fit_binds_nothing_and_binds_all_once_a_node_is_added() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _world(3)
        await scheduler.start()
        for i in range(4):
            cluster.create_pod(_member("ddp", i, 4))
        await scheduler.run_until_idle()
        assert _bound(cluster, "ddp") == 0  # 3 of 4 workers would block in rendezvous forever
        assert scheduler.cache.nodes.requested[:3, 0].sum() == 0  # and nothing holds room
        told = [e for e in cluster.events if e.reason == JOB_UNSCHEDULABLE]
        assert len(told) == 1 and "has room for 3" in told[0].note
        cluster.add_node(node_dict("n3", cpu="4", memory="16Gi"))
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "ddp") == 4
        assert len([e for e in cluster.events if e.reason == JOB_UNSCHEDULABLE]) == 1  # one per job, not per pod

    asyncio.run(run())


def test_members_wait_until_the_minimum_exists_then_bind_together() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _world(4)
        await scheduler.start()
        for i in range(3):
            cluster.create_pod(_member("late", i, 4))
        await scheduler.run_until_idle()
        assert _bound(cluster, "late") == 0
        failed = [e.note for e in cluster.events if e.reason == "FailedScheduling" and "late" in e.pod]
        assert failed and "has 3 pods of the 4 it needs; waiting for 1 more" in failed[0]
        cluster.create_pod(_member("late", 3, 4))
        await scheduler.run_until_idle()
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "late") == 4

    asyncio.run(run())


def _nowhere(member: dict[str, object]) -> dict[str, object]:
    """The member selects a label no node has: it passes the room check and fails its filters."""
    member["spec"]["nodeSelector"] = {"example.com/pool": "none"}  # type: ignore[index]
    return member


def test_waiting_members_give_their_room_back_when_a_sibling_finds_no_node() -> None:
    async def run() -> None:
        _, cluster, scheduler = _world(4)
        await scheduler.start()
        cluster.create_pod(_member("slow", 0, 3))
        cluster.create_pod(_member("slow", 1, 3))
        cluster.create_pod(_nowhere(_member("slow", 2, 3)))
        await scheduler.run_until_idle()
        assert _bound(cluster, "slow") == 0
        assert scheduler.cache.nodes.requested[:4, 0].sum() == 0  # nothing held by the failed gang
        assert len(scheduler.waiting_pods) == 0
        notes = [e.note for e in cluster.events if e.reason == "FailedScheduling"]
        assert any("the gang is released: slow-2 of pysched.io/job default/slow cannot be placed" in n for n in notes)

    asyncio.run(run())


def test_a_gang_of_300_is_released_without_nesting_one_rejection_in_the_next() -> None:
    async def run() -> None:
        _, cluster, scheduler = _world(300)
        await scheduler.start()
        for i in range(299):
            cluster.create_pod(_member("big", i, 300))
        cluster.create_pod(_nowhere(_member("big", 299, 300)))
        await scheduler.run_until_idle()
        assert _bound(cluster, "big") == 0
        assert not scheduler.incidents.counts  # no bug was contained on the way (RecursionError)
        # Only members queued after the failing one wait (until their timeout); nothing else is held.
        held = len(scheduler.waiting_pods)
        assert held < 299 and scheduler.cache.nodes.requested[:300, 0].sum() == 4000 * held

    asyncio.run(run())


def _all_but_the_last_waiting(cluster: SimulatedCluster, job: str, size: int) -> None:
    """A gang of `size` whose last member a queue manager holds back (a scheduling gate): the
    others are placed and wait at Permit."""
    for i in range(size - 1):
        cluster.create_pod(_member(job, i, size))
    held = _member(job, size - 1, size)
    held["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]  # type: ignore[index]
    cluster.create_pod(held)


def test_deleting_a_waiting_member_releases_its_siblings() -> None:
    async def run() -> None:
        _, cluster, scheduler = _world(4)
        await scheduler.start()
        _all_but_the_last_waiting(cluster, "del", 3)
        await scheduler.run_until_idle()
        assert len(scheduler.waiting_pods) == 2
        cluster.delete_pod(PodKey("default/del-0"))
        await scheduler.run_until_idle()
        assert len(scheduler.waiting_pods) == 0
        assert scheduler.cache.nodes.requested[:4, 0].sum() == 0

    asyncio.run(run())


def test_deleting_the_node_of_a_waiting_member_releases_the_gang_at_once() -> None:
    """It waited out its Permit timeout, to be bound to a node that was gone."""

    async def run() -> None:
        _, cluster, scheduler = _world(4)
        await scheduler.start()
        _all_but_the_last_waiting(cluster, "gone", 3)
        await scheduler.run_until_idle()
        node = next(iter(scheduler.waiting_pods)).node
        cluster.delete_node(node)
        await scheduler.run_until_idle()  # no time passes: not the timeout
        assert len(scheduler.waiting_pods) == 0
        assert scheduler.cache.nodes.requested[: scheduler.cache.nodes.size, 0].sum() == 0
        told = [e.note for e in cluster.events if e.reason == "FailedScheduling"]
        assert any(f"node {node} was deleted while the pod waited at permit" in note for note in told)

    asyncio.run(run())


def test_a_first_member_without_the_minimum_does_not_unmake_the_gang() -> None:
    """Its keys counted for the job: a minimum of 1, and 2 of the 3 members bound as single pods."""

    async def run() -> None:
        _, cluster, scheduler = _world(2)
        await scheduler.start()
        bare = _member("w", 0, 3)
        del bare["metadata"]["annotations"][MIN_MEMBERS]  # type: ignore[index]
        cluster.create_pod(bare)
        for i in (1, 2):
            cluster.create_pod(_member("w", i, 3))
        await scheduler.run_until_idle()
        job = scheduler.jobs.of(PodKey("default/w-0"))
        assert job is not None and job.minimum == 3
        assert _bound(cluster, "w") == 0  # 3 members of 4 CPUs, 2 nodes of 4: none alone
        # The member that spoke for the job leaves (replaced, evicted): another that states the
        # minimum speaks for it, not the first one seen, which states none.
        cluster.create_pod(_member("w", 3, 3))
        cluster.delete_pod(PodKey("default/w-1"))
        await scheduler.run_until_idle()
        job = scheduler.jobs.of(PodKey("default/w-0"))
        assert job is not None and job.minimum == 3 and job.ref_pod != PodKey("default/w-0")
        assert _bound(cluster, "w") == 0

    asyncio.run(run())


def test_members_of_unlike_shapes_beyond_the_minimum_are_not_refused_for_the_largest() -> None:
    """Min 2 of a 3-CPU and two 1-CPU members on one 4-CPU node: the 3-CPU member was told the
    job needs 2 more of its shape (JobUnschedulable), though it and a 1-CPU member fit."""

    async def run() -> None:
        _, cluster, scheduler = _world(1)
        await scheduler.start()
        for i, cpu in enumerate(("3", "1", "1")):
            cluster.create_pod(_member("x", i, 2, cpu=cpu))
        await scheduler.run_until_idle()
        assert _bound(cluster, "x") == 2
        assert not [e for e in cluster.events if e.reason == "JobUnschedulable"]

    asyncio.run(run())


def test_a_member_of_higher_priority_does_not_hold_room_its_siblings_cannot_join() -> None:
    """Room held by priority-0 pods counted as reclaimable for the priority-100 member, not for
    its priority-0 siblings, which cannot preempt them: that member was placed and held room at
    Permit, timed out and came back, again and again."""

    async def run() -> None:
        clock, cluster, scheduler = _world(3)
        cluster.create_pod(pod_dict("hi", cpu="2", scheduler_name="pysched", priority=100, node_name="n0"))
        for node in ("n1", "n2"):
            cluster.create_pod(pod_dict(f"low-{node}", cpu="4", scheduler_name="pysched", node_name=node))
        await scheduler.start()
        for i in range(4):
            member = _member("mixed", i, 4, cpu="1")
            member["spec"]["priority"] = 100 if i == 3 else 0  # type: ignore[index]
            cluster.create_pod(member)
        for _ in range(40):
            await scheduler.run_until_idle()
            assert len(scheduler.waiting_pods) == 0
            clock.advance(5.0)
        told = [e for e in cluster.events if e.reason == JOB_UNSCHEDULABLE]
        assert len(told) == 1 and cluster.preempted == []

    asyncio.run(run())


def test_a_wait_past_the_timeout_rejects_every_waiting_member() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _world(4)
        await scheduler.start()
        _all_but_the_last_waiting(cluster, "part", 2)  # the first waits alone
        await scheduler.run_until_idle()
        assert len(scheduler.waiting_pods) == 1
        assert scheduler.cache.nodes.requested[:4, 0].sum() == 4000  # its room is held
        waiting = PodKey("default/part-0")
        node = scheduler.cache.pod_node(waiting)
        assert node is not None and cluster.nominations == [(waiting, node)]  # where it waits, told
        clock.advance(61)
        await scheduler.run_until_idle()
        assert len(scheduler.waiting_pods) == 0
        assert scheduler.cache.nodes.requested[:4, 0].sum() == 0
        assert cluster.nominations[1:] == [(waiting, None)]  # taken back with the rejection
        assert scheduler.nominator.nominated(waiting) is None
        notes = [e.note for e in cluster.events if e.pod == "default/part-0" and e.reason == "FailedScheduling"]
        assert any("timeout after waiting 60s at plugin Coscheduling" in note for note in notes)
        cluster.set_scheduling_gates(PodKey("default/part-1"), [])
        clock.advance(15)
        await scheduler.run_until_idle()
        clock.advance(15)
        await scheduler.run_until_idle()
        assert _bound(cluster, "part") == 2

    asyncio.run(run())


def test_a_job_that_never_fits_does_not_block_smaller_jobs_behind_it() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _world(2)
        await scheduler.start()
        for i in range(3):
            cluster.create_pod(_member("huge", i, 3))
        for i in range(2):
            cluster.create_pod(_member("small", i, 2))
        await scheduler.run_until_idle()
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "huge") == 0
        assert _bound(cluster, "small") == 2
        assert len([e for e in cluster.events if e.reason == JOB_UNSCHEDULABLE]) == 1

    asyncio.run(run())


def _arrivals(order: Sequence[str]) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    out = []
    for job in order:
        out.append((job, seen.get(job, 0)))
        seen[job] = seen.get(job, 0) + 1
    return out


ORDERS = sorted(set(itertools.permutations("AABB")))


@settings(max_examples=40, deadline=None)
@given(order=st.sampled_from(ORDERS), gaps=st.lists(st.sampled_from([0.0, 0.5, 5.0, 70.0]), min_size=4, max_size=4))
def test_two_gangs_that_fit_alone_but_not_together_end_with_one_bound_and_one_waiting(
    order: tuple[str, ...], gaps: list[float]
) -> None:
    """For every arrival order and spacing (some beyond the Permit timeout): no deadlock, no livelock."""

    async def run() -> None:
        clock, cluster, scheduler = _world(2)
        await scheduler.start()
        for (job, index), gap in zip(_arrivals(order), gaps, strict=True):
            cluster.create_pod(_member(job, index, 2))
            await scheduler.run_until_idle()
            clock.advance(gap)
            await scheduler.run_until_idle()
        for _ in range(30):  # long enough for every wait, backoff and flush to have passed
            clock.advance(15)
            await scheduler.run_until_idle()
        bound = sorted((_bound(cluster, "A"), _bound(cluster, "B")))
        assert bound == [0, 2]
        assert len(scheduler.waiting_pods) == 0

    asyncio.run(run())


def test_pods_in_no_gang_are_untouched_and_no_gang_is_recorded() -> None:
    async def run() -> None:
        _, cluster, scheduler = _world(1)
        await scheduler.start()
        cluster.create_pod(pod_dict("plain", cpu="1", scheduler_name="pysched"))
        cluster.create_pod(_member("solo", 0, 1, cpu="1"))  # a job of minimum 1 is no gang
        await scheduler.run_until_idle()
        assert cluster.pods[PodKey("default/plain")].node_name == "n0"
        assert cluster.pods[PodKey("default/solo-0")].node_name == "n0"
        assert not scheduler.jobs.has_gangs

    asyncio.run(run())


def test_bad_job_keys_are_told_once_per_pod_and_the_pod_still_schedules() -> None:
    async def run() -> None:
        _, cluster, scheduler = _world(2)
        await scheduler.start()
        bad = _member("odd", 0, 2, cpu="1")
        bad["metadata"]["annotations"] = {MIN_MEMBERS: "-3"}  # type: ignore[index]
        cluster.create_pod(bad)
        both = _member("two", 0, 1, cpu="1")
        both["metadata"]["labels"][POD_GROUP_LABEL] = "other"  # type: ignore[index]
        cluster.set_job_minimum(job_key("default", JobSource.POD_GROUP, "other"), 1)  # that group exists
        cluster.create_pod(both)
        await scheduler.run_until_idle()
        await scheduler.run_until_idle()
        told = sorted((e.pod, e.note) for e in cluster.events if e.reason == INVALID_JOB)
        assert len(told) == 2
        assert "pysched.io/min-members: '-3' is not a whole number" in told[0][1]
        assert "names PodGroup.scheduling.x-k8s.io 'other' and also pysched.io/job 'two'" in told[1][1]
        assert cluster.pods[PodKey("default/odd-0")].node_name is not None  # fallback: one by one
        assert cluster.pods[PodKey("default/two-0")].node_name is not None

    asyncio.run(run())


def test_members_disagreeing_on_the_minimum_are_told_which_one_counts() -> None:
    async def run() -> None:
        _, cluster, scheduler = _world(4)
        await scheduler.start()
        cluster.create_pod(_member("mix", 0, 2, cpu="1"))
        cluster.create_pod(_member("mix", 1, 3, cpu="1"))
        await scheduler.run_until_idle()
        told = [e.note for e in cluster.events if e.reason == INVALID_JOB]
        assert told == ["pysched.io/min-members is 3 here but 2 on the job's first pod; the job needs 2"]
        assert _bound(cluster, "mix") == 2

    asyncio.run(run())


def test_a_member_without_the_minimum_is_told_it_is_absent() -> None:
    async def run() -> None:
        _, cluster, scheduler = _world(4)
        await scheduler.start()
        cluster.create_pod(_member("mix", 0, 2, cpu="1"))
        bare = _member("mix", 1, 2, cpu="1")
        del bare["metadata"]["annotations"][MIN_MEMBERS]  # type: ignore[index]
        cluster.create_pod(bare)
        await scheduler.run_until_idle()
        told = [e.note for e in cluster.events if e.reason == INVALID_JOB]
        assert told == ["pysched.io/min-members is absent here but 2 on the job's first pod; the job needs 2"]

    asyncio.run(run())


def test_a_minimum_lowered_on_the_first_pod_applies_to_the_job() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _world(4)
        await scheduler.start()
        for i in range(3):
            cluster.create_pod(_member("low", i, 4))
        await scheduler.run_until_idle()
        assert _bound(cluster, "low") == 0
        cluster.set_annotations(PodKey("default/low-0"), {MIN_MEMBERS: "3"})  # the first pod speaks for the job
        await scheduler.run_until_idle()
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "low") == 3

    asyncio.run(run())


def test_the_minimum_is_read_from_a_pod_that_still_exists() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _world(4)
        await scheduler.start()
        cluster.create_pod(_member("heir", 0, 5))  # the only pod saying 5, deleted below
        for i in range(1, 4):
            cluster.create_pod(_member("heir", i, 3))
        await scheduler.run_until_idle()
        assert _bound(cluster, "heir") == 0
        cluster.delete_pod(PodKey("default/heir-0"))
        await scheduler.run_until_idle()  # no periodic retry needed: the change requeues the members
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "heir") == 3

    asyncio.run(run())


def _filled_with_low_priority(nodes: int) -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    clock, cluster, scheduler = _world(nodes)
    for i in range(nodes):
        cluster.create_pod(pod_dict(f"low-{i}", cpu="4", memory="1Gi", scheduler_name="pysched", priority=0))
    return clock, cluster, scheduler


def _urgent(job: str, index: int, size: int) -> dict[str, object]:
    return pod_dict(
        f"{job}-{index}",
        cpu="4",
        memory="1Gi",
        scheduler_name="pysched",
        priority=1000,
        labels={JOB_LABEL: job},
        annotations={MIN_MEMBERS: str(size)},
    )


def test_a_higher_priority_gang_preempts_the_room_it_needs() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _filled_with_low_priority(3)
        await scheduler.start()
        await scheduler.run_until_idle()
        for i in range(3):
            cluster.create_pod(_urgent("hi", i, 3))
        for _ in range(10):
            clock.advance(15)
            await scheduler.run_until_idle()
        assert _bound(cluster, "hi") == 3
        assert sorted(cluster.preempted) == ["default/low-0", "default/low-1", "default/low-2"]
        # The room a member's preemption freed, held for it while its victim terminates, is the
        # gang's: its siblings were not told the gang cannot fit.
        assert [e.note for e in cluster.events if e.reason == JOB_UNSCHEDULABLE] == []

    asyncio.run(run())


def test_a_gang_that_preemption_cannot_make_room_for_evicts_nothing() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _filled_with_low_priority(3)
        await scheduler.start()
        await scheduler.run_until_idle()
        for i in range(4):  # four 4-CPU members, three 4-CPU nodes even with every pod evicted
            cluster.create_pod(_urgent("big", i, 4))
        for _ in range(10):
            clock.advance(15)
            await scheduler.run_until_idle()
        assert _bound(cluster, "big") == 0 and cluster.preempted == []
        told = [e.note for e in cluster.events if e.reason == JOB_UNSCHEDULABLE]
        assert told == [
            "pysched.io/job default/big needs 4 more x (cpu 4000, memory 1073741824), "
            "the cluster has room for 3 with every lower-priority pod evicted"
        ]

    asyncio.run(run())


@pytest.mark.parametrize("gangs", [1, 2])
def test_a_gang_a_member_of_which_fits_nowhere_does_not_retry_in_a_loop(gangs: int) -> None:
    # Its siblings are released each time that member finds no node; they used to wake one another
    # (each release an event during the others' attempts), a round every few seconds for ever,
    # each posting FailedScheduling: now they wait as a lone pod that fits nowhere does. Two such
    # gangs woke each other: the siblings released at Permit by one were room for the other's.
    async def run() -> tuple[int, int]:
        clock, cluster, scheduler = _world(4)
        await scheduler.start()
        for job in ("stuck", "other")[:gangs]:
            for i in range(2):
                cluster.create_pod(_member(job, i, 3, cpu="1"))
            cluster.create_pod(_nowhere(_member(job, 2, 3, cpu="1")))
        await scheduler.run_until_idle()
        before = len([e for e in cluster.events if e.reason == "FailedScheduling"])
        held = 0
        for _ in range(720):  # an hour
            clock.advance(5)
            await scheduler.run_until_idle()
            held += len(scheduler.waiting_pods)
        await scheduler.stop()
        return len([e for e in cluster.events if e.reason == "FailedScheduling"]) - before, held

    # Over 1,000 before; then each sibling still woke the others when released (60 an hour each).
    # The member that fits nowhere is retried every 5 minutes (12), its siblings once in all.
    # Two gangs: 264 and 2,400 samples with a member held at Permit, before.
    told, held = asyncio.run(run())
    assert told <= gangs * (12 + 2 * 2) and held <= gangs * 2 * 12


def test_members_of_several_shapes_are_counted_together() -> None:
    async def run() -> tuple[int, list[str]]:
        _, cluster, scheduler = _world(2)  # 8 CPUs in all: 2 + 2 + 4 + 4 do not fit
        await scheduler.start()
        for i, cpu in enumerate("2244"):
            cluster.create_pod(_member("mixed", i, 4, cpu=cpu))
        await scheduler.run_until_idle()
        await scheduler.stop()
        return _bound(cluster, "mixed"), [e.note for e in cluster.events if e.reason == JOB_UNSCHEDULABLE]

    bound, told = asyncio.run(run())
    assert bound == 0 and told == [
        "pysched.io/job default/mixed needs cpu 12000 in all for its 4 pods still to place, the cluster has 8000 free"
    ]


def test_pods_naming_an_unknown_podgroup_wait_for_it_then_use_its_minimum() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _world(4)
        await scheduler.start()
        for i in range(3):
            raw = pod_dict(f"g-{i}", cpu="1", scheduler_name="pysched", labels={POD_GROUP_LABEL: "g"})
            cluster.create_pod(raw)
        await scheduler.run_until_idle()
        assert _bound(cluster, "g") == 0
        notes = [e.note for e in cluster.events if e.reason == "FailedScheduling"]
        assert notes and all(
            "PodGroup.scheduling.x-k8s.io default/g: no such PodGroup is known yet" in n for n in notes
        )
        cluster.set_job_minimum(job_key("default", JobSource.POD_GROUP, "g"), 4)  # one more than exist
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "g") == 0
        assert any("has 3 pods of the 4 it needs" in e.note for e in cluster.events)
        cluster.set_job_minimum(job_key("default", JobSource.POD_GROUP, "g"), 3)
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "g") == 3

    asyncio.run(run())


def test_a_gang_short_of_room_is_not_retried_each_period_while_it_still_cannot_fit() -> None:
    """The periodic retry of unschedulable pods leaves its members waiting (each would only fail
    at PreFilter again); room freed sends them through, as before."""

    async def run() -> None:
        clock, cluster, scheduler = _world(3)
        await scheduler.start()
        cluster.create_pod(pod_dict("solo", cpu="4", memory="1Gi", scheduler_name="pysched"))
        await scheduler.run_until_idle()
        for i in range(3):
            cluster.create_pod(_member("ddp", i, 3))
        await scheduler.run_until_idle()
        tried = scheduler.stats.unschedulable
        assert _bound(cluster, "ddp") == 0 and tried > 0
        for _ in range(12):  # an hour: twelve periods of retrying what waits
            clock.advance(300)
            await scheduler.run_until_idle()
        assert scheduler.stats.unschedulable == tried
        cluster.delete_pod(PodKey("default/solo"))
        # The last period counted as one more refusal, as kube's retry would: they back off first.
        clock.advance(scheduler.queue.timings.max_backoff)
        await scheduler.run_until_idle()
        assert _bound(cluster, "ddp") == 3

    asyncio.run(run())


def test_members_disagreeing_on_the_deadline_are_told_naming_both() -> None:
    async def run() -> None:
        _, cluster, scheduler = _world(2)
        await scheduler.start()
        first = _member("dl", 0, 2, cpu="1")
        first["metadata"]["annotations"]["pysched.io/deadline"] = "2h"  # type: ignore[index]
        second = _member("dl", 1, 2, cpu="1")
        second["metadata"]["annotations"]["pysched.io/deadline"] = "3h"  # type: ignore[index]
        cluster.create_pod(first)
        cluster.create_pod(second)
        await scheduler.run_until_idle()
        told = [(e.pod, e.note) for e in cluster.events if e.reason == "InvalidAnnotation"]
        assert told == [("default/dl-1", "pysched.io/deadline: '3h' here but '2h' on dl-0 of the same job; "
                         "the job follows its rank 0 (the pod reporting progress)")]  # fmt: skip
        assert _bound(cluster, "dl") == 2

    asyncio.run(run())


def test_the_gang_bench_mix_binds_every_job_whole_or_not_at_all() -> None:
    held: list[Scheduler] = []
    result = asyncio.run(run_bench(40, 900, mix="gangs", configure=held.append))
    (scheduler,) = held
    jobs = [job for job in scheduler.jobs if job.ref.source is JobSource.PYSCHED]
    assert len(jobs) == 900 * 4 // 9 // 8  # 50 jobs of 8
    assert all(len(job.bound) in (0, 8) for job in jobs)
    assert sum(len(job.bound) for job in jobs) >= 8 * 40  # most jobs fit on 40 nodes
    cluster = scheduler.backend
    assert isinstance(cluster, SimulatedCluster)
    assert result.scheduled == sum(1 for pod in cluster.pods.values() if pod.node_name)


@pytest.mark.parametrize("failing", ["ddp-2", "ddp-0"])
def test_a_member_whose_bind_fails_is_retried_and_the_short_job_is_told(failing: str) -> None:
    """The first member's bind fails before its siblings' binds end: they were not counted, and
    nothing was told."""

    async def run() -> None:
        clock, cluster, scheduler = _world(3)
        await scheduler.start()
        bind = cluster.bind
        failed: list[str] = []

        async def flaky(pod: PodInfo, node: NodeName) -> Status:
            if pod.name == failing and not failed:
                failed.append(pod.name)
                return error("etcdserver: request timed out")
            return await bind(pod, node)

        cluster.bind = flaky  # type: ignore[method-assign]
        for i in range(3):
            cluster.create_pod(_member("ddp", i, 3))
        await scheduler.run_until_idle()
        assert _bound(cluster, "ddp") == 2 and failed == [failing]
        told = [e.note for e in cluster.events if e.reason == JOB_INCOMPLETE]
        assert told == [
            f"pysched.io/job default/ddp: 2 of the 3 pods it needs are bound or binding; {failing} is retried"
        ]
        clock.advance(2)  # past its backoff
        await scheduler.run_until_idle()
        assert _bound(cluster, "ddp") == 3

    asyncio.run(run())


def test_a_member_retried_while_a_sibling_waits_at_permit_goes_through_a_cycle() -> None:
    """No node can take the 3-CPU member next to its assumed 2-CPU sibling. Its retry must not be
    refused without a cycle: the cycle's PostFilter is what gives the sibling's room back."""

    async def run() -> None:
        clock, cluster, scheduler = _world(1)
        await scheduler.start()
        cluster.create_pod(_member("pair", 0, 2, cpu="2"))
        cluster.create_pod(_member("pair", 1, 2, cpu="3"))
        for _ in range(4):
            await scheduler.run_until_idle()
            assert len(scheduler.waiting_pods) == 0
            clock.advance(5.0)
        assert _bound(cluster, "pair") == 0

    asyncio.run(run())


def test_members_only_nominated_do_not_count_as_placed_for_their_gang() -> None:
    """After a leader change, members an old leader held at Permit show only their
    nominatedNodeName. Held room, not a place: the gang binds all its members or none (one of
    them no longer fits anywhere), where the nominations let the first member bind alone."""

    async def run() -> None:
        clock = VirtualClock(1000.0)
        cluster = SimulatedCluster(clock)
        cluster.add_node(node_dict("n0", cpu="4", memory="16Gi"))
        cluster.add_node(node_dict("n1", cpu="4", memory="16Gi", unschedulable=True))  # drained since
        cluster.add_node(node_dict("n2", cpu="4", memory="16Gi"))
        for i, node in ((0, None), (1, "n0"), (2, "n1")):
            raw = _member("ddp", i, 3)
            if node is not None:  # written by the old leader while the member waited at Permit
                raw["status"] = {"phase": "Pending", "nominatedNodeName": node}
            cluster.create_pod(raw)
        registry = default_registry()
        scheduler = Scheduler(builtin_config(registry).only("pysched"), cluster, clock, registry)
        await scheduler.start()
        for _ in range(4):  # past the Permit timeout
            await scheduler.run_until_idle()
            clock.advance(120)
        assert _bound(cluster, "ddp") == 0
        scheduler.cache.check_consistency()

    asyncio.run(run())


def test_a_gang_that_fits_only_by_preempting_a_lower_priority_pod_does() -> None:
    """Two nodes of 4 CPUs each run a 2-CPU pod of priority 0; six 1-CPU members of priority 1000
    fit once one of them goes. Preemption runs before the gang gives its room back (the order
    kube-scheduler's default postFilter and scheduler-plugins' make), so it sees the waiting
    members' room as taken and evicts one pod; the other way round it found nothing to evict."""

    async def run() -> SimulatedCluster:
        clock, cluster, scheduler = _world(2)
        for i in range(2):
            cluster.create_pod(pod_dict(f"low-{i}", cpu="2", scheduler_name="pysched", node_name=f"n{i}"))
        await scheduler.start()
        for i in range(6):
            member = _member("hi", i, 6, cpu="1")
            member["spec"]["priority"] = 1000  # type: ignore[index]
            cluster.create_pod(member)
        for _ in range(120):  # ten minutes
            await scheduler.run_until_idle()
            clock.advance(5)
        await scheduler.stop()
        return cluster

    cluster = asyncio.run(run())
    assert _bound(cluster, "hi") == 6 and len(cluster.preempted) == 1


def _two_profiles(nodes: int) -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    """Two profiles of one process, both with Coscheduling (they share EarliestDeadline's queue)."""
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    for i in range(nodes):
        cluster.add_node(node_dict(f"n{i}", cpu="4", memory="16Gi"))
    registry = default_registry()
    scheduler = Scheduler(builtin_config(registry).only("edf", "seed"), cluster, clock, registry)
    return clock, cluster, scheduler


def _in_profile(member: dict[str, object], profile: str) -> dict[str, object]:
    member["spec"]["schedulerName"] = profile  # type: ignore[index]
    return member


SPLIT = "pysched.io/job default/split has pods of 2 scheduler profiles (edf, seed)"


def test_a_gang_split_across_profiles_is_refused_and_binds_once_one_profile_has_it_all() -> None:
    """Each profile keeps its own Coscheduling state, so the gang could be judged two ways at once:
    its members are refused (one InvalidJob event each, naming the profiles) until every member
    names the same profile, even where all of them fit."""

    async def run() -> None:
        clock, cluster, scheduler = _two_profiles(4)
        await scheduler.start()
        for i, profile in enumerate(("edf", "edf", "seed")):
            cluster.create_pod(_in_profile(_member("split", i, 3, cpu="1"), profile))
        await scheduler.run_until_idle()
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "split") == 0 and len(scheduler.waiting_pods) == 0
        told = sorted((e.pod, e.note) for e in cluster.events if e.reason == INVALID_JOB)
        assert [pod for pod, _ in told] == [f"default/split-{i}" for i in range(3)]
        assert all(note.startswith(SPLIT) and "same schedulerName" in note for _, note in told)
        failed = [e.note for e in cluster.events if e.reason == "FailedScheduling"]
        assert failed and all(SPLIT in note for note in failed)
        cluster.delete_pod(PodKey("default/split-2"))  # the user moves it to the others' profile
        cluster.create_pod(_in_profile(_member("split", 2, 3, cpu="1"), "edf"))
        await scheduler.run_until_idle()
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "split") == 3

    asyncio.run(run())


def test_a_gang_split_across_profiles_does_not_cycle() -> None:
    # Its member that fits nowhere used to be released by one profile's Coscheduling and called
    # back by the other's, a cycle every few seconds for ever (132 FailedScheduling an hour).
    async def run() -> tuple[int, int]:
        clock, cluster, scheduler = _two_profiles(4)
        await scheduler.start()
        for i, profile in enumerate(("edf", "edf", "seed")):
            member = _in_profile(_member("split", i, 3, cpu="1"), profile)
            cluster.create_pod(_nowhere(member) if i == 2 else member)
        await scheduler.run_until_idle()
        first = len([e for e in cluster.events if e.reason == "FailedScheduling"])
        for _ in range(720):  # an hour
            clock.advance(5)
            await scheduler.run_until_idle()
        await scheduler.stop()
        told = len([e for e in cluster.events if e.reason == INVALID_JOB])
        return len([e for e in cluster.events if e.reason == "FailedScheduling"]) - first, told

    again, told = asyncio.run(run())
    assert again == 0 and told == 3  # each member refused once, and told once


def test_deleting_the_member_of_another_profile_lets_the_others_go_at_once() -> None:
    """A pending pod's deletion is no cluster event: the profile that refused it calls its
    siblings back, rather than leaving them to the retry of unschedulable pods 5 minutes on."""

    async def run() -> None:
        clock, cluster, scheduler = _two_profiles(4)
        await scheduler.start()
        for i, profile in enumerate(("edf", "edf", "seed")):
            cluster.create_pod(_in_profile(_member("split", i, 2, cpu="1"), profile))
        await scheduler.run_until_idle()
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "split") == 0
        cluster.delete_pod(PodKey("default/split-2"))
        await scheduler.run_until_idle()
        clock.advance(20)
        await scheduler.run_until_idle()
        assert _bound(cluster, "split") == 2

    asyncio.run(run())


def test_members_waiting_at_permit_give_their_room_back_when_a_member_of_another_profile_comes() -> None:
    async def run() -> None:
        clock, cluster, scheduler = _two_profiles(4)
        await scheduler.start()
        for i in range(2):
            cluster.create_pod(_in_profile(_member("split", i, 3, cpu="1"), "edf"))
        held = _in_profile(_member("split", 2, 3, cpu="1"), "edf")
        held["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]  # type: ignore[index]
        cluster.create_pod(held)
        await scheduler.run_until_idle()
        assert len(scheduler.waiting_pods) == 2
        cluster.create_pod(_in_profile(_member("split", 3, 3, cpu="1"), "seed"))
        await scheduler.run_until_idle()
        assert len(scheduler.waiting_pods) == 0
        assert scheduler.cache.nodes.requested[:4, 0].sum() == 0
        for _ in range(120):  # ten minutes
            clock.advance(5)
            await scheduler.run_until_idle()
        assert _bound(cluster, "split") == 0
        told = sorted(e.pod for e in cluster.events if e.reason == INVALID_JOB)
        assert told == ["default/split-0", "default/split-1", "default/split-3"]

    asyncio.run(run())


def _four_nodes() -> tuple[VirtualClock, SimulatedCluster, Scheduler]:
    """Four 4-CPU nodes under the `pysched` profile."""
    clock = VirtualClock(1000.0)
    cluster = SimulatedCluster(clock)
    for i in range(4):
        cluster.add_node(node_dict(f"n{i}", cpu="4", memory="16Gi"))
    registry = default_registry()
    return clock, cluster, Scheduler(builtin_config(registry).only("pysched"), cluster, clock, registry)


def test_a_gang_that_may_not_preempt_counts_no_room_lower_priority_pods_hold() -> None:
    """A priority-1000 gang of two 4-CPU members with `preemptionPolicy: Never`, on four 4-CPU
    nodes three of which priority-0 pods fill: it has room for 1, not 4 "with every lower-priority
    pod evicted". Refused at once and told so once; counting that room, it passed its PreFilter and
    its members took turns at Permit for the whole hour (724 FailedScheduling events)."""

    async def run() -> SimulatedCluster:
        clock, cluster, scheduler = _four_nodes()
        for i in range(3):
            cluster.create_pod(pod_dict(f"low-{i}", cpu="4", memory="1Gi", node_name=f"n{i}", scheduler_name="pysched"))
        await scheduler.start()
        for i in range(2):
            raw = pod_dict(
                f"g-{i}", cpu="4", memory="1Gi", scheduler_name="pysched", priority=1000,
                labels={JOB_LABEL: "g"}, annotations={MIN_MEMBERS: "2"},
            )  # fmt: skip
            raw["spec"]["preemptionPolicy"] = "Never"
            cluster.create_pod(raw)
        for _ in range(720):
            clock.advance(5)
            await scheduler.run_until_idle()
        await scheduler.stop()
        return cluster

    cluster = asyncio.run(run())
    told = [e.note for e in cluster.events if e.reason == JOB_UNSCHEDULABLE]
    assert len(told) == 1 and told[0].endswith("the cluster has room for 1"), told
    # the periodic retry's, every 5 minutes: no loop
    assert sum(1 for e in cluster.events if e.reason == "FailedScheduling") <= 2 * 12 + 2
    assert not any(p.node_name for k, p in cluster.pods.items() if k.startswith("default/g-"))


def test_a_gang_released_at_permit_is_not_told_incomplete() -> None:
    """Three members of a gang of four wait at Permit and the fourth fits no node: the gang is
    released and nothing was bound, so no member is told JobIncomplete ("2 of the 4 pods it
    needs are bound or binding" was told of members still waiting, released with it)."""

    async def run() -> SimulatedCluster:
        _, cluster, scheduler = _four_nodes()
        await scheduler.start()
        for i in range(4):
            raw = pod_dict(
                f"ddp-{i}", cpu="4", memory="1Gi", scheduler_name="pysched",
                labels={JOB_LABEL: "ddp"}, annotations={MIN_MEMBERS: "4"},
            )  # fmt: skip
            if i == 3:
                raw["spec"]["nodeSelector"] = {"example.com/pool": "none"}
            cluster.create_pod(raw)
        await scheduler.run_until_idle()
        await scheduler.stop()
        return cluster

    cluster = asyncio.run(run())
    assert not any(p.node_name for p in cluster.pods.values())
    assert [e.note for e in cluster.events if e.reason == JOB_INCOMPLETE] == []
