"""Step counts and progress values are bounded: an overlong value reads as malformed, never raises."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from pysched.api.annotations import (
    CPU_MAX,
    CPU_MIN,
    DEADLINE,
    MAX_STEP_DIGITS,
    PROGRESS,
    TOTAL_STEPS,
    TOTAL_STEPS_FORMS,
    ProgressReport,
    deadline_of,
    format_progress,
    invalid_annotations,
    parse_progress,
    stamp_resolution,
    total_steps_of,
)
from pysched.api.builders import make_pod
from pysched.api.limits import MAX_EPOCH, MAX_STEPS, MIN_EPOCH

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
        assert invalid_annotations(pod) == [(TOTAL_STEPS, steps, TOTAL_STEPS_FORMS)]  # progress: InvalidProgress
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


@given(st.integers(-5, MAX_STEPS + 5), st.floats(MIN_EPOCH - 1e6, MAX_EPOCH + 1e6))
@example(0, 1_796_040_005.999)
@example(MAX_STEPS, MAX_EPOCH)
@example(MAX_STEPS + 1, 0.0)
@example(-1, 0.0)
@example(7, MAX_EPOCH + 0.5)
@example(7, MIN_EPOCH - 0.5)
@example(7, -0.5)
def test_a_simulated_report_reads_as_its_written_string(steps: int, when: float) -> None:
    """The simulator hands plugins the numbers the training helper would write, without the
    string: they must be exactly what the string reads back as (every replay depends on it)."""
    text = format_progress(steps, when)
    report = ProgressReport.written(steps, when)
    parsed = parse_progress(text)
    stamp = report.stamp
    if parsed is None:
        assert stamp is None
    else:
        assert stamp is not None and (stamp.steps, stamp.at) == parsed
        assert stamp.resolution == stamp_resolution(text) and stamp.middle == parsed[1] + stamp_resolution(text) / 2
    assert report.text == text


def test_a_report_of_text_is_parsed_once_asked_and_keeps_a_malformed_text() -> None:
    report = ProgressReport.of_text("12@2026-11-30T12:00:05.250Z")
    stamp = report.stamp
    assert stamp is not None and (stamp.steps, stamp.at) == (12, 1_796_040_005.25) and stamp.resolution == 0.001
    bad = ProgressReport.of_text("twelve@noon")
    assert bad.stamp is None and bad.text == "twelve@noon"
