"""When simulated training writes its progress, as the training helper would (every interval after
the run starts)."""

from __future__ import annotations

# The range of a progress interval (`simulate --progress-interval`, the emulator's): at most one
# write a second, at least one a day.
MIN_PROGRESS_INTERVAL_S = 1.0
MAX_PROGRESS_INTERVAL_S = 86_400.0


def last_write(run_start: float, now: float, interval: float) -> float | None:
    """When the helper last wrote, writing every `interval` s after the run started; None if not yet."""
    if now < run_start + interval:
        return None
    return run_start + interval * ((now - run_start) // interval)
