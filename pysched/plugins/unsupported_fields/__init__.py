"""UnsupportedFields: a pod that sets a PodSpec field the default kube-scheduler honours but
pysched does not implement is refused at PreFilter (UnschedulableAndUnresolvable, one clear
event), never placed as if the field were not there. The table is `pysched.api.podspec.FIELDS`;
the paths a pod sets are read when its record is built (`PodInfo.refused`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from pysched.api.features import REFUSED, PodFeatures
from pysched.api.objects import PodInfo
from pysched.api.podspec import refusal
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import EventRegistration
from pysched.framework.interfaces import Handle
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SKIP, Status, unresolvable

NAME = "UnsupportedFields"


@dataclass(frozen=True, slots=True)
class UnsupportedFields:
    NAME: ClassVar[str] = NAME

    def acts_on(self) -> PodFeatures:
        return REFUSED  # a pod that sets no refused field is skipped

    @staticmethod
    def stated_constraint(pod: PodInfo) -> str | None:
        return ", ".join(pod.refused) if pod.refused else None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        if not pod.refused:
            return SKIP
        return unresolvable(*(refusal(path) for path in pod.refused), plugin=NAME)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return ()  # only a change of the pod itself can help


def factory(args: NoArgs, handle: Handle) -> UnsupportedFields:
    return UnsupportedFields()


SPEC = PluginSpec(NAME, NoArgs, factory, UnsupportedFields)
