"""SchedulingGates: a pod with scheduling gates is not tried until every gate is removed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pysched.api.objects import PodInfo
from pysched.framework.interfaces import Handle
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SUCCESS, Status, unresolvable

NAME = "SchedulingGates"
MAX_NAMED = 8  # gate names quoted in the status (a pod may carry many)


def gate_names(pod: PodInfo) -> list[str]:
    """The names of `spec.schedulingGates` (entries without a name still gate the pod)."""
    gates: Any = (pod.raw.get("spec") or {}).get("schedulingGates")
    if not isinstance(gates, list):
        return []
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
        shown: Sequence[str] = names[:MAX_NAMED]
        more = f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
        return unresolvable(f"waiting for scheduling gates: {list(shown)}{more}", plugin=NAME)


def factory(args: NoArgs, handle: Handle) -> SchedulingGates:
    return SchedulingGates()


SPEC = PluginSpec(NAME, NoArgs, factory, SchedulingGates)
