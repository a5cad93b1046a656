"""UnsupportedFields: a pod that sets a PodSpec field the default kube-scheduler honours but
pysched does not implement is refused at PreFilter (UnschedulableAndUnresolvable, one clear
event), never placed as if the field were not there. The table is `fields.FIELDS`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.framework.events import EventRegistration
from pysched.framework.interfaces import Handle
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import NoArgs, PluginSpec
from pysched.framework.status import SUCCESS, Status, unresolvable
from pysched.plugins.unsupported_fields.fields import refusal, refused_fields

NAME = "UnsupportedFields"


@dataclass(frozen=True, slots=True)
class UnsupportedFields:
    NAME: ClassVar[str] = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        refused = refused_fields(pod.raw)
        if not refused:
            return SUCCESS
        return unresolvable(*(refusal(path) for path in refused), plugin=NAME)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return ()  # only a change of the pod itself can help


def factory(args: NoArgs, handle: Handle) -> UnsupportedFields:
    return UnsupportedFields()


SPEC = PluginSpec(NAME, NoArgs, factory, UnsupportedFields)
