"""The Deadline condition's words and the State condition's JSON, both ways."""

import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pysched.api.builders import pod_dict
from pysched.api.objects import pod_from_dict
from pysched.deadline.condition import (
    MAX_STATE_CHARS,
    JobRecord,
    clock_words,
    duration_words,
    earliest_finish_of,
    earliest_finish_words,
    forecast_words,
    parse_state,
    saved_job,
    state_message,
    verdict_words,
)
from pysched.deadline.predictor import CountStats, JobModel, central_finish, choose

NOW = 1_796_000_000.0  # 2026-11-29T...Z
DAY = NOW - NOW % 86400  # midnight UTC


def test_durations_read_as_a_countdown() -> None:
    seconds = (-5, 0, 45, 60, 18 * 60 + 29, 3600, 2 * 3600 + 5 * 60, 86400, 3 * 86400 + 4 * 3600)
    assert [duration_words(s) for s in seconds] == [
        "0s", "0s", "45s", "1m", "18m", "1h", "2h 5m", "1d", "3d 4h",
    ]  # fmt: skip


def test_the_forecast_says_when_how_far_from_the_deadline_and_at_what_size() -> None:
    start = DAY + 7 * 3600  # 07:00 UTC
    text = forecast_words(start + 18 * 60, start + 28 * 60, 2.0, start)
    assert text == "finishes in 18m (07:18 UTC), 10m before the deadline, at 2 CPUs"
    late = forecast_words(start + 86400 + 3600, start + 3600, 8.0, start)
    assert late.startswith("finishes in 1d 1h (") and late.endswith(" 08:00 UTC), 1d after the deadline, at 8 CPUs")
    assert late.count("-") == 2  # another day: the date is given
    assert (
        forecast_words(None, start + 600, 1.0, start)
        == "no prediction yet; the deadline is in 10m (07:10 UTC), at 1 CPUs"
    )
    assert forecast_words(math.inf, start - 60, None, start).startswith("no prediction yet; the deadline is 1m ago")


def test_a_finish_past_year_9999_is_told_so_not_a_crash() -> None:
    # 10^16 steps at one a minute: gmtime takes no time that far.
    assert clock_words(NOW + 1e18, NOW) == "after 9999" and clock_words(-1e18, NOW) == "before 0001"
    assert "(after 9999)" in forecast_words(NOW + 1e18, NOW + 3600, 2.0, NOW)


def test_a_verdict_says_by_how_much() -> None:
    start = DAY + 7 * 3600
    assert verdict_words(True, start, start + 600, True, start) == "met: finished 10m before the deadline (07:00 UTC)"
    assert verdict_words(False, start + 90, start, True, start) == "missed: finished 1m after the deadline (07:01 UTC)"
    assert verdict_words(False, start, start + 3600, False, start).startswith("missed: failed 1h before the deadline")


def test_the_state_round_trips_keeping_the_longest_measured_counts() -> None:
    counts = tuple(CountStats(float(c), 0.5 / c, 0.031, 100.0 * c, 200.0 * c * c, 3) for c in (1, 2, 3, 4, 8))
    record = JobRecord("Rescaled", "cpu 4 -> 8", NOW + 3600, NOW + 1800, 8.0, NOW - 60, counts, finish_sigma=42.04)
    message = state_message(record)
    assert json.loads(message)["version"] == 1 and len(message) < 1000
    back = parse_state(message)
    assert back is not None
    assert (back.reason, back.what, back.deadline, back.finish, back.cpus, back.last_rescale) == (
        "Rescaled", "cpu 4 -> 8", NOW + 3600, NOW + 1800, 8.0, NOW - 60,
    )  # fmt: skip
    assert [c.cpus for c in back.counts] == [2, 3, 4, 8]  # the four with the most measured time
    assert back.counts[-1].step_seconds == 0.0625 and back.counts[-1].rel_sigma == 0.031
    assert back.verdict is None and not back.counted and back.finish_sigma == 42.0
    judged = JobRecord("DeadlineMet", "met", NOW, verdict="met", ended_at=NOW - 5, counted=True)
    again = parse_state(state_message(judged))
    assert again is not None and (again.verdict, again.ended_at, again.counted) == ("met", NOW - 5, True)
    assert again.last_rescale == -math.inf and again.finish is None


def test_a_count_only_estimated_is_saved_so_and_restored_as_an_estimate() -> None:
    """A speed estimated from the bind alone (a resumed run may look far faster than it is) stays
    an estimate for a new leader: the next measured interval replaces it there too."""
    counts = (CountStats(2.0, 0.01, 0.05, 60.0, 6000.0, 1, estimate=True), CountStats(4.0, 0.5, 0.05, 60.0, 120.0, 1))
    record = JobRecord("OnTrack", "on track", NOW + 3600, NOW + 1800, 2.0, -math.inf, counts)
    back = parse_state(state_message(record))
    assert back is not None and [(c.cpus, c.estimate) for c in back.counts] == [(2.0, True), (4.0, False)]
    model = JobModel(100_000)
    model.restore(back.counts)
    assert not model.is_measured(2.0) and model.is_measured(4.0)
    model.observe(1000, NOW, 2.0, NOW)
    model.observe(1030, NOW + 60, 2.0, NOW + 60)  # 2 s a step, measured: the estimate is gone
    estimate = model.step_estimate(2.0)
    assert model.is_measured(2.0) and estimate is not None and estimate.step_seconds == 2.0


def test_a_state_pysched_did_not_write_is_ignored() -> None:
    good = json.loads(state_message(JobRecord("OnTrack", "on track", NOW)))
    assert parse_state(json.dumps(good)) is not None
    for bad in (
        "not json",
        "[1, 2]",
        json.dumps({**good, "version": 2}),  # a newer pysched's
        json.dumps({**good, "version": "1"}),
        json.dumps({**good, "reason": 7}),
        json.dumps({**good, "verdict": "maybe"}),
        json.dumps({**good, "pad": "x" * MAX_STATE_CHARS}),
    ):
        assert parse_state(bad) is None, bad
    # Wrong types inside are dropped field by field, not believed.
    odd = parse_state(json.dumps({**good, "cpus": "lots", "finish": 12, "measured": [{"cpus": True}, "x", 3]}))
    assert odd is not None and odd.cpus is None and odd.finish is None and odd.counts == ()


@given(st.text(max_size=300))
def test_any_state_message_parses_or_is_refused(message: str) -> None:
    record = parse_state(message)
    assert record is None or isinstance(record.reason, str)


def _pod(*conditions: dict[str, Any]) -> Any:
    raw = pod_dict("job", cpu="1")
    raw.setdefault("status", {})["conditions"] = list(conditions)
    return pod_from_dict(raw)


def test_a_new_leader_reads_the_state_else_what_the_previous_version_wrote() -> None:
    state = state_message(JobRecord("OnTrack", "on track", NOW, NOW - 100, 2.0, NOW - 500))
    pod = _pod(
        {"type": "pysched.io/Deadline", "status": "True", "reason": "OnTrack", "message": "on track: ..."},
        {"type": "pysched.io/State", "status": "True", "reason": "OnTrack", "message": state},
    )
    saved = saved_job(pod)
    assert saved is not None and (saved.finish, saved.last_rescale) == (NOW - 100, NOW - 500)
    older = (
        "cpu 2 -> 4: predicted finish 2026-11-30T14:02:10Z vs deadline 2026-11-30T15:00:00Z; "
        "measured 2 CPUs 0.51234 s/step ±3.10% (4570 steps in 2341 s); lastRescale=1764500000"
    )
    legacy = saved_job(_pod({"type": "pysched.io/Deadline", "status": "True", "reason": "Rescaled", "message": older}))
    assert legacy is not None and legacy.reason == "Rescaled" and legacy.what == "cpu 2 -> 4"
    assert legacy.last_rescale == 1764500000 and legacy.finish is not None
    assert [(c.cpus, c.step_seconds, c.rel_sigma) for c in legacy.counts] == [(2.0, 0.51234, 0.031)]
    assert saved_job(_pod()) is None


def test_a_rejected_jobs_earliest_finish_reads_back_from_its_words() -> None:
    now = 1_796_083_200.0
    words = earliest_finish_words(now + 3900, now)
    assert words == "the earliest deadline it would be admitted with is in 1h 5m (2026-12-01T01:05:00Z)"
    older = "the earliest finish alongside the admitted jobs is in 1h 5m (2026-12-01T01:05:00Z)"  # before an upgrade
    assert earliest_finish_of(f"not admitted; {older}: waits") == now + 3900
    assert earliest_finish_of(f"deadline +600s from now cannot be planned; {words}: runs as best-effort") == now + 3900
    assert earliest_finish_of(earliest_finish_words(math.inf, now) + ": waits") == math.inf
    assert earliest_finish_of("not admitted") is None
    assert earliest_finish_of("the earliest finish alongside the admitted jobs is in 5m (yesterday)") is None


def test_a_kept_measurement_out_of_any_real_range_is_dropped() -> None:
    """Another writer's or a corrupted State: numbers the predictor could not compute with (a
    denormal CPU count, a step of 1e-300 s) are not believed; the sane ones beside them are."""
    sane = {"cpus": 2, "stepSeconds": 0.5, "relSigma": 0.05, "steps": 1000, "seconds": 500}
    good = json.loads(state_message(JobRecord("OnTrack", "on track", NOW)))
    for field, value in (("cpus", 5e-324), ("stepSeconds", 1e-300), ("seconds", 1.7e308), ("stepSeconds", 1e300)):
        record = parse_state(json.dumps({**good, "measured": [{**sane, field: value}, {**sane, "cpus": 4}]}))
        assert record is not None and [c.cpus for c in record.counts] == [4.0], (field, value)


@given(
    st.floats(0.001, 1e6),
    st.floats(1e-6, 1e7),
    st.floats(0.0, 100.0),
    st.floats(1e-6, 1e9),
    st.floats(0.001, 64.0),
)
def test_any_kept_measurement_read_back_predicts_without_error(
    cpus: float, step: float, sigma: float, seconds: float, now_cpus: float
) -> None:
    good = json.loads(state_message(JobRecord("OnTrack", "on track", NOW)))
    item = {"cpus": cpus, "stepSeconds": step, "relSigma": sigma, "steps": seconds / step, "seconds": seconds}
    record = parse_state(json.dumps({**good, "measured": [item]}))
    assert record is not None and len(record.counts) == 1
    model = JobModel(10**16 - 1)
    model.restore(record.counts)
    model.observe(0, NOW - 60, now_cpus, NOW)
    finish = central_finish(model, NOW, now_cpus, current=now_cpus)
    assert not math.isnan(finish)
    choose(model, NOW + 3600, NOW, 0.001, 64.0, current=now_cpus, margin=0.1, band_z=2.0, restart_s=None)
