"""What the engine lends a PostFilter plugin that preempts: dry runs of the profile's filters on
one node with some of its pods taken away, and the nominator (a preemptor's room on the node it
is waiting for, held until it binds).

The plugin asks; the engine answers (it installs itself when the profile is built). Without an
engine (a plugin built alone in a unit test) every dry run fails and nominations are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState


class DryRun(Protocol):
    """One node with pods taken away and given back; `close` restores the node exactly."""

    def remove(self, pod: PodInfo) -> None: ...
    def add(self, pod: PodInfo) -> None: ...
    def fits(self) -> bool:
        """Every filter of the profile passes the preemptor on the node as it is now."""
        ...

    def refusal(self) -> tuple[str, ...]:
        """The reasons of the first filter that refuses the preemptor on the node as it is now
        (kube's node status for the preemption message); () when none does."""
        ...

    def close(self) -> None: ...


class PreemptionEngine(Protocol):
    def dry_run(self, state: CycleState, pod: PodInfo, row: int) -> DryRun:
        """The node in `row` for `pod`: nominated pods of lower priority than `pod` are left out,
        as kube-scheduler's filters with nominated pods count only those of equal or higher one."""
        ...

    def nominate(self, pod: PodInfo, node: NodeName | None) -> None:
        """Hold the pod's room on `node` until it binds (None: drop its nomination)."""
        ...

    def nominated(self, key: PodKey) -> NodeName | None: ...

    def nominated_on(self, node: NodeName) -> Sequence[PodInfo]: ...


class _Unavailable:
    def remove(self, pod: PodInfo) -> None:
        return None

    def add(self, pod: PodInfo) -> None:
        return None

    def fits(self) -> bool:
        return False

    def refusal(self) -> tuple[str, ...]:
        return ()

    def close(self) -> None:
        return None


class PreemptionSupport:
    """Handle-reachable; the engine installs the implementation."""

    __slots__ = ("_engine",)

    def __init__(self) -> None:
        self._engine: PreemptionEngine | None = None

    def install(self, engine: PreemptionEngine) -> None:
        self._engine = engine

    def dry_run(self, state: CycleState, pod: PodInfo, row: int) -> DryRun:
        return _Unavailable() if self._engine is None else self._engine.dry_run(state, pod, row)

    def nominate(self, pod: PodInfo, node: NodeName | None) -> None:
        if self._engine is not None:
            self._engine.nominate(pod, node)

    def nominated(self, key: PodKey) -> NodeName | None:
        return None if self._engine is None else self._engine.nominated(key)

    def nominated_on(self, node: NodeName) -> Sequence[PodInfo]:
        return () if self._engine is None else self._engine.nominated_on(node)
