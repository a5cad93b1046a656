"""Autoscale: in-place CPU (and optionally memory) autoscaling for deadline jobs (issue 6 item 5).

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
  last rescale. A container that restarts on a CPU resize (`resizePolicy: RestartContainer`)
  loses its progress: the choice then counts the whole run again plus `restartSeconds`.
- The `pysched.io/Deadline` condition (`state.py`) carries what a new leader needs: the last
  rescale (cooldown), the speed measured per CPU count (the fitted model) and the predicted
  finish. It is rewritten when its reason changes, when the measurements grow materially (a new
  count, or twice the steps at one), or when the predicted finish moves by more than 5% of the
  time left (at least a minute): a steady job costs no API writes.

Metrics (`metric_families`, on `pysched run`'s /metrics with a `profile` label):
`pysched_autoscale_predicted_slack_seconds{namespace,pod}` (deadline minus the central predicted
finish at the job's current CPUs, per running deadline job, as of the last reconcile),
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
"""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pysched.api.annotations import (
    CPU_MAX,
    CPU_MIN,
    PROGRESS,
    autoscale_enabled,
    cpu_milli_of,
    deadline_of,
    main_container,
    total_steps_of,
)
from pysched.api.containers import (
    ContainerResize,
    actual_cpus,
    actual_request,
    container_cpus,
    container_request,
    container_resize,
    resize_infeasible,
    restarts_on_resize,
)
from pysched.api.ids import NodeName, PodKey
from pysched.api.labels import selector_matches, selector_problem
from pysched.api.objects import PodInfo
from pysched.api.resources import CPU, GPU, MEMORY, to_scheduler_units
from pysched.deadline.condition import (
    CONDITION,
    DEMOTED_REASON,
    ON_TRACK_REASON,
    RESCALED_REASON,
    condition_message,
    message_time,
    saved_job,
)
from pysched.deadline.predictor import (
    BAND_Z,
    CountStats,
    JobModel,
    Predictor,
    Verdict,
    central_finish,
    choose,
    progress_observation,
    stamp_resolution,
)
from pysched.framework.cluster import PodCondition
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle, MetricFamily
from pysched.framework.registry import ArgsError, PluginSpec
from pysched.framework.status import SUCCESS, Status

__all__ = ["NAME", "SPEC", "Autoscale", "AutoscaleArgs"]

NAME = "Autoscale"
MEMORY_MODES = ("fixed", "withCpu")
REFRESH_FINISH_SHARE = 0.05  # rewrite the condition when the finish moves by this share of the time left
REFRESH_FINISH_MIN_S = 60.0  # ... and by at least this much


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
    # Generic prior for a job never observed: seconds per step on one CPU (0: unknown, the pod
    # binds with its request) and the relative uncertainty of that guess.
    prior_step_seconds: float = 0.0
    prior_uncertainty: float = 0.5
    memory: str = "fixed"  # or "withCpu": memory requests grow with CPUs on scale-up
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
            "priorStepSeconds": 0 <= self.prior_step_seconds < math.inf,
            "priorUncertainty": 0 < self.prior_uncertainty <= 10,
        }
        for name, ok in checks.items():
            if not ok:
                raise ArgsError(name, f"out of range: {getattr(self, _snake(name))}")
        if self.memory not in MEMORY_MODES:
            raise ArgsError("memory", f"must be one of {', '.join(MEMORY_MODES)}, got {self.memory!r}")
        if self.deadline_namespaces is not None:
            problem = selector_problem(self.deadline_namespaces)
            if problem is not None:
                raise ArgsError("deadlineNamespaces", problem)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


@dataclass(slots=True)
class _Job:
    cpus: float  # the count the job has run on since the last observation
    last_rescale: float = -math.inf
    restarted_at: float = -math.inf  # observations older than this belong to a lost run
    at_risk: bool = False
    reason: str = ""  # the condition's reason, and the human part of its message
    what: str = ""
    warned: str = ""  # the last progress value warned about (one event per bad value)
    abandoned: float = math.nan  # the CPUs of the last resize put back after the kubelet refused it
    written_steps: dict[float, float] = field(default_factory=dict)  # measured steps per count, as last written
    written_finish: float = math.nan


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
    def _node(self, node: NodeName | None, resource: str) -> tuple[int, int]:
        """(allocatable, free) of `resource` on the node's row; (0, 0) when unknown."""
        nodes = self.handle.nodes
        row = nodes.row.get(node) if node else None
        column = nodes.column.get(resource)
        if row is None or column is None:
            return 0, 0
        allocatable = int(nodes.allocatable[row, column])
        return allocatable, allocatable - int(nodes.requested[row, column])

    def _free(self, node: NodeName | None, resource: str) -> int:
        return self._node(node, resource)[1]

    def _bounds(self, pod: PodInfo, node: NodeName | None) -> tuple[float, float]:
        lo = (cpu_milli_of(pod, CPU_MIN) or int(self.args.cpu_min * 1000)) / 1000
        hi = (cpu_milli_of(pod, CPU_MAX) or self._node(node, CPU)[0]) / 1000
        return lo, max(lo, hi)

    def _memory_bytes(self, pod: PodInfo, container: str) -> int:
        """The main container's memory request when memory grows with CPUs (0: it does not)."""
        if self.args.memory != "withCpu":
            return 0
        value = container_request(pod, container, MEMORY)
        return 0 if value is None else to_scheduler_units(MEMORY, value)

    def _room(self, pod: PodInfo, container: str, node: NodeName | None, current: float) -> float:
        """The most CPUs the pod could hold on its node now (memory too, when it grows with CPUs)."""
        room = current + self._free(node, CPU) / 1000
        memory = self._memory_bytes(pod, container)
        if memory > 0 and current > 0:
            room = min(room, current + self._free(node, MEMORY) * current / memory)
        return room

    def _change(self, pod: PodInfo, container: str, current: float, target: float) -> ContainerResize:
        wanted = {CPU: int(target * 1000)}
        memory = self._memory_bytes(pod, container)
        if memory > 0 and current > 0 and target > current:
            wanted[MEMORY] = math.ceil(memory * target / current)
        return container_resize(pod, container, wanted)

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
    def _prior(self, total: int, now: float) -> JobModel | None:
        """A throwaway model of a never-observed job under the profile's prior (kept out of the
        predictor: a guess must never be pooled with what the job really measures)."""
        step = self.args.prior_step_seconds
        if step <= 0:
            return None
        model = JobModel(total)
        model.restore([CountStats(1.0, step, self.args.prior_uncertainty, step * 1000, 1000, 1)])
        model.observe(0, now, 1.0, now)
        return model

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        container = self._eligible(pod)
        deadline, total = deadline_of(pod), total_steps_of(pod)
        if container is None or deadline is None or total is None:
            return SUCCESS
        now = self.handle.clock.now()
        model = self.predictor.get(pod.key) or self._prior(total, now)
        if model is None:
            return SUCCESS
        current = container_cpus(pod, container)
        lo, hi = self._bounds(pod, node)
        hi = min(hi, self._room(pod, container, node, current))
        choice = choose(
            model, deadline, now, lo, hi, current=current, margin=self.args.safety_margin, band_z=self.args.band_z
        )
        if choice is None or choice.cpus is None or choice.cpus == current:
            return SUCCESS
        status = await self.handle.cluster.resize(pod, {container: self._change(pod, container, current, choice.cpus)})
        self._count_rescale(current, choice.cpus, status.ok)
        if status.ok:  # a refused resize binds the pod as submitted: never worse than no autoscaling
            self._planned[pod.key] = choice.cpus
            finish = central_finish(model, now, choice.cpus, current=current)
            basis = "its measured speed" if self.predictor.get(pod.key) is model else "the profile's prior"
            await self.handle.cluster.emit_event(
                pod, "Normal", "Rescaled",
                f"cpu {current:g} -> {choice.cpus:g} before binding, from {basis}: "
                f"predicted finish {message_time(finish)} vs deadline {message_time(deadline)}",
            )  # fmt: skip
        return SUCCESS

    def post_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        total = total_steps_of(pod)
        if total is None:
            return
        now = self.handle.clock.now()
        container = main_container(pod)
        requested = container_cpus(pod, container) if container is not None else pod.requests.get(CPU, 0) / 1000
        cpus = self._planned.pop(pod.key, requested)
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

    def _resume(self, pod: PodInfo, total: int, deadline: float, current: float) -> _Job:
        """A running job this scheduler did not bind (a new leader): take back what the
        `pysched.io/Deadline` condition kept: cooldown, speed per count, predicted finish."""
        job = self._jobs[pod.key] = _Job(current)
        saved = saved_job(pod)
        if saved is None:
            return job
        job.last_rescale = saved.last_rescale
        job.reason = saved.reason
        job.what = saved.message.partition(":")[0]
        model = self.predictor.job(pod.key, total)
        if not model.intervals:
            model.restore(saved.counts)
        job.written_steps = {s.cpus: s.steps for s in model.count_stats()}
        if saved.finish is not None:
            job.written_finish = saved.finish
            self._slack[pod.key] = deadline - saved.finish
        return job

    def _observe(self, pod: PodInfo, job: _Job, total: int, now: float) -> tuple[JobModel, str]:
        """Feed the progress annotation to the model; the problem to warn about, or ""."""
        model = self.predictor.job(pod.key, total)
        value = pod.annotations.get(PROGRESS)
        parsed = progress_observation(value) if value is not None else None
        if parsed is None or parsed[1] < job.restarted_at:
            return model, ""  # absent, malformed (the admission plugin warns) or from a lost run
        steps, at = parsed
        resolution = stamp_resolution(value or "")
        result = model.observe(steps, at, job.cpus, now, resolution=resolution)
        if result.verdict is Verdict.BACKWARDS:
            # A container restart without checkpoints starts again from 0 (TF 1.x jobs do): a new
            # run, not a lie. The model keeps the speed it measured.
            model.restarted()
            result = model.observe(steps, at, job.cpus, now, resolution=resolution)
        if result.verdict in (Verdict.FUTURE, Verdict.BEYOND_TOTAL) and value != job.warned:
            job.warned = value or ""
            return model, f"{PROGRESS}: {value!r} ignored: {result.message}"
        return model, ""

    async def _reconcile_one(self, pod: PodInfo, container: str, now: float) -> None:
        total, deadline = total_steps_of(pod), deadline_of(pod)
        if total is None or deadline is None:
            return
        # The job runs on what the kubelet actuated; the spec may be ahead of it while a resize
        # is pending (Deferred, or on its way).
        desired = container_cpus(pod, container)
        actual = actual_cpus(pod, container)
        current = desired if actual is None else actual
        job = self._jobs.get(pod.key) or self._resume(pod, total, deadline, current)
        if current != job.cpus:  # a resize took effect (ours or anyone's): measure the new count from here
            job.cpus = current
            self.predictor.job(pod.key, total).restarted()
        model, problem = self._observe(pod, job, total, now)
        if problem:
            await self.handle.cluster.emit_event(pod, "Warning", "InvalidProgress", problem)
        if current <= 0:
            return
        if desired != current:
            refused = resize_infeasible(pod)
            # Put back at once; a put-back the apiserver refused is tried again after the cooldown.
            retry = job.abandoned != desired or now - job.last_rescale >= self.args.cooldown_seconds
            if refused is not None and retry:
                await self._abandon(pod, container, job, desired, current, refused, now)
            return  # a resize is in flight: decide again once the kubelet has actuated it
        restart = restarts_on_resize(pod, container)
        here = central_finish(model, now, current, current=current)
        if not math.isfinite(here):
            return  # nothing known yet
        self._slack[pod.key] = deadline - here
        in_cooldown = now - job.last_rescale < self.args.cooldown_seconds
        if in_cooldown or not await self._decide(pod, container, job, model, current, deadline, now, restart):
            await self._save(pod, job, model, deadline, now, here)

    async def _decide(
        self,
        pod: PodInfo,
        container: str,
        job: _Job,
        model: JobModel,
        current: float,
        deadline: float,
        now: float,
        restart: bool,
    ) -> bool:
        """Choose the count and act; True when a resize was accepted (it wrote the condition)."""
        lo, hi = self._bounds(pod, pod.node_name)
        margin, restart_s, z = self.args.safety_margin, self.args.restart_seconds, self.args.band_z
        choice = choose(
            model,
            deadline,
            now,
            lo,
            hi,
            current=current,
            margin=margin,
            band_z=z,
            restart_s=restart_s if restart else None,
        )
        if choice is None:
            return False
        if choice.cpus is None:
            await self._verdict(pod, job, DEMOTED_REASON, f"cannot meet the deadline even at {hi:g} CPUs")
            return False
        target = self._target(pod, container, choice.cpus, current, deadline, now, model, restart)
        if target is None:
            await self._verdict(pod, job, ON_TRACK_REASON, f"on track at {current:g} CPUs")
            return False
        if target > current and not job.at_risk:
            job.at_risk = True
            await self.handle.cluster.emit_event(
                pod, "Warning", "DeadlineAtRisk",
                f"at {current:g} CPUs the job would miss its deadline {message_time(deadline)}; "
                f"{choice.cpus:g} CPUs needed",
            )  # fmt: skip
        return await self._resize(pod, container, job, model, current, target, deadline, now, restart)

    async def _abandon(
        self, pod: PodInfo, container: str, job: _Job, desired: float, current: float, why: str, now: float
    ) -> None:
        """The kubelet refuses the pending resize for good: ask for what the container has again,
        so the spec says the truth, and say so. Decisions resume after the cooldown."""
        job.last_rescale, job.abandoned = now, desired
        self._count_rescale(current, desired, False)
        back = {CPU: int(current * 1000)}
        memory = actual_request(pod, container, MEMORY)  # memory grown with the CPUs goes back too
        if memory is not None and container_request(pod, container, MEMORY) is not None:
            back[MEMORY] = memory
        status = await self.handle.cluster.resize(pod, {container: container_resize(pod, container, back)})
        outcome = f"back to {current:g} CPUs" if status.ok else f"reverting failed too: {status.message()}"
        await self.handle.cluster.emit_event(
            pod, "Warning", "RescaleFailed", f"cpu {current:g} -> {desired:g} refused by the kubelet ({why}); {outcome}"
        )

    def _target(
        self,
        pod: PodInfo,
        container: str,
        need: float,
        current: float,
        deadline: float,
        now: float,
        model: JobModel,
        restart: bool,
    ) -> float | None:
        """The count to move to now, or None to stay."""
        if need > current:
            # Step up gradually where a step is cheap (in place). A restarting container loses its
            # progress on every step, so it moves straight to the count the prediction asks for.
            step = need if restart else max(current * self.args.max_step_factor, current + 1)
            room = self._room(pod, container, pod.node_name, current)
            target = float(math.floor(min(need, step, room)))
            return target if target > current else None
        if need < current:
            # Hysteresis: only when the smaller count still leaves real slack.
            lo_choice = choose(
                model,
                deadline - self.args.down_slack * (deadline - now),
                now,
                need,
                need,
                current=current,
                margin=self.args.safety_margin,
                band_z=self.args.band_z,
                restart_s=self.args.restart_seconds if restart else None,
            )
            if lo_choice is not None and lo_choice.cpus is not None:
                return need
        return None

    async def _resize(
        self,
        pod: PodInfo,
        container: str,
        job: _Job,
        model: JobModel,
        current: float,
        target: float,
        deadline: float,
        now: float,
        restart: bool,
    ) -> bool:
        """Resize in place; True when it was accepted (and the condition says so)."""
        change = self._change(pod, container, current, target)
        status = await self.handle.cluster.resize(pod, {container: change})
        self._count_rescale(current, target, status.ok)
        job.last_rescale = now  # a refused resize also waits the cooldown: no hammering
        if not status.ok:
            await self.handle.cluster.emit_event(
                pod, "Warning", "RescaleFailed", f"cpu {current:g} -> {target:g}: {status.message()}"
            )
            return False
        finish = central_finish(
            model, now, target, current=current, restart_s=self.args.restart_seconds if restart else None
        )
        if restart:
            job.restarted_at = now
            model.restarted()
        if target < current:
            job.at_risk = False
        what = f"cpu {current:g} -> {target:g}"
        if MEMORY in change.requests:
            what += f", memory -> {change.requests[MEMORY]}"
        note = f"{what}: predicted finish {message_time(finish)} vs deadline {message_time(deadline)}"
        await self.handle.cluster.emit_event(pod, "Normal", "Rescaled", note)
        job.reason, job.what = RESCALED_REASON, what
        await self._save(pod, job, model, deadline, now, finish, force=True)
        return True

    async def _verdict(self, pod: PodInfo, job: _Job, reason: str, what: str) -> None:
        """A new reason for the condition; a demotion is also told as a Warning event."""
        if reason == job.reason and what == job.what:
            return
        if reason == DEMOTED_REASON and job.reason != reason:
            await self.handle.cluster.emit_event(pod, "Warning", reason, what)
        job.reason, job.what = reason, what
        job.written_finish = math.nan  # the message changes: write it with the next save

    async def _save(
        self, pod: PodInfo, job: _Job, model: JobModel, deadline: float, now: float, finish: float, force: bool = False
    ) -> None:
        """Write the condition when what it says has changed enough (see the module doc)."""
        if not job.reason:
            return
        counts = model.count_stats()
        measured = {s.cpus: s.steps for s in counts}
        grown = set(measured) != set(job.written_steps) or any(
            steps >= 2 * job.written_steps[c] for c, steps in measured.items()
        )
        moved = not math.isfinite(job.written_finish) or abs(finish - job.written_finish) > max(
            REFRESH_FINISH_MIN_S, REFRESH_FINISH_SHARE * max(0.0, deadline - now)
        )
        if not (force or grown or moved):
            return
        job.written_steps, job.written_finish = measured, finish
        message = condition_message(job.what, finish, deadline, counts, job.last_rescale)
        status = "False" if job.reason == DEMOTED_REASON else "True"
        await self.handle.cluster.patch_pod_condition(pod, PodCondition(CONDITION, status, job.reason, message))

    def _count_rescale(self, current: float, target: float, ok: bool) -> None:
        self._rescales["up" if target > current else "down", "ok" if ok else "failed"] += 1

    # ----- pod end and metrics
    def pod_deleted(self, pod: PodInfo) -> None:
        """Deleted (pending or bound): forget it."""
        self._planned.pop(pod.key, None)
        self._jobs.pop(pod.key, None)
        self._slack.pop(pod.key, None)
        self.predictor.forget(pod.key)

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


def factory(args: AutoscaleArgs, handle: Handle) -> Autoscale:
    plugin = Autoscale(args, handle)
    handle.pod_lifecycle.on_terminated(plugin.pod_terminated)
    handle.pod_lifecycle.on_deleted(plugin.pod_deleted)
    return plugin


SPEC = PluginSpec(NAME, AutoscaleArgs, factory, Autoscale)
