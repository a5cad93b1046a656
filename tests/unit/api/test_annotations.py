"""Step counts and progress values are bounded: an overlong value reads as malformed, never raises."""

from __future__ import annotations

from pysched.api.annotations import (
    CPU_MAX,
    CPU_MIN,
    DEADLINE,
    MAX_STEP_DIGITS,
    PROGRESS,
    PROGRESS_FORMS,
    TOTAL_STEPS,
    TOTAL_STEPS_FORMS,
    deadline_of,
    invalid_annotations,
    parse_progress,
    total_steps_of,
)
from pysched.api.builders import make_pod

LONGEST = "9" * MAX_STEP_DIGITS


def test_step_counts_of_up_to_16_digits_are_read() -> None:
    assert parse_progress(f"{LONGEST}@2026-11-30T12:00:05Z") == (int(LONGEST), 1_796_040_005.0)
    assert total_steps_of(make_pod("p", annotations={TOTAL_STEPS: LONGEST})) == int(LONGEST)


def test_longer_values_are_malformed_not_errors() -> None:
    # 5,000 digits is past int()'s 4,300-digit limit: parsing it must not raise
    for steps in ("1" * (MAX_STEP_DIGITS + 1), "1" * 5000):
        progress = f"{steps}@2026-11-30T12:00:05Z"
        assert parse_progress(progress) is None
        pod = make_pod("p", annotations={TOTAL_STEPS: steps, PROGRESS: progress})
        assert total_steps_of(pod) is None
        assert invalid_annotations(pod) == [
            (TOTAL_STEPS, steps, TOTAL_STEPS_FORMS),
            (PROGRESS, progress, PROGRESS_FORMS),
        ]
    assert parse_progress("1@2026-11-30T12:00:05Z" + " " * 200_000) is None


def test_a_pods_deadline_and_total_steps_read_the_same_however_often_and_however_padded() -> None:
    # Each distinct short value is parsed once and remembered; a long (padded) one is read as is.
    for pad in ("", " " * 100):
        pod = make_pod("p", annotations={TOTAL_STEPS: f"{pad}1200{pad}", DEADLINE: f"{pad}2026-11-30T12:00:05Z{pad}"})
        for _ in range(2):
            assert (total_steps_of(pod), deadline_of(pod)) == (1200, 1_796_040_005.0)
    relative = make_pod("q", annotations={DEADLINE: "1h"})
    later = relative.evolve(created=relative.created + 60.0)
    assert deadline_of(later) == relative.created + 3660.0  # a duration counts from each pod's creation


def test_a_cpu_max_below_cpu_min_is_told() -> None:
    pod = make_pod("p", annotations={CPU_MIN: "4", CPU_MAX: "2"})
    assert invalid_annotations(pod) == [(CPU_MAX, "2", f"at least {CPU_MIN} ('4')")]
    assert invalid_annotations(make_pod("q", annotations={CPU_MIN: "2", CPU_MAX: "2"})) == []
