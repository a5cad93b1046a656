"""SchedulingGates: a pod with scheduling gates is not tried until every gate is removed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pysched.api.limits import clip
from pysched.api.objects import PodInfo
from pysched.framework.interfaces import Handle
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SUCCESS, Status, unresolvable

NAME = "SchedulingGates"


def gate_names(pod: PodInfo) -> list[str]:
    """The names of `spec.schedulingGates` (entries without a name still gate the pod, and so does
    a value that is no list: the API server would not have taken it, and a bind would be refused)."""
    gates: Any = (pod.raw.get("spec") or {}).get("schedulingGates")
    if not isinstance(gates, list):
        return [f"(not a list: {clip(gates)})"] if gates else []
    return [str(gate.get("name", "")) if isinstance(gate, dict) else "" for gate in gates]


@dataclass(frozen=True, slots=True)
class SchedulingGates:
    NAME: ClassVar[str] = NAME

    def pre_enqueue(self, pod: PodInfo) -> Status:
        """Held in the gated queue, untried and with no event (the API server has already set
        PodScheduled=False, reason SchedulingGated); a change of the pod brings it back here."""
        names = gate_names(pod)
        if not names:
            return SUCCESS
        return unresolvable(f"waiting for scheduling gates: [{' '.join(names)}]", plugin=NAME)  # kube's words


def factory(args: NoArgs, handle: Handle) -> SchedulingGates:
    return SchedulingGates()


SPEC = PluginSpec(NAME, NoArgs, factory, SchedulingGates)
