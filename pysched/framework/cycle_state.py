"""Per-cycle scratch space shared by the plugins of one scheduling attempt."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


_NONE: frozenset[str] = frozenset()


class CycleState:
    """Typed key/value store living for one scheduling cycle (plus its binding cycle)."""

    __slots__ = ("_data", "plugins_timed", "reserved", "skip_filter", "skip_score")

    def __init__(self) -> None:
        # Created on first use: most cycles never write, and one is made per pod.
        self._data: dict[str, Any] | None = None
        # Shared and frozen (the engine starts them from the plugins gated out for the pod's
        # features) until a plugin that was called skips: then copied once per point.
        self.skip_filter: set[str] | frozenset[str] = _NONE
        self.skip_score: set[str] | frozenset[str] = _NONE
        # The Reserve plugins that reserved for this pod (None: not reached, all of them undo).
        self.reserved: tuple[Any, ...] | None = None
        # This cycle is one of the sampled few whose plugins are timed one by one.
        self.plugins_timed = False

    def skip(self, point: str, plugin: str) -> None:
        """A PreFilter/PreScore plugin returned Skip: its Filter/Score is not run for this pod."""
        if point == "filter":
            if not isinstance(self.skip_filter, set):
                self.skip_filter = set(self.skip_filter)
            self.skip_filter.add(plugin)
        else:
            if not isinstance(self.skip_score, set):
                self.skip_score = set(self.skip_score)
            self.skip_score.add(plugin)

    def write(self, key: str, value: object) -> None:
        if self._data is None:
            self._data = {}
        self._data[key] = value

    def read(self, key: str, kind: type[T]) -> T | None:
        value = self._data.get(key) if self._data is not None else None
        return value if isinstance(value, kind) else None
