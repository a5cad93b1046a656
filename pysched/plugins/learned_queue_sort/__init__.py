"""LearnedQueueSort: a learned policy picks which of the first pods in the queue goes next.

The queue keeps PrioritySort's order (priority, then creation), which never changes while a pod
waits. When the queue pops, the plugin reads the first `window` pods of the top priority as
feature rows (`pysched.deadline.features`), scores each with the network of its weights file
(`pysched.deadline.scorer`, numpy only) and schedules the best; the others keep their places. A
gang whose first members are already placed is finished before anything else is picked. A pod
unlike any the policy was trained on (outside its file's `trained_on`: a GPU job for a policy
trained on CPU jobs) is not scored: it keeps its place in the window's order and goes when it is
the first that fits, and the network orders the other pods among themselves.

The training environments (`pysched.learn`) run this same plugin with `agent` set, so the policy
that is trained is the one that is deployed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from pysched.api.annotations import cpu_max_of, deadline_of, total_steps_of
from pysched.api.ids import PodKey
from pysched.api.labels import selector_problem
from pysched.api.limits import clip
from pysched.api.objects import PodInfo
from pysched.api.resources import CPU, GPU
from pysched.deadline.condition import demoted_by_condition
from pysched.deadline.features import Waiting, static_values, window_rows
from pysched.deadline.scorer import MAX_WINDOW, PolicyFileError, Scorer, WindowBuffers, policy_at
from pysched.framework.cluster import namespace_selected
from pysched.framework.interfaces import Handle, QueuedPod
from pysched.framework.registry import MAX_ARGS_SECONDS, ArgsError, PluginSpec, check_range
from pysched.plugins.learned_queue_sort.fixed import FixedRows
from pysched.plugins.learned_queue_sort.room import ClusterRoom

NAME = "LearnedQueueSort"
BUILTIN = "builtin"  # the policy shipped beside this file
BY_CREATION, BY_DEADLINE = "creation", "deadline"
WINDOW_ORDERS = (BY_CREATION, BY_DEADLINE)
BUILTIN_PATH = Path(__file__).with_name("policy.json")

# (feature rows, which rows may be picked, the pods): the row to pick. Set by a training environment.
Agent = Callable[[np.ndarray, np.ndarray, Sequence[QueuedPod]], int]


def queue_policy(weights: str) -> Scorer:
    """The scorer of a weights file (`builtin`: the shipped one), read once per file version."""
    return policy_at(str(BUILTIN_PATH) if weights == BUILTIN else weights)


@dataclass(frozen=True, slots=True)
class LearnedQueueSortArgs:
    weights: str = BUILTIN  # a weights file (JSON), or the shipped policy
    window: int = 0  # pods the policy chooses among; 0: the largest the file supports
    # Seconds per step on one CPU assumed for a job never observed (as DeadlineLaxity's); 0: unknown.
    prior_step_seconds: float = 0.0
    # Which pods form the window: the first by creation, or by deadline (best-effort last). Both
    # keys are fixed while a pod waits.
    window_order: str = BY_CREATION
    # Namespaces whose deadlines count (a label selector, as DeadlineLaxity's); elsewhere a deadline
    # pod is ordered and scored as best-effort. None: every namespace.
    deadline_namespaces: Mapping[str, Any] | None = None

    def validate(self) -> None:
        check_range(self, "window", 0, MAX_WINDOW)
        check_range(self, "prior_step_seconds", 0, MAX_ARGS_SECONDS)
        if self.deadline_namespaces is not None:
            problem = selector_problem(self.deadline_namespaces)
            if problem is not None:
                raise ArgsError("deadlineNamespaces", problem)
        if self.window_order not in WINDOW_ORDERS:
            raise ArgsError("windowOrder", f"one of {', '.join(WINDOW_ORDERS)}, got {clip(self.window_order)}")
        try:
            scorer = queue_policy(self.weights)
        except PolicyFileError as err:
            raise ArgsError("weights", str(err)) from None
        if self.window > scorer.window:
            raise ArgsError("window", f"{self.window} is more than the {scorer.window} pods its weights file supports")


@dataclass(slots=True)
class LearnedQueueSort:
    NAME: ClassVar[str] = NAME
    args: LearnedQueueSortArgs
    handle: Handle
    scorer: Scorer
    window: int
    agent: Agent | None = None
    _fixed: FixedRows = field(default_factory=FixedRows)  # the waiting pods' fixed rows
    _room: ClusterRoom = field(default_factory=ClusterRoom)
    _deadlines: dict[PodKey, tuple[PodInfo, float | None]] = field(default_factory=dict)  # by pod version
    _buffers: WindowBuffers = field(init=False)

    def __post_init__(self) -> None:
        self._buffers = WindowBuffers.of(max(1, self.window))  # the queue offers at most `window` pods
        # A picked pod may be refused and come back: its row is kept until the pod ends.
        self.handle.pod_lifecycle.on_terminated(self._forget)
        self.handle.pod_lifecycle.on_deleted(self._forget)
        self.handle.pod_lifecycle.on_sorted_gone(self._forget)

    def _forget(self, pod: PodInfo) -> None:
        self._fixed.drop(pod.key)
        self._deadlines.pop(pod.key, None)

    def sort_key(self, queued: QueuedPod) -> tuple[Any, ...]:
        pod = queued.pod
        if self.args.window_order == BY_DEADLINE:
            deadline = self._deadline(pod)
            return (-pod.priority, math.inf if deadline is None else deadline, pod.created, queued.added, pod.key)
        return (-pod.priority, pod.created, queued.added, pod.key)

    def pick(self, candidates: Sequence[QueuedPod]) -> int:
        head = candidates[0].pod
        gang = self.handle.jobs.gang_of(head.key)
        if gang is not None and gang.placed:
            return 0  # its first members hold room at Permit: the rest of the gang goes first
        if self.agent is not None:
            features, allowed, count = self.features(candidates)
            # With one pod that fits (or none) there is nothing to choose.
            chosen = self.agent(features, allowed, candidates) if count > 1 else int(np.argmax(allowed))
        else:
            view = self._room
            view.refresh(self.handle.nodes)
            index = self._fixed.index(candidates, self._read, self._stamp)
            if index.shape[0] > self._buffers.allowed.shape[0]:  # `window` widened: the compiled pick never checks
                self._buffers = WindowBuffers.of(index.shape[0])
            chosen = self.scorer.pick_window(
                self._fixed.matrix, index, self.handle.clock.now(), view.shares, view.most, self._buffers
            )
        return chosen

    def features(self, candidates: Sequence[QueuedPod]) -> tuple[np.ndarray, np.ndarray, int]:
        """The window's feature rows, which rows may be picked (the head's priority, room on some
        node for their CPUs and GPUs), and how many may."""
        view = self._room
        view.refresh(self.handle.nodes)
        index = self._fixed.index(candidates, self._read, self._stamp)  # first: it may grow the matrix
        return window_rows(self._fixed.matrix, index, view.shares, self.handle.clock.now(), view.most)

    def _read(self, pod: PodInfo) -> list[float]:
        return static_values(self._waiting(pod), self.args.prior_step_seconds)

    @property
    def _stamp(self) -> Callable[[PodInfo], Hashable] | None:
        """What a pod's row depends on beyond the pod: its deadline, where namespaces' labels
        decide whether it counts (they may change while it waits)."""
        return None if self.args.deadline_namespaces is None else self._deadline

    def _deadline(self, pod: PodInfo) -> float | None:
        """The pod's deadline, None when it has none, was demoted, or its namespace may not."""
        if self.args.deadline_namespaces is not None:  # namespaces' labels may change: asked each time
            return self._read_deadline(pod)
        known = self._deadlines.get(pod.key)
        if known is not None and known[0] is pod:
            return known[1]  # a pod is sorted at each return to the queue
        deadline = self._read_deadline(pod)
        self._deadlines[pod.key] = (pod, deadline)
        return deadline

    def _read_deadline(self, pod: PodInfo) -> float | None:
        deadline = deadline_of(pod)
        if deadline is None or demoted_by_condition(pod):
            return None
        if not namespace_selected(self.handle.cluster, self.args.deadline_namespaces, pod.namespace):
            return None
        return deadline

    def _waiting(self, pod: PodInfo) -> Waiting:
        deadline = self._deadline(pod)
        gang = self.handle.jobs.gang_of(pod.key)
        cpus = pod.requests.get(CPU, 0) / 1000
        most = cpu_max_of(pod)
        return Waiting(
            created=pod.created,
            deadline=deadline,
            total_steps=total_steps_of(pod),
            cpus=cpus,
            cpus_max=cpus if most is None else most / 1000,
            gpus=pod.requests.get(GPU, 0),
            workers=1 if gang is None else max(1, len(gang.members)),
            priority=pod.priority,
        )


def factory(args: LearnedQueueSortArgs, handle: Handle) -> LearnedQueueSort:
    scorer = queue_policy(args.weights)
    return LearnedQueueSort(args, handle, scorer, args.window or scorer.window)


SPEC = PluginSpec(NAME, LearnedQueueSortArgs, factory, LearnedQueueSort)
