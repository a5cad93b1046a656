"""DeadlineLaxity: deadline-aware queue order and admission.

QueueSort: pod priority first (as kube-scheduler); within a priority, deadline jobs before
best-effort ones, least laxity first among deadline jobs, ties by creation time. Laxity is
`deadline - now - remaining`, with `remaining` the predicted run time at the planned (requested)
configuration (for a gang, its first worker's, the steps shared by its workers). Every queued
pod shares the same `now`, so the key is `deadline - remaining`: it does not age, and keys
computed at different times compare correctly. A one-pod job of a kind that ran before (the same
images and total steps; `history.py`) is predicted from those runs, timed from PostBind to their
end; any other job from the generic prior. A key is computed when the pod enters the active
queue, so what the history learns meanwhile applies from the pod's next entry.

PreEnqueue (admission): never gates a pod. A malformed `pysched.io/*` value gets an
`InvalidAnnotation` Warning event (key, value, accepted forms) and reads as absent. A deadline job
that cannot meet its deadline even at `pysched.io/cpu-max` is demoted to best-effort with a
`DeadlineInfeasible` Warning event and a `pysched.io/Deadline` condition that records the
demotion, so that a new leader keeps it demoted (the condition is read back from the pod).

`deadlineNamespaces` (a label selector on namespaces, e.g. `{matchLabels: {pysched.io/deadlines:
allowed}}`) restricts who may use deadlines, so that nobody jumps the queue merely by writing one:
a deadline pod in a namespace the selector does not match (or one the backend does not know) is
ordered as best-effort, with one `DeadlineNotAllowed` Warning event per pod saying why. Unset: every
namespace may. A namespace relabelled later applies to pods ordered after the change.

What it remembers per pod (demotions, warnings given, refusals) is dropped when the pod is deleted
(`pod_deleted`) or terminates (`pod_terminated`: it never returns to the queue), so memory follows
the live pods, not every pod ever seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pysched.api.annotations import (
    cpu_max_of,
    deadline_of,
    total_steps_of,
)
from pysched.api.ids import NodeName, PodKey, PodUID
from pysched.api.jobs import NO_ORDER, ROLE_LABEL
from pysched.api.labels import selector_problem
from pysched.api.objects import PodInfo
from pysched.api.resources import CPU
from pysched.deadline.annotation_warnings import AnnotationWarnings
from pysched.deadline.condition import (
    CONDITION,
    DEMOTED_REASON,
    ON_TRACK_REASON,
    clock_words,
    demoted_by_condition,
    duration_words,
)
from pysched.deadline.predictor import prior_step_ratio
from pysched.framework.cluster import PodCondition, namespace_selected
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle, QueuedPod
from pysched.framework.registry import MAX_ARGS_SECONDS, ArgsError, PluginSpec, check_range
from pysched.framework.status import SUCCESS, Status
from pysched.plugins.deadline_laxity.history import RunHistory

NAME = "DeadlineLaxity"
NOT_ALLOWED_REASON = "DeadlineNotAllowed"

DEADLINE_CLASS = 0
BEST_EFFORT_CLASS = 1
MAX_HISTORY_SAMPLES = 1024


@dataclass(frozen=True, slots=True)
class DeadlineLaxityArgs:
    # Generic prior for a job never observed: seconds per step on one CPU. 0 means "unknown":
    # remaining time then counts as 0 (laxity = time to the deadline) and only a deadline already
    # past is infeasible. The scheduler never reads the model catalogue.
    prior_step_seconds: float = 0.0
    # Finished runs kept per kind of job (same images, same total steps) to predict a rerun from;
    # 0: every job is predicted from the generic prior.
    history_samples: int = 16
    # Label selector on namespaces allowed to use deadlines; None: every namespace may.
    deadline_namespaces: Mapping[str, Any] | None = None

    def validate(self) -> None:
        check_range(self, "prior_step_seconds", 0, MAX_ARGS_SECONDS)
        check_range(self, "history_samples", 0, MAX_HISTORY_SAMPLES)
        if self.deadline_namespaces is not None:
            problem = selector_problem(self.deadline_namespaces)
            if problem is not None:
                raise ArgsError("deadlineNamespaces", problem)


@dataclass(slots=True)
class DeadlineLaxity:
    NAME: ClassVar[str] = NAME
    args: DeadlineLaxityArgs
    handle: Handle
    # Pods demoted, each for the deadline it had then; and pods whose `DeadlineInfeasible`
    # condition is for an earlier deadline (the user moved it, and the new one can be met).
    _demoted: dict[PodKey, tuple[PodUID, float]] = field(default_factory=dict)
    _promoted: dict[PodKey, tuple[PodUID, float]] = field(default_factory=dict)
    _refused: set[PodUID] = field(default_factory=set)  # deadline pods told their namespace may not
    # One-pod jobs judged feasible: (the pod as judged, its fastest run time, its deadline, the
    # history's version then). Judged again only when one of them changes or time runs out: a
    # pod is judged at each return to the queue and each sort, and most stay feasible.
    _feasible: dict[PodKey, tuple[PodInfo, float, float, int]] = field(default_factory=dict)
    history: RunHistory | None = None  # set by the factory when `history_samples` > 0
    warnings: AnnotationWarnings = field(init=False)

    def __post_init__(self) -> None:
        self.warnings = AnnotationWarnings(self.handle)

    def remaining(self, pod: PodInfo, cpu_milli: int, workers: int = 1) -> float:
        """Predicted run time at `cpu_milli` a worker, `workers` of them sharing the steps (a
        gang's total steps are global steps): from earlier runs of a one-pod job's kind, else
        under the prior; 0 when unknown."""
        total = total_steps_of(pod)
        if total is None or cpu_milli <= 0:
            return 0.0
        per_step = self.args.prior_step_seconds
        if self.history is not None and workers == 1 and self.handle.jobs.gang_of(pod.key) is None:
            per_step = self.history.step_seconds(pod) or per_step
        if per_step <= 0:
            return 0.0
        return total * per_step * prior_step_ratio(cpu_milli / 1000) / workers

    def pace(self, pod: PodInfo) -> tuple[PodInfo, int]:
        """Whose resources set the job's pace, and how many workers share its steps: the pod
        itself alone, or for a gang its first worker and the workers (parameter servers, role
        `ps`, hold no steps), so that every member of a job is ordered and judged alike."""
        gang = self.handle.jobs.gang_of(pod.key)
        if gang is None:
            return pod, 1
        workers = [m for m in gang.members.values() if m.labels.get(ROLE_LABEL) != "ps"]
        if not workers:
            return pod, 1
        return min(workers, key=lambda m: (gang.orders.get(m.key, NO_ORDER), m.key)), len(workers)

    def is_demoted(self, pod: PodInfo) -> bool:
        """Demoted for the deadline it has now (a moved deadline is judged again). The deadline is
        read only for a pod with a record: this is asked at every sort of every pod."""
        mine = self._demoted.get(pod.key)
        if mine is not None and mine[0] == pod.uid:
            return mine[1] == deadline_of(pod)
        promoted = self._promoted.get(pod.key)
        if promoted is not None and promoted == (pod.uid, deadline_of(pod)):
            return False  # its condition still speaks of the deadline before
        return demoted_by_condition(pod)

    def deadline_allowed(self, pod: PodInfo) -> bool:
        """The pod's namespace may use deadlines (`deadlineNamespaces`); says why once when not."""
        if namespace_selected(self.handle.cluster, self.args.deadline_namespaces, pod.namespace):
            return True
        if pod.uid not in self._refused and deadline_of(pod) is not None:
            self._refused.add(pod.uid)
            note = (
                f"namespace {pod.namespace} does not match this profile's deadlineNamespaces: "
                "the deadline is ignored and the pod is scheduled as best-effort"
            )
            self.handle.tasks.spawn(self.handle.cluster.emit_event(pod, "Warning", NOT_ALLOWED_REASON, note))
        return False

    def sort_key(self, queued: QueuedPod) -> tuple[Any, ...]:
        pod = queued.pod
        judges = self._judges(pod)
        if judges:
            self.judge(pod)  # a deadline may have become infeasible while the pod waited
        deadline = deadline_of(pod)
        allowed = (
            self.deadline_allowed(pod)
            if judges
            else namespace_selected(self.handle.cluster, self.args.deadline_namespaces, pod.namespace)
        )
        if deadline is None or self.is_demoted(pod) or not allowed:
            return (-pod.priority, BEST_EFFORT_CLASS, 0.0, pod.created, queued.added, pod.key)
        worker, workers = self.pace(pod)
        key = deadline - self.remaining(worker, worker.requests.get(CPU, 0), workers)
        return (-pod.priority, DEADLINE_CLASS, key, pod.created, queued.added, pod.key)

    def _judges(self, pod: PodInfo) -> bool:
        """Whether this instance judges the pod: its own profile's. Sharing the queue, it orders
        the other profiles' pods too; those are judged by their own profile's DeadlineLaxity
        (at PreEnqueue, with that profile's run history), and told once."""
        return not self.handle.profile or pod.scheduler_name == self.handle.profile

    def pre_enqueue(self, pod: PodInfo) -> Status:
        self.warnings.check(pod)
        self.judge(pod)
        return SUCCESS  # admission demotes, it never gates: a demoted job still runs when there is room

    def judge(self, pod: PodInfo) -> None:
        """Demote a pending deadline job that cannot make it even at cpu-max (under the prior)."""
        now = self.handle.clock.now()
        known = self._feasible.get(pod.key)
        if known is not None:
            judged, known_fastest, known_deadline, version = known
            if (
                judged is pod
                and now + known_fastest <= known_deadline
                and version == self._history_version()
                and self.handle.jobs.gang_of(pod.key) is None
            ):
                return  # nothing it was judged on changed, and there is still time
            del self._feasible[pod.key]
        deadline = deadline_of(pod)
        if deadline is None or self.is_demoted(pod) or not self.deadline_allowed(pod):
            return
        worker, workers = self.pace(pod)
        cpu_max = cpu_max_of(worker) or worker.requests.get(CPU, 0)
        fastest = self.remaining(worker, max(cpu_max, worker.requests.get(CPU, 0)), workers)
        if now + fastest <= deadline:
            if worker is pod:
                self._feasible[pod.key] = (pod, fastest, deadline, self._history_version())
            mine = self._demoted.pop(pod.key, None)
            was_demoted = (mine is not None and mine[0] == pod.uid) or demoted_by_condition(pod)
            if was_demoted and self._promoted.get(pod.key) != (pod.uid, deadline):  # told once
                self._promote(pod, deadline, fastest, now)
            return
        self._demoted[pod.key] = (pod.uid, deadline)
        self._promoted.pop(pod.key, None)
        if deadline <= now:
            why = f"the deadline passed {duration_words(now - deadline)} ago ({clock_words(deadline, now)})"
        else:
            why = _against(deadline, fastest, now, "cannot be met")
        note = f"{why}: demoted to best-effort; it still runs when there is room"
        self.handle.tasks.spawn(self.handle.cluster.emit_event(pod, "Warning", DEMOTED_REASON, note))
        self.handle.tasks.spawn(
            self.handle.cluster.patch_pod_conditions(pod, PodCondition(CONDITION, "False", DEMOTED_REASON, note))
        )

    def _promote(self, pod: PodInfo, deadline: float, fastest: float, now: float) -> None:
        """Its deadline was moved to one it can meet: a deadline job again, and its condition says so."""
        self._promoted[pod.key] = (pod.uid, deadline)
        note = _against(deadline, fastest, now, "can be met")
        self.handle.tasks.spawn(
            self.handle.cluster.patch_pod_conditions(pod, PodCondition(CONDITION, "True", ON_TRACK_REASON, note))
        )

    def _history_version(self) -> int:
        return -1 if self.history is None else self.history.version

    def post_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        """A one-pod job starts: time its run (gang members run at their gang's pace)."""
        if self.history is not None and self.handle.jobs.gang_of(pod.key) is None:
            self.history.bound(pod)

    def pod_deleted(self, pod: PodInfo) -> None:
        """Forget the pod. By key only while the key still names this pod: a pod recreated under
        the same name (a new uid) may be known before the old one's deletion arrives."""
        for book in (self._demoted, self._promoted):
            if (book.get(pod.key) or ("",))[0] == pod.uid:
                del book[pod.key]
        known = self._feasible.get(pod.key)
        if known is not None and known[0].uid == pod.uid:
            del self._feasible[pod.key]
        self.warnings.forget(pod)
        self._refused.discard(pod.uid)
        if self.history is not None:
            self.history.forget(pod)

    def pod_terminated(self, pod: PodInfo) -> None:
        if self.history is not None:
            self.history.ended(pod)
        self.pod_deleted(pod)  # a pod that ended never returns to the queue


def _against(deadline: float, fastest: float, now: float, verdict: str) -> str:
    """A deadline still ahead against the job's fastest run, in words."""
    when = f"{duration_words(deadline - now)} ({clock_words(deadline, now)})"
    return f"the deadline in {when} {verdict}: it takes {duration_words(fastest)} at its most CPUs"


def factory(args: DeadlineLaxityArgs, handle: Handle) -> DeadlineLaxity:
    plugin = DeadlineLaxity(args, handle)
    if args.history_samples > 0:
        plugin.history = RunHistory(handle.clock, args.history_samples)
    handle.pod_lifecycle.on_terminated(plugin.pod_terminated)
    handle.pod_lifecycle.on_deleted(plugin.pod_deleted)
    return plugin


SPEC = PluginSpec(NAME, DeadlineLaxityArgs, factory, DeadlineLaxity)
