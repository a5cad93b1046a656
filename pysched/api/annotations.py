"""The workload contract's pod annotations (docs/architecture.md, "The workload contract"), parsed.

A malformed value reads as absent (None); the caller decides whether to warn.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from pysched.api.containers import container_names
from pysched.api.jobs import MAX_MEMBERS
from pysched.api.limits import MAX_EPOCH, MAX_STEPS, MAX_VALUE_CHARS, MIN_EPOCH, clip
from pysched.api.objects import PodInfo
from pysched.api.resources import CPU, QuantityError, to_scheduler_units
from pysched.api.times import format_rfc3339, parse_rfc3339
from pysched_progress import PROGRESS as PROGRESS
from pysched_progress import PROGRESS_INTERVAL as PROGRESS_INTERVAL

DEADLINE = "pysched.io/deadline"
TOTAL_STEPS = "pysched.io/total-steps"
DEADLINE_FORMS = "an RFC 3339 time (2026-11-30T12:00:00Z) or a duration such as 45m, 6h or 1h30m"
URGENCY = "pysched.io/urgency"
URGENCY_VALUES = ("urgent", "relaxed")
URGENCY_FORMS = '"urgent" or "relaxed"'
INVALID_ANNOTATION = "InvalidAnnotation"  # the Warning event's reason for a malformed or disagreeing value

# The admission policy of manifests/training enforces the same bounds (a unit test holds them together).
MAX_STEP_DIGITS = len(str(MAX_STEPS))
PROGRESS_MAX_LENGTH = MAX_VALUE_CHARS

# ASCII digits only: `\d` would read Arabic-Indic or other Unicode digits as a duration.
_DURATION = re.compile(r"^(?:[0-9]+(?:\.[0-9]+)?[hms])+$")
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([hms])")
_STEPS = re.compile(rf"^[0-9]{{1,{MAX_STEP_DIGITS}}}$")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: str) -> float | None:
    """`45m`, `6h`, `1h30m`, `90s` (Go's units h, m, s); None otherwise or beyond MAX_EPOCH seconds."""
    text = value.strip()
    if len(text) > MAX_VALUE_CHARS or not _DURATION.match(text):
        return None
    seconds = sum(float(n) * _UNIT[u] for n, u in _PART.findall(text))
    return seconds if seconds <= MAX_EPOCH else None


def deadline_of(pod: PodInfo) -> float | None:
    """Absolute deadline (epoch s). A duration counts from the creation of the pod's controlling
    owner when the backend knows it (`PodInfo.owner_created`), else from the pod's own creation,
    so a pod its Job recreates keeps the Job's deadline. The live backend knows batch/v1 Jobs (it
    watches them), the simulator the owners given to `add_owner`; pods of other controllers (JobSet,
    Kubeflow jobs) count from their own creation, so those should write an RFC 3339 time.
    A deadline past MAX_EPOCH (year 9999) is malformed: no message could print it."""
    value = pod.annotations.get(DEADLINE)
    if value is None:
        return None
    absolute, duration = (_deadline_values if len(value) <= MAX_VALUE_CHARS else _deadline_value)(value)
    if absolute is not None:
        return absolute
    if duration is None:
        return None
    deadline = (pod.created if pod.owner_created is None else pod.owner_created) + duration
    return deadline if deadline <= MAX_EPOCH else None


def _deadline_value(value: str) -> tuple[float | None, float | None]:
    """(the RFC 3339 time, else the duration) a deadline annotation says."""
    absolute = parse_rfc3339(value)
    return (absolute, None) if absolute is not None else (None, parse_duration(value))


# Read for every running deadline pod at every reconcile, and fixed for the pod's life: each
# distinct value is parsed once (pure functions of the string). Only values short enough to be
# valid are kept, so hostile ones cannot fill memory.
_deadline_values = functools.lru_cache(maxsize=16384)(_deadline_value)


def parse_steps(value: str) -> int | None:
    """A step count: ASCII digits, at most MAX_STEPS; None otherwise."""
    text = value.strip()
    if not _STEPS.match(text):
        return None
    steps = int(text)
    return steps if steps <= MAX_STEPS else None


_total_steps = functools.lru_cache(maxsize=16384)(parse_steps)  # as `_deadline_values`


def total_steps_of(pod: PodInfo) -> int | None:
    value = pod.annotations.get(TOTAL_STEPS, "")
    steps = (_total_steps if len(value) <= MAX_VALUE_CHARS else parse_steps)(value)
    return steps if steps else None


def progress_of(pod: PodInfo) -> tuple[int, float] | None:
    """(steps done, when observed) from the pod's own annotation; None when absent or malformed.
    Plugins read progress through `ClusterBackend.progress`: the simulated cluster keeps its
    training's writes beside the pod, not on it."""
    value = pod.annotations.get(PROGRESS)
    return None if value is None else parse_progress(value)


def format_progress(steps: int, when: float) -> str:
    """`STEPS@RFC3339`, as the training helper writes `pysched.io/progress`."""
    return f"{steps}@{format_rfc3339(when)}"


def parse_progress(value: str) -> tuple[int, float] | None:
    """(steps done, when observed) from a `STEPS@RFC3339` string; None when malformed or out of bounds."""
    if len(value) > PROGRESS_MAX_LENGTH:  # before any split: the value may be 200 KB
        return None
    steps, sep, when = value.strip().partition("@")
    done = parse_steps(steps) if sep else None
    observed = parse_rfc3339(when) if done is not None else None
    return None if done is None or observed is None else (done, observed)


STAMP_RESOLUTION_S = 1.0  # `STEPS@RFC3339` carries whole seconds
_FRACTION = re.compile(r"T\d\d:\d\d:\d\d\.(\d+)")


def stamp_resolution(value: str) -> float:
    """How finely a `STEPS@RFC3339` value tells time: whole seconds (what the helper writes) or
    the digits of its fraction of a second (the emulator's scaled time writes milliseconds)."""
    found = _FRACTION.search(value)
    return STAMP_RESOLUTION_S if found is None else 10.0 ** -len(found.group(1))


@dataclass(frozen=True, slots=True)
class ProgressStamp:
    """A well-formed `pysched.io/progress`: `steps` done by `at`, stamped to within `resolution` s."""

    steps: int
    at: float
    resolution: float = STAMP_RESOLUTION_S

    @property
    def middle(self) -> float:
        """Stamps are truncated (the helper writes whole seconds), so the true time lies in
        [at, at + resolution): its middle."""
        return self.at + self.resolution / 2


class ProgressReport:
    """`pysched.io/progress` as plugins read it (`ClusterBackend.progress`): the text as written
    and, when it is well formed, its stamp. Each is worked out when first asked for: the live
    cluster has the text (parsed when a plugin reads the stamp), the simulated cluster the numbers
    (formatted only for a message), so a simulation neither writes nor parses a string per report."""

    __slots__ = ("_parsed", "_stamp", "_text")

    def __init__(self, text: str | None, stamp: ProgressStamp | None, parsed: bool) -> None:
        self._text = text
        self._stamp = stamp
        self._parsed = parsed

    @classmethod
    def of_text(cls, text: str) -> ProgressReport:
        """The annotation as the training helper (or anyone) wrote it."""
        return cls(text, None, False)

    @classmethod
    def written(cls, steps: int, when: float) -> ProgressReport:
        """What the training helper writes at `when`: `format_progress`, read back as
        `parse_progress` would (whole seconds), without the string."""
        if 0 <= steps <= MAX_STEPS and MIN_EPOCH <= when <= MAX_EPOCH:
            return cls(None, ProgressStamp(steps, float(math.floor(when))), True)
        return cls.of_text(format_progress(steps, when))  # clamped, or refused, as the string is

    @property
    def text(self) -> str:
        if self._text is None:
            stamp = self._stamp
            assert stamp is not None  # a report is made of one or the other
            self._text = format_progress(stamp.steps, stamp.at)
        return self._text

    @property
    def stamp(self) -> ProgressStamp | None:
        """The steps and time it says; None when it is malformed."""
        if not self._parsed:
            text = self.text
            parsed = parse_progress(text)
            self._stamp = None if parsed is None else ProgressStamp(*parsed, stamp_resolution(text))
            self._parsed = True
        return self._stamp

    def __repr__(self) -> str:
        return f"ProgressReport({self.text!r})"


def urgency_of(pod: PodInfo) -> str | None:
    """`pysched.io/urgency` as one of `URGENCY_VALUES`; None when absent or malformed."""
    value = pod.annotations.get(URGENCY, "").strip()
    return value if value in URGENCY_VALUES else None


# --- autoscaling bounds and switches -----------------------------------------------------------
CPU_MIN = "pysched.io/cpu-min"
CPU_MAX = "pysched.io/cpu-max"
AUTOSCALE = "pysched.io/autoscale"
CONTAINER = "pysched.io/container"
TOTAL_STEPS_FORMS = "a positive integer such as 10000"
PROGRESS_FORMS = "STEPS@RFC3339, e.g. 1200@2026-11-30T12:00:05Z"
CPU_FORMS = "a positive Kubernetes CPU quantity such as 500m, 2 or 1.5"
AUTOSCALE_FORMS = '"true" or "false"'
CONTAINER_FORMS = "the name of one of the pod's containers"


WORKERS_MIN = "pysched.io/workers-min"
WORKERS_MAX = "pysched.io/workers-max"
WORKERS_FORMS = "a whole number of workers from 1 to 10000"
EXPECTED_DURATION = "pysched.io/expected-duration"
EXPECTED_DURATION_FORMS = "a duration such as 45m, 6h or 1h30m: the run time at the submitted size"


def workers_of(pod: PodInfo, key: str) -> int | None:
    """A workers bound (`pysched.io/workers-min` / `-max`); None when absent or malformed."""
    value = pod.annotations.get(key)
    if value is None:
        return None
    text = value.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 5:
        return None
    count = int(text)
    return count if 1 <= count <= MAX_MEMBERS else None


def worker_range_of(pod: PodInfo, submitted: int) -> tuple[int, int] | str | None:
    """An elastic job's (workers-min, workers-max), a bound not given (or malformed, which reads
    as absent) being the `submitted` workers; a message when the two contradict each other; None
    when the pod declares no range."""
    given_lo, given_hi = workers_of(pod, WORKERS_MIN), workers_of(pod, WORKERS_MAX)
    if given_lo is None and given_hi is None:
        return None
    lo, hi = given_lo or submitted, given_hi or submitted
    if lo > hi:
        low = f"{WORKERS_MIN} {lo}" if given_lo else f"the submitted {lo} workers"
        high = f"{WORKERS_MAX} {hi}" if given_hi else f"the submitted {hi} workers"
        return f"{low} is above {high}"
    return lo, hi


def expected_duration_of(pod: PodInfo) -> float | None:
    """Seconds the job runs at its submitted size, as its owner expects (from earlier runs): the
    planner's first estimate until progress is measured; None when absent or malformed."""
    value = pod.annotations.get(EXPECTED_DURATION)
    if value is None:
        return None
    seconds = parse_duration(value)
    return seconds if seconds is not None and seconds > 0 else None


def cpu_milli_of(pod: PodInfo, key: str) -> int | None:
    """A positive CPU quantity annotation in millicores; None when absent, malformed or beyond MAX_UNITS."""
    value = pod.annotations.get(key)
    if value is None:
        return None
    try:
        milli = to_scheduler_units(CPU, value)
    except QuantityError:
        return None
    return milli if milli > 0 else None


def cpu_max_of(pod: PodInfo) -> int | None:
    """`pysched.io/cpu-max` in millicores; None when absent, malformed, or below `cpu-min` (told
    as ignored, so it reads as absent)."""
    ceiling = cpu_milli_of(pod, CPU_MAX)
    floor = cpu_milli_of(pod, CPU_MIN) if ceiling is not None else None
    return None if floor is not None and ceiling is not None and ceiling < floor else ceiling


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
    """(key, value, accepted forms) for every malformed `pysched.io/*` value of the contract a
    queued pod states (its progress, written once it runs, is told by what reads it then:
    `InvalidProgress`)."""
    notes = pod.annotations
    bad: list[tuple[str, str, str]] = []
    if DEADLINE in notes and deadline_of(pod) is None:
        bad.append((DEADLINE, notes[DEADLINE], DEADLINE_FORMS))
    if TOTAL_STEPS in notes and total_steps_of(pod) is None:
        bad.append((TOTAL_STEPS, notes[TOTAL_STEPS], TOTAL_STEPS_FORMS))
    for key in (CPU_MIN, CPU_MAX):
        if key in notes and cpu_milli_of(pod, key) is None:
            bad.append((key, notes[key], CPU_FORMS))
    low, high = cpu_milli_of(pod, CPU_MIN), cpu_milli_of(pod, CPU_MAX)
    if low is not None and high is not None and low > high:  # then read as absent (`cpu_max_of`)
        bad.append((CPU_MAX, notes[CPU_MAX], f"at least {CPU_MIN} ({clip(notes[CPU_MIN])})"))
    if AUTOSCALE in notes and notes[AUTOSCALE].strip().lower() not in ("true", "false"):
        bad.append((AUTOSCALE, notes[AUTOSCALE], AUTOSCALE_FORMS))
    if CONTAINER in notes and notes[CONTAINER] not in container_names(pod):
        bad.append((CONTAINER, notes[CONTAINER], CONTAINER_FORMS))
    if URGENCY in notes and urgency_of(pod) is None:
        bad.append((URGENCY, notes[URGENCY], URGENCY_FORMS))
    for key in (WORKERS_MIN, WORKERS_MAX):
        if key in notes and workers_of(pod, key) is None:
            bad.append((key, notes[key], WORKERS_FORMS))
    if EXPECTED_DURATION in notes and expected_duration_of(pod) is None:
        bad.append((EXPECTED_DURATION, notes[EXPECTED_DURATION], EXPECTED_DURATION_FORMS))
    return bad
