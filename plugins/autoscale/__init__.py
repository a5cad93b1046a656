"""Autoscale: in-place CPU autoscaling for deadline jobs (issue 6 item 5).

- preBind: a pending pod whose job the predictor already knows (a recreated pod, a restarted
  scheduler that observed it before) gets the smallest CPU count that meets its deadline, within
  what is free on the chosen node, before it binds. A job never observed keeps its request: the
  generic prior knows nothing of its step time.
- postBind: the run starts now with the bound CPUs (observed as 0 steps, so the first progress
  report already measures a step time).
- reconcile (every `intervalSeconds`): for each running deadline job, feed `pysched.io/progress`
  to the predictor and choose the smallest whole CPU count whose predicted remaining time (upper
  edge of the band, times `1 + safetyMargin`) ends by the deadline. Up when the current count is
  at risk and the node has headroom, at most `maxStepFactor` times the current count per step
  (the predictor extrapolates badly far beyond measured counts); down when the smaller count
  still leaves `downSlack` of the time left (hysteresis); never within `cooldownSeconds` of the
  last rescale. A container that restarts on a CPU resize (`resizePolicy: RestartContainer`)
  loses its progress: the choice then counts the whole run again plus `restartSeconds`.

Metrics (`metric_families`, on `pysched run`'s /metrics with a `profile` label):
`pysched_autoscale_predicted_slack_seconds{namespace,pod}` (deadline minus the central predicted
finish at the job's current CPUs, per running deadline job, as of the last reconcile),
`pysched_autoscale_rescales_total{direction,result}` and `pysched_deadlines_total{result}` (met:
the pod Succeeded by its deadline; missed: it ended later, or Failed).

Bounds: `pysched.io/cpu-min` (default `cpuMin`), `pysched.io/cpu-max` (default the node's
allocatable), `pysched.io/autoscale: "false"`. Only CPU, only the main container
(`pysched.io/container`, else the first); GPU pods are left alone. A CPU limit scales with the
request by the same ratio (`cpu_resize`), so the QoS class never changes: a Guaranteed pod stays
requests == limits.
"""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from pysched.framework.annotations import (
    CPU_MAX,
    CPU_MIN,
    PROGRESS,
    autoscale_enabled,
    cpu_milli_of,
    deadline_of,
    main_container,
    total_steps_of,
)
from pysched.framework.cluster import PodCondition, cpu_resize
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle, MetricFamily
from pysched.framework.labels import selector_matches, selector_problem
from pysched.framework.registry import ArgsError, PluginSpec
from pysched.framework.status import SUCCESS, Status
from pysched.ids import NodeName, PodKey
from pysched.objects import PodInfo
from pysched.predictor import BAND_Z, JobModel, Predictor, Verdict, candidate_counts, progress_observation
from pysched.resources import CPU, GPU

NAME = "Autoscale"
CONDITION = "pysched.io/Deadline"


@dataclass(frozen=True, slots=True)
class AutoscaleArgs:
    interval_seconds: float = 60.0
    cooldown_seconds: float = 120.0
    safety_margin: float = 0.05  # on top of the prediction band's upper edge
    down_slack: float = 0.3  # scale down only if the smaller count leaves this share of the time left
    max_step_factor: float = 2.0  # at most this times the current CPUs per scale-up
    cpu_min: float = 1.0  # CPUs, when the pod has no pysched.io/cpu-min
    restart_seconds: float = 30.0  # assumed cost of a container restart before steps resume
    band_z: float = 1.0  # standard deviations of the prediction band planned for (predictor: 2 = ~95%)
    # DeadlineLaxity's namespace selector, repeated here (plugins never read each other): a pod whose
    # namespace may not use deadlines is not scaled toward one. None: every namespace may.
    deadline_namespaces: Mapping[str, Any] | None = None

    def validate(self) -> None:
        checks = {
            "intervalSeconds": self.interval_seconds > 0,
            "cooldownSeconds": self.cooldown_seconds >= 0,
            "safetyMargin": self.safety_margin >= 0,
            "downSlack": 0 <= self.down_slack < 1,
            "maxStepFactor": self.max_step_factor > 1,
            "cpuMin": self.cpu_min > 0,
            "restartSeconds": self.restart_seconds >= 0,
            "bandZ": 0 <= self.band_z <= BAND_Z,
        }
        for name, ok in checks.items():
            if not ok:
                raise ArgsError(name, f"out of range: {getattr(self, _snake(name))}")
        if self.deadline_namespaces is not None:
            problem = selector_problem(self.deadline_namespaces)
            if problem is not None:
                raise ArgsError("deadlineNamespaces", problem)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def restarts_on_resize(pod: PodInfo, container: str) -> bool:
    for c in pod.raw.get("spec", {}).get("containers") or ():
        if c.get("name", "") == container:
            return any(
                p.get("resourceName") == CPU and p.get("restartPolicy") == "RestartContainer"
                for p in c.get("resizePolicy") or ()
            )
    return False


_LAST_RESCALE = re.compile(r"lastRescale=(\d+)")


def last_rescale_of(pod: PodInfo) -> float:
    """When the pod was last rescaled, as its `pysched.io/Deadline` condition recorded it (written
    by this plugin, possibly in another leader): the cooldown survives a leader change."""
    for cond in (pod.raw.get("status") or {}).get("conditions") or ():
        if cond.get("type") == CONDITION:
            found = _LAST_RESCALE.search(str(cond.get("message", "")))
            if found:
                return float(found.group(1))
    return -math.inf


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Choice:
    """The smallest count that makes the deadline, with its predicted finish (None: none does)."""

    cpus: float | None
    finish: float  # predicted finish at `cpus`, or at the largest count tried when None


def choose(
    model: JobModel,
    deadline: float,
    now: float,
    current: float,
    lo: float,
    hi: float,
    margin: float,
    restart: bool,
    restart_s: float,
    band_z: float = BAND_Z,
) -> Choice | None:
    """Smallest count in [lo, hi] predicted to finish by the deadline; None when nothing is known
    yet. Moving a restarting container to another count starts its run again."""
    done = model.steps_at(now)
    if done is None:
        return None
    finish = math.inf
    for cpus in candidate_counts(lo, hi):
        est = model.step_estimate(cpus)
        if est is None:
            return None
        moves = cpus != current
        steps = model.total_steps - (0.0 if restart and moves else done)
        remaining = max(0.0, steps) * est.step_seconds * (1 + band_z * est.rel_sigma) * (1 + margin)
        finish = now + remaining + (restart_s if restart and moves else 0.0)
        if finish <= deadline:
            return Choice(cpus, finish)
    return Choice(None, finish)


@dataclass(slots=True)
class _Job:
    cpus: float  # the count the job has run on since the last observation
    last_rescale: float = -math.inf
    restarted_at: float = -math.inf  # observations older than this belong to a lost run
    at_risk: bool = False
    reason: str = ""
    warned: str = ""  # the last progress value warned about (one event per bad value)


@dataclass(slots=True)
class Autoscale:
    NAME: ClassVar[str] = NAME
    args: AutoscaleArgs
    handle: Handle
    predictor: Predictor = field(default_factory=Predictor)
    _jobs: dict[PodKey, _Job] = field(default_factory=dict)
    _planned: dict[PodKey, float] = field(default_factory=dict)  # CPUs chosen at preBind
    _slack: dict[PodKey, float] = field(default_factory=dict)  # seconds, per running deadline job
    _rescales: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    _deadlines: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def reconcile_interval(self) -> float:
        return self.args.interval_seconds

    # ----- bounds and node room
    def _free_milli(self, node: NodeName | None) -> int:
        nodes = self.handle.nodes
        row = nodes.row.get(node) if node else None
        column = nodes.column.get(CPU)
        if row is None or column is None:
            return 0
        return int(nodes.allocatable[row, column] - nodes.requested[row, column])

    def _allocatable_milli(self, node: NodeName | None) -> int:
        nodes = self.handle.nodes
        row = nodes.row.get(node) if node else None
        column = nodes.column.get(CPU)
        if row is None or column is None:
            return 0
        return int(nodes.allocatable[row, column])

    def _bounds(self, pod: PodInfo, node: NodeName | None) -> tuple[float, float]:
        lo = (cpu_milli_of(pod, CPU_MIN) or int(self.args.cpu_min * 1000)) / 1000
        hi = (cpu_milli_of(pod, CPU_MAX) or self._allocatable_milli(node)) / 1000
        return lo, max(lo, hi)

    def _eligible(self, pod: PodInfo) -> str | None:
        """The main container when the pod is ours to scale, else None."""
        if pod.requests.get(GPU, 0) or not autoscale_enabled(pod):
            return None
        if total_steps_of(pod) is None or deadline_of(pod) is None:
            return None
        selector = self.args.deadline_namespaces
        if selector is not None:
            labels = self.handle.cluster.namespace_labels(pod.namespace)
            if labels is None or not selector_matches(selector, labels):
                return None
        return main_container(pod)

    # ----- preBind / postBind
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        container = self._eligible(pod)
        model = self.predictor.get(pod.key)
        deadline = deadline_of(pod)
        if container is None or model is None or deadline is None:
            return SUCCESS
        now = self.handle.clock.now()
        current = pod.requests.get(CPU, 0) / 1000
        lo, hi = self._bounds(pod, node)
        hi = min(hi, current + self._free_milli(node) / 1000)
        choice = choose(model, deadline, now, current, lo, hi, self.args.safety_margin, False, 0.0, self.args.band_z)
        if choice is None or choice.cpus is None or choice.cpus == current:
            return SUCCESS
        status = await self.handle.cluster.resize(pod, {container: cpu_resize(pod, container, int(choice.cpus * 1000))})
        self._count_rescale(current, choice.cpus, status.ok)
        if status.ok:  # a refused resize binds the pod as submitted: never worse than no autoscaling
            self._planned[pod.key] = choice.cpus
        return SUCCESS

    def post_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        total = total_steps_of(pod)
        if total is None:
            return
        now = self.handle.clock.now()
        cpus = self._planned.pop(pod.key, pod.requests.get(CPU, 0) / 1000)
        if cpus <= 0:
            return
        model = self.predictor.job(pod.key, total)
        model.restarted()  # a new run: its steps start from 0 now
        model.observe(0, now, cpus, now)
        self._jobs[pod.key] = _Job(cpus)

    # ----- reconcile
    async def reconcile(self, pods: Sequence[PodInfo]) -> None:
        now = self.handle.clock.now()
        alive = {pod.key for pod in pods}
        for key in [k for k in self._jobs if k not in alive]:
            del self._jobs[key]
            self.predictor.forget(key)
        for key in [k for k in self._slack if k not in alive]:
            del self._slack[key]
        for pod in pods:
            container = self._eligible(pod)
            if container is not None:
                await self._reconcile_one(pod, container, now)

    def _observe(self, pod: PodInfo, job: _Job, total: int, now: float) -> tuple[JobModel, str]:
        """Feed the progress annotation to the model; the problem to warn about, or ""."""
        model = self.predictor.job(pod.key, total)
        value = pod.annotations.get(PROGRESS)
        parsed = progress_observation(value) if value is not None else None
        if parsed is None or parsed[1] < job.restarted_at:
            return model, ""  # absent, malformed (the admission plugin warns) or from a lost run
        steps, at = parsed
        result = model.observe(steps, at, job.cpus, now)
        if result.verdict is Verdict.BACKWARDS:
            # A container restart without checkpoints starts again from 0 (TF 1.x jobs do): a new
            # run, not a lie. The model keeps the speed it measured.
            model.restarted()
            result = model.observe(steps, at, job.cpus, now)
        if result.verdict in (Verdict.FUTURE, Verdict.BEYOND_TOTAL) and value != job.warned:
            job.warned = value or ""
            return model, f"{PROGRESS}: {value!r} ignored: {result.message}"
        return model, ""

    async def _reconcile_one(self, pod: PodInfo, container: str, now: float) -> None:
        total, deadline = total_steps_of(pod), deadline_of(pod)
        if total is None or deadline is None:
            return
        current = pod.requests.get(CPU, 0) / 1000
        job = self._jobs.get(pod.key)
        if job is None:  # bound before we watched it (a new leader): resume what the condition kept
            job = self._jobs[pod.key] = _Job(current, last_rescale=last_rescale_of(pod))
        if current != job.cpus:  # resized by someone else: measure the new count from here
            job.cpus = current
            self.predictor.job(pod.key, total).restarted()
        model, problem = self._observe(pod, job, total, now)
        if problem:
            await self.handle.cluster.emit_event(pod, "Warning", "InvalidProgress", problem)
        if current <= 0 or now - job.last_rescale < self.args.cooldown_seconds:
            return
        lo, hi = self._bounds(pod, pod.node_name)
        restart = restarts_on_resize(pod, container)
        choice = choose(
            model,
            deadline,
            now,
            current,
            lo,
            hi,
            self.args.safety_margin,
            restart,
            self.args.restart_seconds,
            self.args.band_z,
        )
        if choice is None:
            return
        self._record_slack(pod, model, deadline, now, current, restart)
        if choice.cpus is None:
            await self._mark(
                pod, job, "DeadlineInfeasible", f"cannot meet the deadline even at {hi:g} CPUs", choice, deadline
            )
            return
        target = self._target(pod, choice.cpus, current, deadline, now, model, restart)
        if target is None:
            await self._mark(pod, job, "OnTrack", f"on track at {current:g} CPUs", choice, deadline)
            return
        if target > current and not job.at_risk:
            job.at_risk = True
            await self.handle.cluster.emit_event(
                pod, "Warning", "DeadlineAtRisk",
                f"at {current:g} CPUs the job would miss its deadline {rfc3339(deadline)}; {choice.cpus:g} CPUs needed",
            )  # fmt: skip
        await self._resize(pod, container, job, current, target, deadline, choice, now, restart)

    def _target(
        self, pod: PodInfo, need: float, current: float, deadline: float, now: float, model: JobModel, restart: bool
    ) -> float | None:
        """The count to move to now, or None to stay."""
        if need > current:
            # Step up gradually where a step is cheap (in place). A restarting container loses its
            # progress on every step, so it moves straight to the count the prediction asks for.
            step = need if restart else max(current * self.args.max_step_factor, current + 1)
            room = current + self._free_milli(pod.node_name) / 1000
            target = float(math.floor(min(need, step, room)))
            return target if target > current else None
        if need < current:
            # Hysteresis: only when the smaller count still leaves real slack.
            lo_choice = choose(
                model, deadline - self.args.down_slack * (deadline - now), now, current, need, need,
                self.args.safety_margin, restart, self.args.restart_seconds, self.args.band_z,
            )  # fmt: skip
            if lo_choice is not None and lo_choice.cpus is not None:
                return need
        return None

    async def _resize(
        self,
        pod: PodInfo,
        container: str,
        job: _Job,
        current: float,
        target: float,
        deadline: float,
        choice: Choice,
        now: float,
        restart: bool,
    ) -> None:
        status = await self.handle.cluster.resize(pod, {container: cpu_resize(pod, container, int(target * 1000))})
        self._count_rescale(current, target, status.ok)
        job.last_rescale = now  # a refused resize also waits the cooldown: no hammering
        if not status.ok:
            await self.handle.cluster.emit_event(
                pod, "Warning", "RescaleFailed", f"cpu {current:g} -> {target:g}: {status.message}"
            )
            return
        job.cpus = target
        if restart:
            job.restarted_at = now
            model = self.predictor.get(pod.key)
            if model is not None:
                model.restarted()
        if target < current:
            job.at_risk = False
        note = (
            f"cpu {current:g} -> {target:g}: predicted finish {rfc3339(choice.finish)} vs deadline {rfc3339(deadline)}"
        )
        await self.handle.cluster.emit_event(pod, "Normal", "Rescaled", note)
        await self.handle.cluster.patch_pod_condition(
            pod, PodCondition(CONDITION, "True", "Rescaled", f"{note}; lastRescale={now:.0f}")
        )
        job.reason = "Rescaled"

    def _record_slack(
        self, pod: PodInfo, model: JobModel, deadline: float, now: float, current: float, restart: bool
    ) -> None:
        """Deadline minus the central prediction (no band, no margin) at the current CPUs."""
        here = choose(model, deadline, now, current, current, current, 0.0, restart, 0.0, 0.0)
        if here is not None and math.isfinite(here.finish):
            self._slack[pod.key] = deadline - here.finish

    def _count_rescale(self, current: float, target: float, ok: bool) -> None:
        self._rescales["up" if target > current else "down", "ok" if ok else "failed"] += 1

    # ----- pod end and metrics
    def pod_terminated(self, pod: PodInfo) -> None:
        """A deadline job ended: met if it Succeeded by its deadline, else missed."""
        self._jobs.pop(pod.key, None)
        self._slack.pop(pod.key, None)
        self.predictor.forget(pod.key)
        deadline = deadline_of(pod)
        if deadline is None:
            return
        met = pod.phase == "Succeeded" and self.handle.clock.now() <= deadline
        self._deadlines["met" if met else "missed"] += 1

    def metric_families(self) -> list[MetricFamily]:
        rescales: dict[tuple[str, ...], float] = {(d, r): 0.0 for d in ("up", "down") for r in ("ok", "failed")}
        rescales.update({key: float(n) for key, n in self._rescales.items()})
        deadlines: dict[tuple[str, ...], float] = {("met",): 0.0, ("missed",): 0.0}
        deadlines.update({(key,): float(n) for key, n in self._deadlines.items()})
        slack = {tuple(key.split("/", 1)): seconds for key, seconds in self._slack.items()}
        return [
            MetricFamily(
                "pysched_autoscale_predicted_slack_seconds",
                "Deadline minus predicted finish at the current CPUs, per running deadline job (last reconcile).",
                "gauge",
                ("namespace", "pod"),
                slack,
            ),
            MetricFamily(
                "pysched_autoscale_rescales",
                "In-place CPU resizes requested by the autoscaler, by direction and result.",
                "counter",
                ("direction", "result"),
                rescales,
            ),
            MetricFamily(
                "pysched_deadlines",
                "Deadline jobs that ended, by whether they met their deadline.",
                "counter",
                ("result",),
                deadlines,
            ),
        ]

    async def _mark(self, pod: PodInfo, job: _Job, reason: str, what: str, choice: Choice, deadline: float) -> None:
        """The `pysched.io/Deadline` condition, written only when its reason changes."""
        if reason == job.reason:
            return
        job.reason = reason
        ok = reason != "DeadlineInfeasible"
        message = (
            f"{what}: predicted finish {rfc3339(choice.finish)} vs deadline {rfc3339(deadline)}"
            if math.isfinite(choice.finish)
            else what
        )
        if not ok:
            await self.handle.cluster.emit_event(pod, "Warning", reason, message)
        last = f"; lastRescale={job.last_rescale:.0f}" if math.isfinite(job.last_rescale) else ""
        await self.handle.cluster.patch_pod_condition(
            pod, PodCondition(CONDITION, "True" if ok else "False", reason, message + last)
        )


def factory(args: AutoscaleArgs, handle: Handle) -> Autoscale:
    return Autoscale(args, handle)


SPEC = PluginSpec(NAME, AutoscaleArgs, factory, Autoscale)
