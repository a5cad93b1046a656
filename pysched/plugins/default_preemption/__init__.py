"""DefaultPreemption (postFilter): when no node fits, delete the fewest lower-priority pods on one
node so that the pod fits there, as kube-scheduler's DefaultPreemption does; among the nodes kube
finds equally good, prefer best-effort victims, then deadline victims with the most slack.

The engine lends it dry runs of the profile's filters on one node (`Handle.preemption`); the
victims are deleted and the preemptor nominated through the backend, off the scheduling cycle.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pysched.api.disruption import (
    PREEMPT_NEVER,
    PREEMPTION_BY_SCHEDULER,
    nominated_node,
    preemption_policy,
    terminating_by_preemption,
)
from pysched.api.ids import NodeName
from pysched.api.objects import PodInfo
from pysched.framework.cluster import PodCondition
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import EventRegistration
from pysched.framework.interfaces import Diagnosis, Handle
from pysched.framework.registry import ArgsError, PluginSpec, check_range
from pysched.framework.status import SUCCESS, Status, unschedulable
from pysched.plugins.default_preemption.victims import Candidate, pick, select_victims

NAME = "DefaultPreemption"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    """kube-scheduler's DefaultPreemptionArgs: how many candidate nodes a dry run looks for
    (at least this share of the potential nodes, and at least this many)."""

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    def validate(self) -> None:
        check_range(self, "min_candidate_nodes_percentage", 0, 100)
        check_range(self, "min_candidate_nodes_absolute", 0, 2**31 - 1)
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise ArgsError("minCandidateNodesAbsolute", "may not be 0 when minCandidateNodesPercentage is 0")


class DefaultPreemption:
    NAME: ClassVar[str] = NAME

    def __init__(self, args: DefaultPreemptionArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def events_to_register(self) -> Sequence[EventRegistration]:
        return ()  # it never rejects a pod: the filters that did say when to try again

    def _candidates_wanted(self, potential: int) -> int:
        wanted = potential * self.args.min_candidate_nodes_percentage // 100
        return min(max(wanted, self.args.min_candidate_nodes_absolute), potential)

    def eligible(self, pod: PodInfo, diagnosis: Diagnosis) -> str | None:
        """Why the pod may not preempt (kube's PodEligibleToPreemptOthers), or None."""
        if preemption_policy(pod) == PREEMPT_NEVER:
            return NEVER
        nodes = self.handle.nodes
        nominated = self.handle.preemption.nominated(pod.key) or nominated_node(pod)
        row = nodes.row.get(NodeName(nominated)) if nominated else None
        if row is None:
            return None
        rows = diagnosis.resolvable_rows
        if rows is not None and row < rows.shape[0] and not rows[row]:
            # rejected as unresolvable there (or it fits there now): it may preempt elsewhere
            return None
        for other in self.handle.pods.on_row(row):
            if other.priority < pod.priority and terminating_by_preemption(other):
                return TERMINATING
        return None

    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        problem = self.eligible(pod, diagnosis)
        if problem is not None:
            return unschedulable(f"preemption: {problem}", plugin=NAME)
        rows = diagnosis.resolvable_rows
        potential = [] if rows is None else [int(r) for r in np.flatnonzero(rows)]
        candidates, refused, told = self._find_candidates(state, pod, potential)
        now = self.handle.clock.now()
        best = pick(candidates, now, self.handle.cluster.progress)
        if best is None:
            total = diagnosis.total_nodes
            parts = [f"{count} {reason}" for reason, count in refused.items()]
            if total - told:
                parts.append(f"{total - told} {NOT_HELPFUL}")
            self._clear_nomination(pod)
            return unschedulable(f"preemption: 0/{total} nodes are available: {', '.join(sorted(parts))}.", plugin=NAME)
        self._prepare(pod, best)
        return SUCCESS

    def _find_candidates(
        self, state: CycleState, pod: PodInfo, rows: list[int]
    ) -> tuple[list[Candidate], collections.Counter[str], int]:
        """kube's dry run in row order (kube starts at a random offset): stops once it has the
        number of candidates wanted and at least one without budget violations. Also why the
        nodes that are no candidate are not (kube's node statuses: no victims, or the reasons of
        the filter that still refuses the pod with every victim gone) and how many such nodes."""
        refused: collections.Counter[str] = collections.Counter()
        if not rows:
            return [], refused, 0
        if not self.handle.pods.any_below(pod.priority):
            told = sum(1 for row in rows if self.handle.nodes.names[row] is not None)
            if told:
                refused[NO_VICTIMS] = told
            return [], refused, told
        wanted = self._candidates_wanted(len(rows))
        budgets = self.handle.cluster.disruption_budgets()
        preemption, nodes, now = self.handle.preemption, self.handle.nodes, self.handle.clock.now()
        clean: list[Candidate] = []
        violating: list[Candidate] = []
        told = 0
        for row in rows:
            name = nodes.names[row]
            if name is None:
                continue
            potential = [
                other
                for other in self.handle.pods.on_row(row)
                if other.priority < pod.priority and preemption.nominated(other.key) is None
            ]
            if not potential:
                refused[NO_VICTIMS] += 1
                told += 1
                continue
            run = preemption.dry_run(state, pod, row)
            try:
                chosen = select_victims(potential, budgets, run, now)
                reasons = run.refusal() if chosen is None else ()  # with every victim still gone
            finally:
                run.close()
            if reasons:
                refused.update(reasons)
                told += 1
            if chosen is None or not chosen[0]:
                continue
            victims, violations = chosen
            if not violations:
                clean.append(Candidate(name, row, tuple(victims), violations))
            elif len(violating) < wanted:  # kube keeps as many of each kind as it looks for
                violating.append(Candidate(name, row, tuple(victims), violations))
            if clean and len(clean) + len(violating) >= wanted:
                break
        return clean + violating, refused, told

    def _clear_nomination(self, pod: PodInfo) -> None:
        if self.handle.preemption.nominated(pod.key) is not None or nominated_node(pod) is not None:
            self.handle.preemption.nominate(pod, None)
            self.handle.tasks.spawn(self._write_nomination(pod, None))

    def _prepare(self, pod: PodInfo, best: Candidate) -> None:
        """Nominate the preemptor at once (its room is held from now on), drop lower-priority
        nominations on that node, then delete the victims and write the nomination."""
        preemption = self.handle.preemption
        preemption.nominate(pod, best.node)
        lower = [p for p in preemption.nominated_on(best.node) if p.priority < pod.priority and p.key != pod.key]
        for other in lower:
            preemption.nominate(other, None)
        self.handle.tasks.spawn(self._evict(pod, best, lower))

    def _placed_on(self, victim: PodInfo, node: NodeName) -> bool:
        """The victim still counts on `node`: bound there, or assumed (waiting at Permit, binding)."""
        row = self.handle.nodes.row.get(node)
        pods = self.handle.pods
        if row is None or pods.held(victim.key):
            return False
        return any(other.key == victim.key and other.uid == victim.uid for other in pods.on_row(row))

    async def _write_nomination(self, pod: PodInfo, node: NodeName | None) -> None:
        await self.handle.cluster.set_nominated_node(pod, node)

    async def _evict(self, pod: PodInfo, best: Candidate, lower: Sequence[PodInfo]) -> None:
        cluster = self.handle.cluster
        for victim in best.victims:
            if victim.deleting:
                continue  # being deleted already: no second deletion, and no event (kube's)
            if not self._placed_on(victim, best.node):
                # Its room is free already: a member waiting at Permit whose gang this loop's
                # first rejection released (unreserved, back in the queue, never ran), or a pod
                # gone since. Deleting it would evict a pod that holds nothing there.
                continue
            waiting = self.handle.waiting_pods.get(victim.key)
            if waiting is not None and waiting.pod.uid == victim.uid:
                waiting.reject(NAME, "preempted")
            else:
                message = f"{pod.scheduler_name}: preempting to accommodate a higher priority pod"
                condition = PodCondition("DisruptionTarget", "True", PREEMPTION_BY_SCHEDULER, message)
                # Not deleted without it, as kube's: the victim's Job tells a preemption from a
                # failure by it (podFailurePolicy), so a victim without it counts as failed.
                status = await cluster.patch_pod_conditions(victim, condition)
                if status.ok:
                    status = await cluster.delete_preempted(victim)
                if not status.ok:
                    continue
            await cluster.emit_event(victim, "Normal", "Preempted", f"Preempted by pod {pod.uid} on node {best.node}")
        for other in lower:
            await cluster.set_nominated_node(other, None)
        await cluster.set_nominated_node(pod, best.node)


def factory(args: DefaultPreemptionArgs, handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(args, handle)


SPEC = PluginSpec(NAME, DefaultPreemptionArgs, factory, DefaultPreemption)
