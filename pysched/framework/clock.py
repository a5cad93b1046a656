"""Injected time. Scheduling code asks a Clock, never `time.time()`."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (virtual or real)."""
        ...


class WallClock:
    def now(self) -> float:
        return time.time()


class VirtualClock:
    """A clock that moves only when the simulation moves it."""

    __slots__ = ("_now",)

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance_to(self, when: float) -> None:
        if when < self._now:
            raise ValueError(f"virtual time cannot go back from {self._now} to {when}")
        self._now = when

    def advance(self, seconds: float) -> None:
        self.advance_to(self._now + seconds)
