"""BalancedAllocation: prefer nodes where the pod evens out the use of cpu and memory (kube-scheduler
v1.36), or with `scoreBy: balanceAfter` where they would be used in equal proportion once it is
placed (kube-scheduler up to v1.35)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from pysched.api.objects import PodInfo
from pysched.api.resources import CPU, MEMORY
from pysched.framework.cycle_state import CycleState
from pysched.framework.fused import BalanceParams, FusedTerm
from pysched.framework.interfaces import Handle
from pysched.framework.nodetable import I64, Bools, NodeTable
from pysched.framework.registry import ArgsError, PluginSpec
from pysched.plugins.node_resources.reference import balanced_allocation

NAME = "BalancedAllocation"
SCORE_BY = ("improvement", "balanceAfter")


@dataclass(frozen=True, slots=True)
class BalancedAllocationArgs:
    score_by: str = "improvement"  # kube-scheduler v1.36's score

    def validate(self) -> None:
        if self.score_by not in SCORE_BY:
            raise ArgsError("scoreBy", f"must be one of {', '.join(SCORE_BY)}, got {self.score_by!r}")


@dataclass(frozen=True, slots=True)
class BalancedAllocation:
    """Fused into the kernel (`fused_term`); `score_batch` is the numpy reference."""

    NAME: ClassVar[str] = NAME
    fused_term: ClassVar[FusedTerm] = FusedTerm.BALANCED_ALLOCATION

    params: BalanceParams = field(default_factory=BalanceParams)

    def fused_params(self) -> BalanceParams:
        return self.params

    def score_batch(self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: Bools) -> I64:
        size = nodes.size
        return balanced_allocation(
            pod.requests.get(CPU, 0),
            pod.requests.get(MEMORY, 0),
            nodes.allocatable[:size],
            nodes.requested[:size],
            after=self.params.after,
        )


def factory(args: BalancedAllocationArgs, handle: Handle) -> BalancedAllocation:
    return BalancedAllocation(BalanceParams(after=args.score_by == "balanceAfter"))


SPEC = PluginSpec(NAME, BalancedAllocationArgs, factory, BalancedAllocation)
