"""UrgencyPlacement: urgent jobs go where they can grow in place, relaxed jobs pack (best fit),
GPU jobs fill partly used GPU nodes before breaking into empty ones.

A fused score (`fused_term`): the kernel computes it from each node's row and the pod's score
shape, whose last number is the pod's urgency class (`score_class`). `score_batch` is the numpy
reference.

Urgency, until laxity is available to placement:
1. `pysched.io/urgency: urgent` or `relaxed` on the pod decides;
2. otherwise a pod whose `pysched.io/deadline` falls within `urgentWithinSeconds` of now (or has
   passed) is urgent;
3. otherwise (no deadline, a later one, a malformed value) the pod is relaxed.

The key, its values and their parser live in `pysched.api.annotations` with the rest of the
contract, so that a malformed value gets its `InvalidAnnotation` event (from DeadlineLaxity's
preEnqueue, where every contract key is checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pysched.api.annotations import deadline_of, urgency_of
from pysched.api.objects import PodInfo
from pysched.api.resources import CPU, GPU
from pysched.framework.clock import Clock
from pysched.framework.cycle_state import CycleState
from pysched.framework.fused import URGENT_CLASS, FusedTerm, UrgencyParams
from pysched.framework.interfaces import Handle
from pysched.framework.nodetable import I64, Bools, NodeTable
from pysched.framework.registry import MAX_ARGS_SECONDS, ArgsError, PluginSpec, check_range
from pysched.plugins.urgency_placement.reference import urgency_placement

NAME = "UrgencyPlacement"
SCORE_CLASS = {"urgent": URGENT_CLASS, "relaxed": 0}  # by the accepted values of `pysched.io/urgency`


@dataclass(frozen=True, slots=True)
class UrgencyPlacementArgs:
    grow_headroom_weight: int = 1
    pack_weight: int = 1
    gpu_fragment_weight: int = 1
    headroom_factor: int = 2
    urgent_within_seconds: int = 3600

    def validate(self) -> None:
        for field, value in (
            ("growHeadroomWeight", self.grow_headroom_weight),
            ("packWeight", self.pack_weight),
            ("gpuFragmentWeight", self.gpu_fragment_weight),
        ):
            if not 0 <= value <= 100:
                raise ArgsError(field, f"must be an integer from 0 to 100, got {value}")
        if not 1 <= self.headroom_factor <= 100:
            raise ArgsError("headroomFactor", f"must be an integer from 1 to 100, got {self.headroom_factor}")
        check_range(self, "urgent_within_seconds", 0, MAX_ARGS_SECONDS)


@dataclass(frozen=True, slots=True)
class UrgencyPlacement:
    NAME: ClassVar[str] = NAME
    fused_term: ClassVar[FusedTerm] = FusedTerm.URGENCY_PLACEMENT

    args: UrgencyPlacementArgs
    clock: Clock

    def score_class(self, pod: PodInfo) -> int:
        """1 (urgent) or 0 (relaxed), by the rule in the module docstring."""
        stated = urgency_of(pod)
        if stated is not None:
            return SCORE_CLASS[stated]
        deadline = deadline_of(pod)
        if deadline is not None and deadline - self.clock.now() <= self.args.urgent_within_seconds:
            return URGENT_CLASS
        return 0

    def fused_params(self) -> UrgencyParams:
        a = self.args
        return UrgencyParams(a.grow_headroom_weight, a.pack_weight, a.gpu_fragment_weight, a.headroom_factor)

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        size = nodes.size
        cpu, _memory = pod.nonzero_cpu_memory
        gpu = pod.requests.get(GPU, 0)
        params = self.fused_params()
        return urgency_placement(
            self.score_class(pod) == URGENT_CLASS,
            cpu,
            pod.requests.get(CPU, 0),
            gpu,
            nodes.column.get(GPU, -1) if gpu else -1,
            nodes.allocatable[:size],
            nodes.requested[:size],
            params.grow_headroom,
            params.pack,
            params.gpu_fragment,
            params.headroom_factor,
        )


def factory(args: UrgencyPlacementArgs, handle: Handle) -> UrgencyPlacement:
    return UrgencyPlacement(args, handle.clock)


SPEC = PluginSpec(NAME, UrgencyPlacementArgs, factory, UrgencyPlacement)
