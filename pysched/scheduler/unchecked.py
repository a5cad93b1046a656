"""Pods a profile cannot place correctly because it leaves out the plugin that checks what they
state. Profile lists are the whole of a profile here (kube-scheduler merges them with its
defaults), so a profile without NodePorts would place a pod with host ports wherever it fits.
Such a pod is refused instead, unresolvable until it changes, with words that name the plugin to
add. Constraints of the nodes (taints, cordons, room) are not stated by the pod: a profile without
their filters is only warned of at start-up (`unchecked_constraints`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from pysched.api.objects import PodInfo
from pysched.framework.config import ProfileConfig
from pysched.framework.cycle_state import CycleState
from pysched.framework.interfaces import StatedConstraintCheck
from pysched.framework.nodetable import NodeTable
from pysched.framework.registry import Registry
from pysched.framework.status import SUCCESS, Status, unresolvable

NAME = "UncheckedConstraints"


@dataclass(frozen=True, slots=True)
class UncheckedConstraints:
    """The first PreFilter of a profile that leaves such plugins out: (plugin, what it reads of a
    pod) for each of them."""

    NAME: ClassVar[str] = NAME
    profile: str
    missing: tuple[tuple[str, Callable[[PodInfo], str | None]], ...]

    @classmethod
    def of(cls, profile: ProfileConfig, registry: Registry) -> UncheckedConstraints | None:
        """None when the profile runs every such plugin of the registry where it checks (as a
        Filter, or as a PreFilter for a plugin with no Filter)."""
        missing = []
        for name in registry.names():
            spec = registry.get(name)
            if spec is None or not issubclass(spec.plugin_class, StatedConstraintCheck):
                continue
            point = "filter" if "filter" in spec.points() else "preFilter"
            if all(ref.name != name for ref in profile.enabled(point)):
                missing.append((name, spec.plugin_class.stated_constraint))
        return cls(profile.scheduler_name, tuple(missing)) if missing else None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Status:
        told = [f"{name} ({what})" for name, stated in self.missing if (what := stated(pod)) is not None]
        if not told:
            return SUCCESS
        return unresolvable(
            f"profile {self.profile} leaves out what checks the pod's own constraints: {'; '.join(told)}", plugin=NAME
        )
