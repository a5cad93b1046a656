"""The `pysched.io/progress` annotation as the training helper writes it: `STEPS@TIME` (DESIGN §3)."""

from __future__ import annotations

from pysched.api.annotations import DEADLINE, PROGRESS, TOTAL_STEPS
from pysched.api.times import format_rfc3339

__all__ = ["DEADLINE", "DEFAULT_INTERVAL", "PROGRESS", "TOTAL_STEPS", "format_progress", "last_write"]

DEFAULT_INTERVAL = 60.0  # the helper writes at most once a minute


def format_progress(steps: int, when: float) -> str:
    return f"{steps}@{format_rfc3339(when)}"


def last_write(run_start: float, now: float, interval: float) -> float | None:
    """When the helper last wrote, writing every `interval` s after the run started; None if not yet."""
    if now < run_start + interval:
        return None
    return run_start + interval * ((now - run_start) // interval)
