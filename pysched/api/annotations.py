"""The workload contract's pod annotations (docs/architecture.md, "The workload contract"), parsed.

A malformed value reads as absent (None); the caller decides whether to warn.
"""

from __future__ import annotations

import math
import re

from pysched.api.containers import container_names
from pysched.api.objects import PodInfo
from pysched.api.resources import QuantityError, parse_quantity
from pysched.api.times import format_rfc3339, parse_rfc3339

DEADLINE = "pysched.io/deadline"
TOTAL_STEPS = "pysched.io/total-steps"
PROGRESS = "pysched.io/progress"
DEADLINE_FORMS = "an RFC 3339 time (2026-11-30T12:00:00Z) or a duration such as 45m, 6h or 1h30m"
URGENCY = "pysched.io/urgency"
URGENCY_VALUES = ("urgent", "relaxed")
URGENCY_FORMS = '"urgent" or "relaxed"'

PROGRESS_INTERVAL = 60.0  # the training helper writes its progress at most once a minute by default
# Bounds on step counts and on the progress value: the admission policy of manifests/training
# enforces the same (a unit test holds the two together); past 4,300 digits int() would raise.
MAX_STEP_DIGITS = 16
PROGRESS_MAX_LENGTH = 64

_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?[hms])+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: str) -> float | None:
    """`45m`, `6h`, `1h30m`, `90s` (Go's units h, m, s); None otherwise."""
    text = value.strip()
    if not _DURATION.match(text):
        return None
    return sum(float(n) * _UNIT[u] for n, u in _PART.findall(text))


def deadline_of(pod: PodInfo) -> float | None:
    """Absolute deadline (epoch s). A duration counts from the creation of the pod's controlling
    owner when the backend knows it (`PodInfo.owner_created`), else from the pod's own creation,
    so a pod its Job recreates keeps the Job's deadline. The live backend knows batch/v1 Jobs (it
    watches them), the simulator the owners given to `add_owner`; pods of other controllers (JobSet,
    Kubeflow jobs) count from their own creation, so those should write an RFC 3339 time."""
    value = pod.annotations.get(DEADLINE)
    if value is None:
        return None
    absolute = parse_rfc3339(value)
    if absolute is not None:
        return absolute
    duration = parse_duration(value)
    if duration is None:
        return None
    return (pod.created if pod.owner_created is None else pod.owner_created) + duration


def total_steps_of(pod: PodInfo) -> int | None:
    value = pod.annotations.get(TOTAL_STEPS, "").strip()
    return int(value) if _is_step_count(value) and int(value) > 0 else None


def _is_step_count(text: str) -> bool:
    return 0 < len(text) <= MAX_STEP_DIGITS and text.isascii() and text.isdigit()


def progress_of(pod: PodInfo) -> tuple[int, float] | None:
    """(steps done, when observed) from `STEPS@RFC3339`; None when absent or malformed."""
    value = pod.annotations.get(PROGRESS)
    return None if value is None else parse_progress(value)


def format_progress(steps: int, when: float) -> str:
    """`STEPS@RFC3339`, as the training helper writes `pysched.io/progress`."""
    return f"{steps}@{format_rfc3339(when)}"


def parse_progress(value: str) -> tuple[int, float] | None:
    """(steps done, when observed) from a `STEPS@RFC3339` string; None when malformed or longer
    than `PROGRESS_MAX_LENGTH` (steps of at most `MAX_STEP_DIGITS` digits)."""
    if len(value) > PROGRESS_MAX_LENGTH:
        return None
    steps, sep, when = value.strip().partition("@")
    if not sep or not _is_step_count(steps):
        return None
    observed = parse_rfc3339(when)
    return None if observed is None or not math.isfinite(observed) else (int(steps), observed)


def urgency_of(pod: PodInfo) -> str | None:
    """`pysched.io/urgency` as one of `URGENCY_VALUES`; None when absent or malformed."""
    value = pod.annotations.get(URGENCY, "").strip()
    return value if value in URGENCY_VALUES else None


# --- autoscaling bounds and switches -----------------------------------------------------------
CPU_MIN = "pysched.io/cpu-min"
CPU_MAX = "pysched.io/cpu-max"
AUTOSCALE = "pysched.io/autoscale"
CONTAINER = "pysched.io/container"
TOTAL_STEPS_FORMS = "a positive integer of at most 16 digits, such as 10000"
PROGRESS_FORMS = "STEPS@RFC3339 (at most 16 digits, 64 characters), e.g. 1200@2026-11-30T12:00:05Z"
CPU_FORMS = "a positive Kubernetes CPU quantity such as 500m, 2 or 1.5"
AUTOSCALE_FORMS = '"true" or "false"'
CONTAINER_FORMS = "the name of one of the pod's containers"


def cpu_milli_of(pod: PodInfo, key: str) -> int | None:
    """A positive CPU quantity annotation in millicores; None when absent or malformed."""
    value = pod.annotations.get(key)
    if value is None:
        return None
    try:
        milli = parse_quantity(value.strip()) * 1000
    except QuantityError:
        return None
    return math.ceil(milli) if milli > 0 else None


def autoscale_enabled(pod: PodInfo) -> bool:
    """Only an explicit `"false"` turns autoscaling off (a malformed value reads as absent: on)."""
    return pod.annotations.get(AUTOSCALE, "").strip().lower() != "false"


def main_container(pod: PodInfo) -> str | None:
    """The container autoscaling resizes: `pysched.io/container` when it names one, else the first."""
    names = container_names(pod)
    wanted = pod.annotations.get(CONTAINER)
    if wanted is not None and wanted in names:
        return wanted
    return names[0] if names else None


def invalid_annotations(pod: PodInfo) -> list[tuple[str, str, str]]:
    """(key, value, accepted forms) for every malformed `pysched.io/*` value of the contract."""
    notes = pod.annotations
    bad: list[tuple[str, str, str]] = []
    if DEADLINE in notes and deadline_of(pod) is None:
        bad.append((DEADLINE, notes[DEADLINE], DEADLINE_FORMS))
    if TOTAL_STEPS in notes and total_steps_of(pod) is None:
        bad.append((TOTAL_STEPS, notes[TOTAL_STEPS], TOTAL_STEPS_FORMS))
    if PROGRESS in notes and parse_progress(notes[PROGRESS]) is None:
        bad.append((PROGRESS, notes[PROGRESS], PROGRESS_FORMS))
    for key in (CPU_MIN, CPU_MAX):
        if key in notes and cpu_milli_of(pod, key) is None:
            bad.append((key, notes[key], CPU_FORMS))
    if AUTOSCALE in notes and notes[AUTOSCALE].strip().lower() not in ("true", "false"):
        bad.append((AUTOSCALE, notes[AUTOSCALE], AUTOSCALE_FORMS))
    if CONTAINER in notes and notes[CONTAINER] not in container_names(pod):
        bad.append((CONTAINER, notes[CONTAINER], CONTAINER_FORMS))
    if URGENCY in notes and urgency_of(pod) is None:
        bad.append((URGENCY, notes[URGENCY], URGENCY_FORMS))
    return bad
