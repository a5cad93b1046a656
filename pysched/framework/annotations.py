"""The workload contract's pod annotations (DESIGN §3), parsed for plugins.

A malformed value reads as absent (None); the caller decides whether to warn.
"""

from __future__ import annotations

import math
import re
from datetime import datetime

from pysched.objects import PodInfo

DEADLINE = "pysched.io/deadline"
TOTAL_STEPS = "pysched.io/total-steps"
PROGRESS = "pysched.io/progress"
DEADLINE_FORMS = "an RFC 3339 time (2026-11-30T12:00:00Z) or a duration such as 45m, 6h or 1h30m"

_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?[hms])+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_rfc3339(value: str) -> float | None:
    try:
        stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return stamp.timestamp() if stamp.tzinfo is not None else None


def parse_duration(value: str) -> float | None:
    """`45m`, `6h`, `1h30m`, `90s` (Go's units h, m, s); None otherwise."""
    text = value.strip()
    if not _DURATION.match(text):
        return None
    return sum(float(n) * _UNIT[u] for n, u in _PART.findall(text))


def deadline_of(pod: PodInfo) -> float | None:
    """Absolute deadline (epoch s). A duration counts from the pod's creation (the owner's
    creation time is not on the pod; a recreated pod's controller should write RFC 3339)."""
    value = pod.annotations.get(DEADLINE)
    if value is None:
        return None
    absolute = parse_rfc3339(value)
    if absolute is not None:
        return absolute
    duration = parse_duration(value)
    return None if duration is None else pod.created + duration


def total_steps_of(pod: PodInfo) -> int | None:
    value = pod.annotations.get(TOTAL_STEPS, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def progress_of(pod: PodInfo) -> tuple[int, float] | None:
    """(steps done, when observed) from `STEPS@RFC3339`; None when absent or malformed."""
    steps, sep, when = pod.annotations.get(PROGRESS, "").partition("@")
    if not sep or not steps.isdigit():
        return None
    observed = parse_rfc3339(when)
    return None if observed is None or not math.isfinite(observed) else (int(steps), observed)


def parse_progress(value: str) -> tuple[int, float] | None:
    """(steps done, when observed) from a `STEPS@RFC3339` string; None when malformed."""
    steps, sep, when = value.strip().partition("@")
    if not sep or not (steps.isascii() and steps.isdigit()):
        return None
    observed = parse_rfc3339(when)
    return None if observed is None or not math.isfinite(observed) else (int(steps), observed)
