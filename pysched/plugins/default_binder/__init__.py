"""DefaultBinder: binds through the cluster backend (the pods/binding subresource when live)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pysched.api.ids import NodeName
from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import Handle
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import Code, Status

NAME = "DefaultBinder"


@dataclass(frozen=True, slots=True)
class DefaultBinder:
    NAME: ClassVar[str] = NAME
    handle: Handle

    async def bind(self, state: CycleState, pod: PodInfo, node: NodeName) -> Status:
        status = await self.handle.cluster.bind(pod, node)
        # As kube's DefaultBinder: whatever the API answered, a bind that failed is an error (the
        # pod backs off and is told why), never a verdict that the pod does not fit.
        return status if status.ok or status.code is Code.ERROR else Status(Code.ERROR, status.reasons)


def factory(args: NoArgs, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)


SPEC = PluginSpec(NAME, NoArgs, factory, DefaultBinder)
