"""The fused-kernel contract: the filter and score terms the engine's compiled kernel computes itself.

Filters and scores that depend only on a node's resource row and a few numbers of the pod are
fused into one compiled pass over every node. A plugin whose meaning is one of these terms
declares it (`fused_term`) and hands over the term's parameters (`fused_params`); its own
`filter_batch` / `score_batch` stays the numpy reference the kernel is held to (parity tests in
its folder) and what the slow paths (diagnosis, profiles mixing in unfused plugins) call. The
engine builds the kernel's parameters from these declarations alone: it never names a plugin.

A new fused term means a new member here, its parameters type, and its arithmetic in
`pysched.scheduler.kernel`; a plugin that only composes existing terms needs none of that.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

from pysched.api.objects import PodInfo


@dataclass(frozen=True, slots=True)
class ResourceWeights:
    """Parameters of LEAST_ALLOCATED and MOST_ALLOCATED: the weights of cpu and memory in their
    mean. The kernel has one pair, so a profile fusing both terms must give them the same one."""

    cpu: int = 1
    memory: int = 1


@dataclass(frozen=True, slots=True)
class UrgencyParams:
    """Parameters of URGENCY_PLACEMENT: the weights of its cpu terms (headroom to grow for urgent
    pods, best fit for relaxed ones) and of its GPU best fit, and how many times its cpu request
    an urgent pod wants free beside it."""

    grow_headroom: int = 1
    pack: int = 1
    gpu_fragment: int = 1
    headroom_factor: int = 2


@dataclass(frozen=True, slots=True)
class BalanceParams:
    """Parameters of BALANCED_ALLOCATION: it scores how much the pod improves a node's balance of
    cpu and memory (kube-scheduler v1.36), or with `after` the balance once the pod is placed
    (kube-scheduler up to v1.35)."""

    after: bool = False


FusedParams = ResourceWeights | UrgencyParams | BalanceParams | None

URGENT_CLASS = 1  # the pod class URGENCY_PLACEMENT treats as urgent; 0 is relaxed


class FusedTerm(enum.Enum):
    """What the kernel computes. Values are the kube-scheduler names of the same arithmetic."""

    RESOURCE_FIT = "NodeResourcesFit"  # filter: each requested resource and one more pod fit
    LEAST_ALLOCATED = "LeastAllocated"  # score, ResourceWeights
    MOST_ALLOCATED = "MostAllocated"  # score, ResourceWeights
    BALANCED_ALLOCATION = "BalancedAllocation"  # score, BalanceParams
    URGENCY_PLACEMENT = "UrgencyPlacement"  # score, UrgencyParams; reads the pod's class and GPUs

    @property
    def is_filter(self) -> bool:
        return self is FusedTerm.RESOURCE_FIT

    @property
    def params_type(self) -> type | None:
        """The parameters a plugin declaring this term hands over (None: it takes none)."""
        return _PARAMS.get(self)

    @property
    def reads_pod_class(self) -> bool:
        """The term depends on a class of the pod (`PodClassifier.score_class`) and on its GPU
        request, which then join the pod's score shape and its selection key."""
        return self is FusedTerm.URGENCY_PLACEMENT


_PARAMS: dict[FusedTerm, type] = {
    FusedTerm.LEAST_ALLOCATED: ResourceWeights,
    FusedTerm.MOST_ALLOCATED: ResourceWeights,
    FusedTerm.URGENCY_PLACEMENT: UrgencyParams,
    FusedTerm.BALANCED_ALLOCATION: BalanceParams,
}


@runtime_checkable
class FusedPlugin(Protocol):
    """A filter or score plugin the kernel runs for it."""

    fused_term: ClassVar[FusedTerm]

    def fused_params(self) -> FusedParams:
        """The term's parameters, of `fused_term.params_type` (None for a term without any)."""
        ...


@runtime_checkable
class PodClassifier(Protocol):
    """A fused score whose term reads a class of the pod (`FusedTerm.reads_pod_class`)."""

    def score_class(self, pod: PodInfo) -> int: ...
