"""Coscheduling: a job's pods are placed all together or not at all (a gang).

The semantics of scheduler-plugins' Coscheduling, on the jobs the engine keeps (`Handle.jobs`):
- PreFilter refuses a member while fewer pods of its job exist than its minimum, and while the
  members still to be placed cannot fit in the cluster's free room (one `JobUnschedulable` event
  per job); pods in no gang get Skip;
- Permit holds each assumed member (its room reserved) until the job's minimum is placed, then
  lets them all bind; a member that waits longer than `permitWaitingTimeSeconds` is rejected;
- a member that cannot be placed (PostFilter), or that is rejected or unreserved while others
  wait, releases every waiting member of its job, so no job holds room it cannot use;
- a gang whose members name different profiles (`schedulerName`) is refused until one profile
  has them all (one `InvalidJob` event per member): each profile keeps its own state of the job.
The queue keeps a gang's members together (`JobBook.sort_key`), so they are tried back to back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pysched.api.annotations import DEADLINE, INVALID_ANNOTATION, TOTAL_STEPS
from pysched.api.disruption import PREEMPT_NEVER, preemption_policy
from pysched.api.features import EVERY_POD, PodFeatures
from pysched.api.ids import JobKey, NodeName, PodKey, PodUID
from pysched.api.jobs import MIN_MEMBERS, job_of
from pysched.api.limits import clip
from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import ClusterEvent, EventKind, EventRegistration, QueueingHint
from pysched.framework.interfaces import Diagnosis, Handle
from pysched.framework.jobs import Job
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import PluginSpec, check_range
from pysched.framework.status import SKIP, SUCCESS, Code, Status, unresolvable, unschedulable
from pysched.framework.waiting import MAX_WAIT_SECONDS
from pysched.plugins.coscheduling.room import held_below, room_for, short_in_total

NAME = "Coscheduling"
JOB_UNSCHEDULABLE = "JobUnschedulable"
JOB_INCOMPLETE = "JobIncomplete"
INVALID_JOB = "InvalidJob"


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    """scheduler-plugins' CoschedulingArgs."""

    permit_waiting_time_seconds: float = 60.0

    def validate(self) -> None:
        check_range(self, "permit_waiting_time_seconds", 1, MAX_WAIT_SECONDS)


def _members(count: int) -> str:
    return f"{count} pod{'' if count == 1 else 's'}"


class Coscheduling:
    NAME: ClassVar[str] = NAME
    # A gang that still cannot fit stays out of the periodic retry, all its members together.
    LEAVES_WAITING: ClassVar[bool] = True
    __slots__ = ("_args", "_checked", "_counted", "_failed", "_handle", "_releasing", "_split", "_told", "_warned")

    def __init__(self, args: CoschedulingArgs, handle: Handle) -> None:
        self._args = args
        self._handle = handle
        self._told: set[JobKey] = set()  # jobs told JobUnschedulable since they last fitted
        self._warned: dict[PodUID, str] = {}  # the problem each pod was last told of
        # Jobs being released: each rejection comes back through Unreserve, which must not start
        # another release of the same job (a 200-member gang would nest 200 deep).
        self._releasing: set[JobKey] = set()
        # The deadline and steps each member was last checked with against its siblings: a
        # member is compared again only when its own values change, not at each retry.
        self._checked: dict[PodUID, tuple[str | None, ...]] = {}
        # Each gang's last room count with the state it was made in (the node table's change
        # count, members, placed): its siblings, tried back to back on the same cluster, reuse
        # it instead of counting every member again each (a 64-member gang would count 64 x 64).
        self._counted: dict[JobKey, tuple[tuple[int, int, int, int, bool], str | None]] = {}
        # Each gang's member that last found no node, with the node table's change count once
        # its siblings were released, until it is placed or leaves: while it cannot go, a sibling
        # reaching Permit does not call back the others, and on an unchanged cluster the released
        # siblings are refused without a cycle (each would hold room at Permit for nothing).
        self._failed: dict[JobKey, tuple[PodKey, int]] = {}
        # Gangs this profile refused for members of another profile (`_split_words`), so that the
        # checks after events and at the periodic retry leave them waiting at no cost to others.
        self._split: set[JobKey] = set()
        handle.jobs.on_gangs_changed(handle.gates.changed)
        handle.pod_lifecycle.on_deleted(self._forget)
        handle.pod_lifecycle.on_terminated(self._forget)

    def _forget(self, pod: PodInfo) -> None:
        self._warned.pop(pod.uid, None)
        self._checked.pop(pod.uid, None)
        ref = job_of(pod)
        if ref is None:
            return
        job = self._handle.jobs.get(ref.key)
        if job is None:
            self._told.discard(ref.key)  # the job's last pod is gone
            self._counted.pop(ref.key, None)
            self._failed.pop(ref.key, None)
            self._split.discard(ref.key)
        elif ref.key in self._split and _split_words(job) is None:
            # No pending member's deletion is a cluster event: the members it kept out go now.
            self._split.discard(ref.key)
            self._handle.activator.activate(list(job.members), refused_by=NAME)

    def acts_on(self) -> PodFeatures:
        """Every pod while some gang (or a job with bad keys) exists, since a member may carry
        nothing else; none before."""
        return EVERY_POD if self._handle.jobs.has_gangs else PodFeatures(0)

    # ----- PreEnqueue
    def pre_enqueue(self, pod: PodInfo) -> Status:
        """Tell a member once what its job keys got wrong (conflicting groups, a malformed or
        disagreeing minimum); it is queued all the same, with the fallback the message names."""
        job = self._handle.jobs.of(pod.key)
        if job is None:
            return SUCCESS
        # A member on its way back to the queue may have changed (a resize): count again.
        self._counted.pop(job.key, None)
        ref = job_of(pod)
        problem = ref.problem if ref is not None else ""
        if ref is not None and not problem and ref.min_members != job.ref.min_members:
            here = "absent" if ref.min_members is None else ref.min_members
            first = "absent" if job.ref.min_members is None else job.ref.min_members
            problem = f"{MIN_MEMBERS} is {here} here but {first} on the job's first pod; the job needs {job.minimum}"
        reason = INVALID_JOB
        if not problem:
            values = (pod.annotations.get(DEADLINE), pod.annotations.get(TOTAL_STEPS))
            if self._checked.get(pod.uid) != values:
                self._checked[pod.uid] = values
                problem = _disagreement(pod, job)
                reason = INVALID_ANNOTATION
        if problem and self._warned.get(pod.uid) != problem:
            self._warned[pod.uid] = problem
            self._handle.tasks.spawn(self._handle.cluster.emit_event(pod, "Warning", reason, problem))
        return SUCCESS

    # ----- PreFilter
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        job = self._handle.jobs.gang_of(pod.key)
        if job is None:
            return SKIP
        split = _split_words(job) if _spans_profiles(job, pod.scheduler_name) else None
        if split is not None:
            return self._refuse_split(job, pod, split)
        self._split.discard(job.key)
        if job.awaits_group:
            return unschedulable(f"waiting for {job.ref.title}: no such PodGroup is known yet", plugin=NAME)
        minimum, present = job.minimum, len(job.members)
        if present < minimum:
            return unschedulable(
                f"{job.ref.title} has {_members(present)} of the {minimum} it needs; "
                f"waiting for {minimum - present} more{_elsewhere_words(self._handle.jobs.elsewhere(job.key))}",
                plugin=NAME,
            )
        needed = minimum - len(job.placed)
        if needed <= 0:
            return SUCCESS  # the gang is complete: a member beyond the minimum is placed alone
        if job.placed:
            # The job's first member found room for all; its siblings follow it back to back, and
            # one that finds no node releases them all (PostFilter): no need to count again.
            return SUCCESS
        short = self._shortfall(job, pod, needed, nodes)
        if short is None:
            self._told.discard(job.key)
            return SUCCESS
        self.release(job, f"{job.ref.title} cannot fit")
        message = f"{job.ref.title} {short}"
        if _may_preempt(job, pod) and self._handle.pods.any_below(_lowest_priority(job, pod)):
            message += " with every lower-priority pod evicted"
        if job.key not in self._told:
            self._told.add(job.key)
            self._handle.tasks.spawn(self._handle.cluster.emit_event(pod, "Warning", JOB_UNSCHEDULABLE, message))
        return unschedulable(message, plugin=NAME)

    def _refuse_split(self, job: Job, pod: PodInfo, why: str) -> Status:
        """Refuse a member of a gang whose members name several profiles, telling it once; members
        placed before the gang was split give their room back."""
        self._split.add(job.key)
        self.release(job, why)
        if self._warned.get(pod.uid) != why:
            self._warned[pod.uid] = why
            self._handle.tasks.spawn(self._handle.cluster.emit_event(pod, "Warning", INVALID_JOB, why))
        return unresolvable(why, plugin=NAME)

    def _shortfall(self, job: Job, pod: PodInfo, needed: int, nodes: NodeTable) -> str | None:
        """`_shortfall`, reused while the cluster and the job are as they were when counted
        (only the count over every member still to be placed: it does not depend on `pod`).
        Room is reclaimable only below every member still to place: a member of lower priority
        cannot preempt what its higher-priority sibling could."""
        priority = _lowest_priority(job, pod)
        unplaced = [member.key for member in job.unplaced()]
        preempts = _may_preempt(job, pod)  # a member with preemptionPolicy Never reclaims nothing

        def reclaimable() -> np.ndarray | None:
            return held_below(nodes, self._handle.pods, priority, unplaced) if preempts else None

        if needed != len(job.members) - len(job.placed):
            return _shortfall(job, pod, needed, nodes, reclaimable())
        state = (nodes.change_seq, len(job.members), len(job.placed), priority, preempts)
        counted = self._counted.get(job.key)
        if counted is not None and counted[0] == state:
            return counted[1]
        short = _shortfall(job, pod, needed, nodes, reclaimable())
        self._counted[job.key] = (state, short)
        return short

    # ----- PostFilter
    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        """No node fits this member: its waiting siblings give their room back."""
        job = self._handle.jobs.gang_of(pod.key)
        if job is not None and job.key in self._split and _spans_profiles(job, pod.scheduler_name):
            # Refused at PreFilter for the split, released there: no member found no node.
            return Status(Code.UNSCHEDULABLE, (), NAME)
        if job is not None and len(job.placed) < job.minimum:
            self.release(job, f"{pod.name} of {job.ref.title} cannot be placed")
            self._failed[job.key] = (pod.key, self._handle.nodes.change_seq)
        return Status(Code.UNSCHEDULABLE, (), NAME)

    # ----- Reserve
    def reserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        """The member lost its place (rejected, timed out, its bind failed): the others waiting
        give theirs back too (once the gang is complete, none waits)."""
        ref = job_of(pod)  # by its keys: a deleted member has already left the job book
        found = self._handle.jobs.get(ref.key) if ref is not None else None
        job = found if found is not None and found.is_gang else None
        if job is None:
            return
        self.release(job, f"{pod.name} of {job.ref.title} was rejected", keep=pod.key)
        # Siblings past Permit (bound, or binding beside it: the release gave back only those
        # still waiting) when its own bind failed: the job runs short until the retry binds it.
        # Say so now rather than after a timeout. Those still waiting at Permit (being released
        # with it) bound nothing.
        waiting = self._handle.waiting_pods
        bound = sum(1 for key in (job.bound | job.placed) - {pod.key} if waiting.get(key) is None)
        if 0 < bound < job.minimum:
            needs = f"{bound} of the {job.minimum} pods it needs are bound or binding"
            note = f"{job.ref.title}: {needs}; {pod.name} is retried"
            self._handle.tasks.spawn(self._handle.cluster.emit_event(pod, "Warning", JOB_INCOMPLETE, note))

    # ----- Permit
    def permit(self, state: CycleState, pod: PodInfo, node: NodeName) -> tuple[Status, float]:
        job = self._handle.jobs.gang_of(pod.key)
        if job is None:
            return SUCCESS, 0.0
        if len(job.placed) < job.minimum:
            # Siblings this plugin refused before it came (timed out at Permit, released) may go
            # now that it holds its place, as scheduler-plugins' Coscheduling activates them: no
            # event tells them. Not while the member they were released for still finds no node.
            if self._failing(job) is None:
                self._handle.activator.activate([k for k in job.members if k not in job.placed], refused_by=NAME)
            return Status(Code.WAIT, (f"waiting for {job.minimum - len(job.placed)} more of {job.ref.title}",)), (
                self._args.permit_waiting_time_seconds
            )
        waiting = self._handle.waiting_pods
        # Name order, not a set's (that follows the per-process string hash): the binds go out in it.
        for key in sorted(job.placed):
            held = waiting.get(key)
            if held is not None:
                held.allow(NAME)
        return SUCCESS, 0.0

    def release(self, job: Job, why: str, keep: object = None) -> None:
        """Reject every member of `job` waiting at Permit (but `keep`)."""
        if job.key in self._releasing:
            return
        self._releasing.add(job.key)
        try:
            waiting = self._handle.waiting_pods
            for key in sorted(job.placed):
                held = waiting.get(key)
                if held is not None and key != keep:
                    held.reject(NAME, f"the gang is released: {why}")
        finally:
            self._releasing.discard(job.key)

    def events_to_register(self) -> Sequence[EventRegistration]:
        """A member waits for its siblings to appear and for room."""
        return [
            EventRegistration(EventKind.UNSCHEDULED_POD_ADD, self._unless_split),
            EventRegistration(EventKind.JOB_MINIMUM_CHANGE, self._unless_split),
            EventRegistration(EventKind.POD_DELETE, self._after_pod_delete),
            EventRegistration(EventKind.POD_RESIZE_DOWN, self._unless_split),
            EventRegistration(EventKind.NODE_ADD, self._unless_split),
            EventRegistration(EventKind.NODE_UPDATE, self._unless_split),
        ]

    def _unless_split(self, pod: PodInfo, event: ClusterEvent) -> QueueingHint:
        """No event helps a gang split across profiles but one that makes a profile have it all
        (a member of another profile leaving)."""
        job = self._handle.jobs.of(pod.key)
        if job is not None and job.key in self._split and _spans_profiles(job, pod.scheduler_name):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    def _after_pod_delete(self, pod: PodInfo, event: ClusterEvent) -> QueueingHint:
        """Room another pod gave back may let the job fit; while the member it was released for
        still finds no node, room its own members give back does not, nor room another pod held
        only at Permit (another gang's, released: two such gangs woke each other for ever)."""
        if self._unless_split(pod, event) is QueueingHint.SKIP:
            return QueueingHint.SKIP
        job = self._handle.jobs.of(pod.key)
        failed = self._failing(job) if job is not None else None
        gone = event.old if isinstance(event.old, PodInfo) else event.new
        if job is None or failed is None or failed[0] == pod.key or not isinstance(gone, PodInfo):
            return QueueingHint.QUEUE
        if gone.node_name is None:  # assumed, never bound: released at Permit
            return QueueingHint.SKIP
        ref = job_of(gone)  # by its keys: a deleted member has already left the job book
        return QueueingHint.SKIP if ref is not None and ref.key == job.key else QueueingHint.QUEUE

    def _failing(self, job: Job) -> tuple[PodKey, int] | None:
        """The member `job` was last released for, while it is still to be placed (forgotten once
        it is placed or gone)."""
        failed = self._failed.get(job.key)
        if failed is not None and (failed[0] in job.placed or failed[0] not in job.members):
            del self._failed[job.key]
            return None
        return failed

    def still_rejects(self, pod: PodInfo) -> bool:
        """The member's gang, with nothing placed yet, cannot fit in the cluster's free room now
        (counted once per cluster state for all its members): a retry would fail at PreFilter. Left
        to a cycle while a lower-priority pod is placed, which a preemption might take room from.
        Or it was released for a sibling that found no node, and the cluster has not changed since.
        Or its gang is still split across profiles."""
        job = self._handle.jobs.gang_of(pod.key)
        if job is None:
            return False
        if job.key in self._split:
            if _spans_profiles(job, pod.scheduler_name):
                return True
            self._split.discard(job.key)
        if job.placed or job.awaits_group:
            return False
        failed = self._failing(job)
        if failed is not None and failed[0] != pod.key and failed[1] == self._handle.nodes.change_seq:
            return True  # released for a sibling that found no node on this very cluster
        if len(job.members) != job.minimum or self._handle.pods.any_below(pod.priority):
            return False
        return self._shortfall(job, pod, job.minimum, self._handle.nodes) is not None


def _spans_profiles(job: Job, profile: str) -> bool:
    """Some member of `job` names another profile than `profile` (bound members too)."""
    return any(member.scheduler_name != profile for member in job.members.values())


def _split_words(job: Job) -> str | None:
    """Why a gang whose members name several profiles is refused, else None. Each profile has its
    own plugins, args and state of the job: one could release its members while the other calls
    them back, or bind its own alone (a profile without Coscheduling)."""
    profiles = sorted({member.scheduler_name for member in job.members.values()})  # this process's: from its config
    if len(profiles) < 2:
        return None
    return (
        f"{job.ref.title} has pods of {len(profiles)} scheduler profiles ({', '.join(profiles)}); a gang is "
        "placed by one profile: give all its pods the same schedulerName"
    )


def _elsewhere_words(elsewhere: Mapping[PodKey, str]) -> str:
    """Why members that exist do not count: another scheduler places them (`` (ps-0 names
    schedulerName default-scheduler ...)``), or "" when none does."""
    if not elsewhere:
        return ""
    first, scheduler = min(elsewhere.items())
    others = f" and {len(elsewhere) - 1} more of its pods name" if len(elsewhere) > 1 else " names"
    return (
        f" ({first.partition('/')[2]}{others} schedulerName {scheduler}: a gang is placed by one scheduler, "
        "give all its pods this one's)"
    )


def _may_preempt(job: Job, pod: PodInfo) -> bool:
    """Every member still to place may preempt (none says `preemptionPolicy: Never`): only then
    is what lower-priority pods hold room the gang can count on."""
    return all(preemption_policy(member) != PREEMPT_NEVER for member in (pod, *job.unplaced()))


def _lowest_priority(job: Job, pod: PodInfo) -> int:
    """The lowest priority among the job's members still to place (`pod` among them)."""
    return min((member.priority for member in job.unplaced()), default=pod.priority)


def _shortfall(job: Job, pod: PodInfo, needed: int, nodes: NodeTable, reclaimable: np.ndarray | None) -> str | None:
    """What the job lacks (`needs 4 more x (cpu 4000), the cluster has room for 3`) when the free
    room, with what lower-priority pods hold (`reclaimable`: preemption may evict them), cannot
    hold the members still to be placed, else None. When every member must be placed, each shape among them
    is counted (a parameter server's small request must not vouch for its workers); otherwise
    `needed` pods of this member's shape when every member still to place has it, and this member
    alone when they differ (which of them make up the minimum is not known: counting this one's
    shape `needed` times refused a job of a 3-CPU and two 1-CPU members that fit two of them)."""
    groups: dict[tuple[tuple[str, int], ...], list[PodInfo]] = {}
    unplaced = list(job.unplaced())
    if needed == len(job.members) - len(job.placed):
        for member in unplaced:
            groups.setdefault(tuple(sorted(member.requests.items())), []).append(member)
    elif all(member.requests == pod.requests for member in unplaced):
        groups[()] = [pod] * needed
    else:
        groups[()] = [pod]
    for members in groups.values():
        room = room_for(nodes, nodes.request_shape(members[0].requests), reclaimable)
        if room < len(members):
            return f"needs {len(members)} more x ({_shape(members[0])}), the cluster has room for {room}"
    if len(groups) > 1:  # each shape may fit alone where all of them together do not
        wanted: dict[str, int] = {}
        for members in groups.values():
            for name, value in members[0].requests.items():
                wanted[name] = wanted.get(name, 0) + value * len(members)
        lacking = short_in_total(nodes, wanted, reclaimable)
        if lacking is not None:
            name, want, have = lacking
            return f"needs {name} {want} in all for its {needed} pods still to place, the cluster has {have} free"
    return None


def _disagreement(pod: PodInfo, job: Job) -> str:
    """The job's deadline and steps are one: a member whose value differs from another's is told
    (the job follows its rank 0, the member reporting progress)."""
    for key in (DEADLINE, TOTAL_STEPS):
        mine = pod.annotations.get(key)
        if mine is None:
            continue
        for other_key, other in job.members.items():
            theirs = other.annotations.get(key)
            if other_key != pod.key and theirs is not None and theirs != mine:
                return (
                    f"{key}: {clip(mine)} here but {clip(theirs)} on {other.name} of the same job; "
                    "the job follows its rank 0 (the pod reporting progress)"
                )
    return ""


def _shape(pod: PodInfo) -> str:
    return ", ".join(f"{name} {value}" for name, value in sorted(pod.requests.items()) if value) or "no requests"


def factory(args: CoschedulingArgs, handle: Handle) -> Coscheduling:
    return Coscheduling(args, handle)


SPEC = PluginSpec(NAME, CoschedulingArgs, factory, Coscheduling)
