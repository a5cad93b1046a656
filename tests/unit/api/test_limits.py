"""Every bound of the API's parsers: values a node could never have, or that would overflow
C longs, int64 tables or datetime, are refused where they are read."""

import pytest

from pysched.api.annotations import (
    CPU_MAX,
    DEADLINE,
    TOTAL_STEPS,
    cpu_milli_of,
    deadline_of,
    parse_duration,
    parse_progress,
    total_steps_of,
)
from pysched.api.builders import make_pod, pod_dict
from pysched.api.limits import MAX_STEPS, clip
from pysched.api.resources import QuantityError, parse_quantity, pod_requests, to_scheduler_units
from pysched.api.times import parse_rfc3339


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("cpu", "1Ei"),
        ("cpu", "9223372036854775807"),
        ("memory", "1e30"),
        ("memory", "1e999999999"),
        ("cpu", "9" * 5000),
        ("cpu", 1e300),
        ("cpu", float("inf")),
        ("cpu", float("nan")),
        ("memory", 2**80),
    ],
)
def test_quantities_beyond_any_node_are_refused_with_a_short_message(resource: str, value: object) -> None:
    with pytest.raises(QuantityError) as err:
        to_scheduler_units(resource, value)  # type: ignore[arg-type]
    assert len(str(err.value)) < 200


def test_bounded_quantities_still_read_exactly() -> None:
    assert to_scheduler_units("cpu", "1e3") == 1_000_000
    assert to_scheduler_units("memory", "8Pi") == 8 * 2**50
    assert to_scheduler_units("cpu", "1e-999999999") == 1  # a tiny request rounds up to 1m
    assert parse_quantity("1e40") == 10**40  # within the exponent bound, refused later by size


def test_a_pod_whose_containers_sum_past_the_bound_is_refused() -> None:
    pod = pod_dict("p", memory="6Pi")  # each container within 8 PiB, the two together not
    pod["spec"]["containers"] *= 2
    with pytest.raises(QuantityError, match="more than any node"):
        pod_requests(pod)


@pytest.mark.parametrize(
    "value",
    [
        "1" * 4301 + "@2026-11-30T12:00:00Z",  # int() refuses more than 4,300 digits
        f"{MAX_STEPS + 1}@2026-11-30T12:00:00Z",
        "5@" + "9" * 200_000,
        "x" * 200_000,
        "\u00b2@2026-11-30T12:00:00Z",
        "\u0661\u0662@2026-11-30T12:00:00Z",
        "10@9999-12-31T23:59:59-23:59",  # after year 9999 in UTC
    ],
)
def test_hostile_progress_values_read_as_malformed(value: str) -> None:
    assert parse_progress(value) is None


def test_a_valid_progress_value_still_reads() -> None:
    assert parse_progress("1200@2026-11-30T12:00:05Z") == (1200, 1796040005.0)


@pytest.mark.parametrize(
    "value", ["99999999999999999999h", "\u0661\u0662h", "9999-12-31T23:59:59-23:59", "1" * 100 + "h"]
)
def test_hostile_deadlines_read_as_malformed(value: str) -> None:
    assert deadline_of(make_pod("p", annotations={DEADLINE: value})) is None


def test_durations_take_ascii_digits_only() -> None:
    assert parse_duration("1h30m") == 5400.0
    assert parse_duration("\u0661\u0662h") is None


@pytest.mark.parametrize("value", ["\u00b2", "9" * 5000, str(MAX_STEPS + 1), "0", "-1", "1e3"])
def test_hostile_step_counts_read_as_malformed(value: str) -> None:
    assert total_steps_of(make_pod("p", annotations={TOTAL_STEPS: value})) is None


@pytest.mark.parametrize("value", ["9" * 5000, "1e999999999", "1Ei", "-2", "0"])
def test_hostile_cpu_bounds_read_as_malformed(value: str) -> None:
    assert cpu_milli_of(make_pod("p", annotations={CPU_MAX: value}), CPU_MAX) is None


def test_times_are_bounded_in_length_and_alphabet() -> None:
    assert parse_rfc3339("2026-11-30T12:00:00Z") == 1796040000.0
    assert parse_rfc3339("2026-11-30T12:00:00Z" + " " * 10) == 1796040000.0
    assert parse_rfc3339("2026-11-30T12:00:00" + "0" * 100 + "Z") is None
    assert parse_rfc3339("\u0662\u0660\u0662\u0666-11-30T12:00:00Z") is None


def test_clip_cuts_long_values_and_says_how_long_they_were() -> None:
    assert clip("short") == "'short'"
    shown = clip("x" * 200_000)
    assert len(shown) <= 80 and "200000 chars" in shown
