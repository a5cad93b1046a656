"""SeedRestart: the founding paper's autoscaling (Xing et al., IJCNN 2019), the `seed` baseline.

After `warmupSteps` steps of a run it predicts the run's length `T = elapsed / steps * total *
factor`; if the deadline would be missed it restarts the job with `ceil(c * T / time_left)` CPUs,
assuming linear speed-up. The restart is a CPU resize of a container whose resizePolicy is
RestartContainer, so the job loses its progress (the cluster decides what a restart costs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pysched.api.annotations import deadline_of, total_steps_of
from pysched.api.containers import cpu_resize
from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.api.resources import CPU, GPU, format_resource
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import MAX_RECONCILE_INTERVAL_S, MIN_RECONCILE_INTERVAL_S, Handle
from pysched.framework.registry import ArgsError, PluginSpec, check_range

NAME = "SeedRestart"


@dataclass(frozen=True, slots=True)
class SeedArgs:
    warmup_steps: int = 300
    factor: float = 1.2
    interval_seconds: float = 60.0

    def validate(self) -> None:
        if self.warmup_steps < 1:
            raise ArgsError("warmupSteps", f"must be at least 1, got {self.warmup_steps}")
        check_range(self, "factor", 1, 100)
        check_range(self, "interval_seconds", MIN_RECONCILE_INTERVAL_S, MAX_RECONCILE_INTERVAL_S)


@dataclass(frozen=True, slots=True)
class Decision:
    """What the rule concludes for one observation: None = leave the job alone."""

    predicted_s: float
    cpu_milli: int


def decide(
    cpu_milli: int, steps: int, total: int, elapsed: float, time_left: float, deadline_in: float, factor: float
) -> Decision | None:
    """The paper's rule: `T = elapsed / steps * total * factor`; a run predicted to end after its
    deadline (`deadline_in` seconds after the run started) gets `ceil(c * T / time_left)` CPUs."""
    predicted = elapsed / steps * total * factor
    if predicted <= deadline_in or time_left <= 0:
        return None
    cpus = math.ceil(cpu_milli / 1000 * predicted / time_left)
    return Decision(predicted, cpus * 1000)


@dataclass(slots=True)
class SeedRestart:
    NAME: ClassVar[str] = NAME
    args: SeedArgs
    handle: Handle
    _started: dict[PodKey, float] = field(default_factory=dict)  # start of the pod's current run
    _judged: set[PodKey] = field(default_factory=set)  # judged once per run

    @property
    def reconcile_interval(self) -> float:
        return self.args.interval_seconds

    def post_bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> None:
        self._started[pod.key] = self.handle.clock.now()
        self._judged.discard(pod.key)

    def forget(self, pod: PodInfo) -> None:
        """The pod ended or is gone: its run is over (a pod made again under its name is bound anew)."""
        self._started.pop(pod.key, None)
        self._judged.discard(pod.key)

    def _room(self, pod: PodInfo) -> int:
        """CPU millis still free on the pod's node: a restart must fit where the pod runs."""
        return self.handle.nodes.allocatable_and_free(pod.node_name, CPU)[1]

    async def reconcile(self, pods: Sequence[PodInfo]) -> None:
        now = self.handle.clock.now()
        for pod in pods:
            start = self._started.get(pod.key)
            if start is None or pod.key in self._judged or pod.requests.get(GPU, 0):
                # The paper scaled CPU jobs; GPU counts stay as submitted.
                continue
            total, deadline, written = total_steps_of(pod), deadline_of(pod), self.handle.cluster.progress(pod)
            stamp = None if written is None else written.stamp
            if total is None or deadline is None or stamp is None:
                continue
            steps, observed = stamp.steps, stamp.at
            if steps < self.args.warmup_steps or observed < start:
                continue  # not enough steps yet, or an observation from before the restart
            self._judged.add(pod.key)
            cpu = pod.requests.get(CPU, 0)
            decision = decide(cpu, steps, total, observed - start, deadline - now, deadline - start, self.args.factor)
            if decision is None:
                continue
            wanted = min(decision.cpu_milli, cpu + self._room(pod)) // 1000 * 1000
            if wanted <= cpu:
                continue
            await self._restart(pod, wanted, decision, now)

    async def _restart(self, pod: PodInfo, cpu_milli: int, decision: Decision, now: float) -> None:
        containers = pod.raw.get("spec", {}).get("containers") or [{}]
        name = str(containers[0].get("name", ""))
        status = await self.handle.cluster.resize(pod, {name: cpu_resize(pod, name, cpu_milli)})
        if not status.ok:
            return
        self._started[pod.key] = now
        self._judged.discard(pod.key)
        await self.handle.cluster.emit_event(
            pod,
            "Normal",
            "SeedRestart",
            f"predicted {decision.predicted_s:.0f} s misses the deadline: restarting with "
            f"{format_resource(CPU, cpu_milli)} CPUs",
        )


def factory(args: SeedArgs, handle: Handle) -> SeedRestart:
    plugin = SeedRestart(args, handle)
    handle.pod_lifecycle.on_terminated(plugin.forget)
    handle.pod_lifecycle.on_deleted(plugin.forget)
    return plugin


SPEC = PluginSpec(NAME, SeedArgs, factory, SeedRestart)
