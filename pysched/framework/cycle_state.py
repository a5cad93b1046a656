"""Per-cycle scratch space shared by the plugins of one scheduling attempt."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


class CycleState:
    """Typed key/value store living for one scheduling cycle (plus its binding cycle)."""

    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def write(self, key: str, value: object) -> None:
        self._data[key] = value

    def read(self, key: str, kind: type[T]) -> T | None:
        value = self._data.get(key)
        return value if isinstance(value, kind) else None
