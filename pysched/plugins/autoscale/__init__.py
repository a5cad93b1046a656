"""Autoscale: in-place CPU (and optionally memory) autoscaling for deadline jobs.

- preBind: a pending pod gets the smallest CPU count that meets its deadline, within what is
  free on the chosen node, before it binds: from the job's model when the predictor knows it (a
  recreated pod, a pod seen by this scheduler before), else from the profile's generic prior
  (`priorStepSeconds` on one CPU, the predictor's 5%-serial curve, `priorUncertainty` wide).
  With no prior configured a never-observed job keeps its request: nothing is known of its speed.
- postBind: the run starts now with the bound CPUs (observed as 0 steps, so the first progress
  report already measures a step time).
- reconcile (every `intervalSeconds`): for each running deadline job, feed `pysched.io/progress`
  to the predictor and choose the smallest whole CPU count whose predicted remaining time (upper
  edge of the band, times `1 + safetyMargin`) ends by the deadline. Up when the current count is
  at risk and the node has headroom, at most `maxStepFactor` times the current count per step
  (the predictor extrapolates badly far beyond measured counts); down when the smaller count
  still leaves `downSlack` of the time left (hysteresis); never within `cooldownSeconds` of the
  last rescale. A job on track is looked at again after half its predicted slack (at most
  `reviewMaxSeconds`), one no count saves after `reviewMaxSeconds`; one that wants CPUs, and the
  jobs on its node, at every reconcile. A node's room goes to its jobs earliest deadline first, and a job above its own
  share, or one no count saves, gives CPUs to one that can still be saved (`deadline.shares`).
  A container that restarts on a CPU resize (`resizePolicy: RestartContainer`) loses its
  progress: the choice then counts the whole run again plus `restartSeconds`.
- The `pysched.io/State` condition (`pysched.deadline.condition`, JSON) carries what a new leader
  needs: the last rescale (cooldown), the speed measured per CPU count (the fitted model) and the
  predicted finish; `pysched.io/Deadline` says the same in words. Both are rewritten when the
  reason changes, when the measurements grow materially (a new count, or twice the steps at one),
  or when the predicted finish moves by more than 5% of the time left (at least a minute): a
  steady job costs no API writes.
- When a deadline job's first pod ends (the leader only), both conditions and an event give its
  verdict, `DeadlineMet` or `DeadlineMissed`; a replica that takes over counts the verdicts on
  the ended pods and judges the jobs that ended while none led.

Metrics (`metric_families`, on `pysched run`'s /metrics with a `profile` label):
`pysched_autoscale_predicted_slack_seconds{namespace,pod,state}` (deadline minus the central
predicted finish at the job's current CPUs, per running deadline job, as of its last look or
rescale, within 30 days either way; state on_track, at_risk or infeasible),
`pysched_autoscale_rescales_total{direction,result}` and `pysched_deadlines_total{result}` (met:
the pod Succeeded by its deadline; missed: it ended later, or Failed).

Bounds: `pysched.io/cpu-min` (default `cpuMin`), `pysched.io/cpu-max` (default the node's
allocatable), `pysched.io/autoscale: "false"`. Only the main container (`pysched.io/container`,
else the first); GPU pods are left alone. A limit scales with its request by the same ratio
(`container_resize`), so the QoS class never changes: a Guaranteed pod stays requests == limits.
Memory stays as requested unless `memory: withCpu`: then a scale-up grows the container's memory
request in proportion to its CPUs (and the node must have that memory free). Memory is never
shrunk: a running process cannot give memory back on demand, and a limit below its usage would
leave the whole resize (CPU included) pending at the kubelet.

LearnedAutoscale is the same plugin with a learned allocation policy in place of the heuristic's
direction: for each job looked at, a step down, keep or a step up, from a row of features that
includes Autoscale's own answer (`pysched.deadline.allocation`); the network runs with numpy and
numba (`Scorer.answers`), and its weights file (`pysched learn train --env allocation`) is checked
when the profile loads. Everything else (which jobs are looked at and when, bounds, the shared
room, steps, cooldown, conditions, events, metrics) is Autoscale's.

This module is the family's face: the extension points hand over to `controller.Controller`,
where the decisions live (as scheduler-plugins' coscheduling plugin over its core package).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

import numpy as np

from pysched.api.ids import NodeName
from pysched.api.objects import PodInfo
from pysched.deadline.predictor import Predictor
from pysched.deadline.scorer import ALLOCATION, PolicyFileError, Scorer, policy_at
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle, MetricFamily
from pysched.framework.registry import ArgsError, PluginSpec
from pysched.framework.status import SUCCESS, Status
from pysched.plugins.autoscale.args import AutoscaleArgs
from pysched.plugins.autoscale.controller import Controller

__all__ = ["LEARNED_NAME", "NAME", "SPECS", "Autoscale", "AutoscaleArgs", "LearnedAutoscale", "LearnedAutoscaleArgs"]

NAME = "Autoscale"
LEARNED_NAME = "LearnedAutoscale"


class Autoscale:
    """preBind, postBind and reconcile, with metrics and the pod lifecycle notices it subscribes to."""

    NAME: ClassVar[str] = NAME
    CLUSTER_PLAN: ClassVar[str] = "CPUs"  # shares nodes' room among its profile's jobs: one profile only

    def __init__(self, args: AutoscaleArgs, handle: Handle) -> None:
        self.args = args
        self.controller = Controller(args, handle)

    @property
    def predictor(self) -> Predictor:
        """The speed models of the running jobs, by pod."""
        return self.controller.predictor

    @property
    def reconcile_interval(self) -> float:
        return self.args.interval_seconds

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        await self.controller.size_before_bind(pod, node)
        return SUCCESS  # a pod that could not be sized binds as submitted: never worse than no autoscaling

    def post_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        self.controller.started(pod)

    async def reconcile(self, pods: Sequence[PodInfo]) -> None:
        await self.controller.reconcile(pods)

    def pod_deleted(self, pod: PodInfo) -> None:
        self.controller.forget(pod)

    def pod_terminated(self, pod: PodInfo) -> None:
        self.controller.ended(pod)

    def metric_families(self) -> list[MetricFamily]:
        return self.controller.metric_families()


@dataclass(frozen=True, slots=True)
class LearnedAutoscaleArgs(AutoscaleArgs):
    weights: str = ""  # an allocation policy's weights file (JSON); required

    def validate(self) -> None:
        AutoscaleArgs.validate(self)
        if not self.weights:
            raise ArgsError("weights", "an allocation policy's weights file is required")
        try:
            policy_at(self.weights, ALLOCATION)
        except PolicyFileError as err:
            raise ArgsError("weights", str(err)) from None


class LearnedAutoscale(Autoscale):
    """Autoscale with a learned allocation policy's answers (see the module's doc)."""

    NAME: ClassVar[str] = LEARNED_NAME

    def __init__(self, args: LearnedAutoscaleArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.policy: Scorer = policy_at(args.weights, ALLOCATION)
        self.controller.agent = self.answers

    def answers(self, rows: np.ndarray, own: np.ndarray) -> np.ndarray:
        return self.policy.answers(rows)


P = TypeVar("P", bound=Autoscale)


def _subscribed(plugin: P, handle: Handle) -> P:
    handle.pod_lifecycle.on_terminated(plugin.pod_terminated)
    handle.pod_lifecycle.on_deleted(plugin.pod_deleted)
    handle.pod_lifecycle.on_taken_over(plugin.controller.taken_over)
    return plugin


def factory(args: AutoscaleArgs, handle: Handle) -> Autoscale:
    return _subscribed(Autoscale(args, handle), handle)


def learned_factory(args: LearnedAutoscaleArgs, handle: Handle) -> LearnedAutoscale:
    return _subscribed(LearnedAutoscale(args, handle), handle)


SPEC = PluginSpec(NAME, AutoscaleArgs, factory, Autoscale)
LEARNED_SPEC = PluginSpec(LEARNED_NAME, LearnedAutoscaleArgs, learned_factory, LearnedAutoscale)
SPECS = (SPEC, LEARNED_SPEC)
