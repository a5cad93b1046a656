"""The deadline planner: minimum satisfactory shares are minimal, admission never admits a set
its own model cannot meet, and the leftover never exceeds the capacity."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.api.ids import JobKey
from pysched.deadline.planner import (
    MIN_HOLD_S,
    Admission,
    Demand,
    Reservation,
    Timeline,
    admit,
    earliest_deadline,
    earliest_finish,
    minimum_share,
    plan,
    reserve_all,
)

NOW = 1000.0


def amdahl_demand(key: str, work: float, deadline: float | None, top: int = 8, held: int = 0) -> Demand:
    """`work` seconds on one unit, 10% serial: seconds(n) = work * (0.1 + 0.9 / n)."""
    return Demand(JobKey(key), {n: work * (0.1 + 0.9 / n) for n in range(1, top + 1)}, held, 30.0, deadline)


def test_the_fewest_units_that_meet_the_deadline_are_reserved() -> None:
    timeline = Timeline(8)
    # 1000 s of work due in 400 s: n = 3 gives 400 s exactly, n = 2 gives 550 s.
    share = minimum_share(amdahl_demand("a", 1000.0, NOW + 400.0), timeline, NOW)
    assert share == Reservation(JobKey("a"), 3, NOW, NOW + 400.0)


def test_a_job_waits_for_units_an_earlier_deadline_frees() -> None:
    timeline = Timeline(4)
    timeline.reserve(Reservation(JobKey("first"), 4, NOW, NOW + 100.0))
    share = minimum_share(amdahl_demand("b", 100.0, NOW + 300.0), timeline, NOW)
    assert share is not None and share.start == NOW + 100.0 and share.units == 1
    # a running job is never planned to stop and wait: it has no share here
    assert minimum_share(amdahl_demand("c", 100.0, NOW + 300.0, held=2), timeline, NOW) is None


def test_a_running_job_finishes_from_now_on_what_is_free_beside_the_others() -> None:
    timeline = Timeline(4)
    timeline.reserve(Reservation(JobKey("first"), 2, NOW, NOW + 100.0))
    running = amdahl_demand("c", 100.0, NOW + 50.0, held=2)
    assert minimum_share(running, timeline, NOW) is None  # 55 s on its 2 units: after its deadline
    # It is never stopped to wait for the first's units: its 2 units from now, (0.1 + 0.9 / 2) x 100 s
    # (4 units after the first, with a change's 30 s pause, would end later still).
    assert earliest_finish(running, timeline, NOW) == NOW + 55.0


def test_a_change_of_count_pays_its_pause() -> None:
    timeline = Timeline(8)
    running = amdahl_demand("a", 1000.0, NOW + 400.0, held=4)  # 4 units: 325 s; 3 units: 400 + 30 s pause
    share = minimum_share(running, timeline, NOW)
    assert share is not None and share.units == 4


def test_admission_refuses_a_job_that_would_make_an_admitted_one_miss() -> None:
    first = amdahl_demand("first", 800.0, NOW + 200.0)  # its share: 6 units, (0.1 + 0.9 / 6) * 800 = 200 s
    second = amdahl_demand("second", 800.0, NOW + 200.0)
    assert admit(first, [], 8, NOW).admitted
    verdict = admit(second, [first], 8, NOW)
    assert not verdict.admitted
    # soonest: after the first, on all 8 units (170 s), not beside it on the 2 left (440 s)
    assert verdict.finish == NOW + 200.0 + 170.0
    assert earliest_deadline(second, [first], 8, NOW, verdict.finish) == verdict.finish  # planned last there
    assert admit(amdahl_demand("later", 800.0, NOW + 400.0), [first], 8, NOW).admitted


def test_the_leftover_goes_where_it_gains_most_and_never_exceeds_the_capacity() -> None:
    short = Demand(JobKey("short"), {1: 100.0, 2: 50.0}, 0, 0.0, None)  # scales perfectly
    flat = Demand(JobKey("flat"), {1: 1000.0, 2: 990.0}, 0, 0.0, None)  # barely faster on two
    result = plan([], [short, flat], 3, NOW)
    assert result.targets == {"short": 2, "flat": 1}
    # With room for both: the flat job's second unit would add 1% of its rate, far below half of
    # what a unit gives it now, so it stays on one; the short job's second unit doubles its rate.
    assert plan([], [short, flat], 8, NOW, efficiency=0.5).targets == {"short": 2, "flat": 1}
    assert plan([], [short, flat], 8, NOW).targets == {"short": 2, "flat": 2}


@st.composite
def demands(draw: st.DrawFn) -> list[Demand]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        work = draw(st.floats(10.0, 2000.0))
        serial = draw(st.floats(0.0, 0.5))
        top = draw(st.integers(1, 8))
        held = draw(st.sampled_from([0, 0, 1, 2, 4]))
        held = min(held, top)
        deadline = NOW + draw(st.floats(10.0, 3000.0))
        seconds = {n: work * (serial + (1 - serial) / n) for n in range(1, top + 1)}
        out.append(Demand(JobKey(f"j{i}"), seconds, held, draw(st.floats(0.0, 100.0)), deadline))
    return out


@settings(max_examples=200, deadline=None)
@given(demands(), st.integers(1, 12))
def test_every_admitted_set_is_met_under_the_plan(jobs: list[Demand], capacity: int) -> None:
    """Running jobs hold their floors from the start (they ran before any newcomer came, and one
    may miss its deadline on what it holds whatever the verdicts); every job admitted after them
    keeps its share."""
    admitted: list[Demand] = []
    for job in sorted(jobs, key=lambda d: not d.held):  # stable: the running ones first
        if admit(job, admitted, capacity, NOW).admitted:
            admitted.append(job)
    timeline, reserved = reserve_all(admitted, capacity, NOW)
    newcomers = [d for d in admitted if not d.held]
    assert {d.key for d in newcomers} <= set(reserved)
    for demand in newcomers:
        r = reserved[demand.key]
        assert r.end <= (demand.deadline or math.inf) and r.start >= NOW
        assert r.end == r.start + demand.duration(r.units)
    assert max(timeline.levels) <= capacity


@settings(max_examples=200, deadline=None)
@given(demands(), st.integers(1, 12), st.data())
def test_the_minimum_share_is_minimal(jobs: list[Demand], capacity: int, data: st.DataObject) -> None:
    *earlier, job = jobs
    timeline, _ = reserve_all(earlier, capacity, NOW)
    share = minimum_share(job, timeline, NOW)
    starts = [NOW] if job.held else [NOW + k * 5.0 for k in range(0, 700)]  # every 5 s over the horizon
    deadline = job.deadline or math.inf
    smaller = [n for n in job.counts if share is None or n < share.units]
    for n in smaller:
        for start in starts:
            end = start + job.duration(n)
            assert not (end <= deadline and timeline.fits(n, start, end)), (n, start)


@settings(max_examples=100, deadline=None)
@given(demands(), demands(), st.integers(1, 12))
def test_a_plan_hands_out_at_most_the_capacity(admitted: list[Demand], others: list[Demand], capacity: int) -> None:
    others = [Demand(JobKey(f"b{d.key}"), d.seconds, d.held, d.pause_s, None) for d in others]
    result = plan(admitted, others, capacity, NOW)
    assert sum(result.targets.values()) <= capacity
    for key, units in result.targets.items():
        job = next(d for d in (*admitted, *others) if d.key == key)
        assert units in job.counts or units == job.held  # a floor is what a gang partly placed holds
    if sum(min(d.held, d.counts[0]) for d in (*admitted, *others) if d.held and d.counts) <= capacity:
        for job in (*admitted, *others):  # a running job is never stopped: it keeps at least its floor
            if job.held and job.counts:
                assert result.targets.get(job.key, 0) >= min(job.held, job.counts[0]), job.key


def test_a_waiting_job_is_planned_beside_what_a_running_best_effort_job_cannot_give_back() -> None:
    """The refused job runs on 8 units and can shrink to 1, never to 0: the admitted newcomer
    was given all 8, which could never be free, and waited beside 7 idle units."""
    refused = Demand(JobKey("a"), {n: 30000.0 / n for n in (1, 2, 4, 8)}, held=8, pause_s=30.0)
    newcomer = amdahl_demand("b", 4000.0, NOW + 2000.0)
    result = plan([newcomer], [refused], 8, NOW)
    assert result.targets[JobKey("a")] == 1
    assert 1 <= result.targets[JobKey("b")] <= 7


@settings(max_examples=300, deadline=None)
@given(demands(), st.integers(1, 12), st.data())
def test_admission_is_the_two_plans_it_compares(jobs: list[Demand], capacity: int, data: st.DataObject) -> None:
    """Admission goes on from the plan without the candidate, and stops at the first loss: the
    verdict and earliest finish are those of the two whole plans (ties, repeated keys and jobs
    without a deadline included)."""
    *admitted, candidate = jobs
    if data.draw(st.booleans()) and admitted:  # the candidate ties with an admitted job's deadline
        candidate = Demand(candidate.key, candidate.seconds, candidate.held, candidate.pause_s, admitted[0].deadline)
    if data.draw(st.booleans()) and admitted:
        admitted.append(Demand(admitted[0].key, candidate.seconds, 0, 0.0, candidate.deadline))  # a key twice
    if data.draw(st.booleans()):
        candidate = Demand(candidate.key, candidate.seconds, candidate.held, candidate.pause_s, None)
    # A running candidate holds its floor in both plans (it runs on whatever the verdict).
    timeline, before = reserve_all(admitted, capacity, NOW, holding=[candidate])
    _, after = reserve_all([*admitted, candidate], capacity, NOW, holding=[candidate])
    verdict = admit(candidate, admitted, capacity, NOW)
    assert verdict.admitted == (candidate.key in after and all(key in after for key in before))
    if verdict.admitted and not candidate.held:
        assert verdict.finish == earliest_finish(candidate, timeline, NOW)
    told = earliest_deadline(candidate, admitted, capacity, NOW, verdict.finish)
    if not verdict.admitted and math.isfinite(told) and candidate.deadline is not None:
        # What the refused job is told: a deadline that would have been admitted.
        moved = Demand(candidate.key, candidate.seconds, candidate.held, candidate.pause_s, told)
        assert admit(moved, admitted, capacity, NOW).admitted


def _plain_reserve_all(
    demands: list[Demand], capacity: int, now: float, holding: list[Demand]
) -> tuple[Timeline, dict[JobKey, Reservation]]:
    """The plan as the planner's docstring states it, one reservation at a time: each running
    job's floor (those that fit), then in deadline order each gives its floor up for its minimum
    share, or keeps it when it has none."""
    timeline = Timeline(capacity)
    ordered = sorted((d for d in demands if d.deadline is not None), key=lambda d: (d.deadline, d.key))
    floors: dict[JobKey, Reservation] = {}
    for d in [*holding, *ordered]:
        if d.held and d.counts and d.key not in floors:
            n = d.counts[0]
            floor = Reservation(d.key, min(n, d.held), now, now + max(d.duration(n), MIN_HOLD_S))
            if timeline.fits(floor.units, floor.start, floor.end):
                timeline.reserve(floor)
                floors[d.key] = floor
    reserved: dict[JobKey, Reservation] = {}
    for d in ordered:
        held = floors.pop(d.key, None)
        if held is not None:
            timeline.reserve(Reservation(d.key, -held.units, held.start, held.end))
        share = minimum_share(d, timeline, now)
        if share is not None:
            timeline.reserve(share)
            reserved[d.key] = share
        elif held is not None:
            timeline.reserve(held)
            floors[d.key] = held
    return timeline, reserved


@settings(max_examples=300, deadline=None)
@given(demands(), demands(), st.integers(1, 12), st.integers(0, 2))
def test_the_plan_is_the_plain_fold(jobs: list[Demand], more: list[Demand], capacity: int, fewest: int) -> None:
    """The planner's shortcuts (running floors laid down at once, a floor kept as the share it
    would be given again) leave the very timeline and shares of the fold done step by step."""
    # Counts from `fewest` + 1 on: a job may hold fewer units than its fewest count (a gang partly placed).
    jobs = [Demand(d.key, {n + fewest: t for n, t in d.seconds.items()}, d.held, d.pause_s, d.deadline) for d in jobs]
    holding = [Demand(JobKey(f"h{d.key}"), d.seconds, d.held, d.pause_s, d.deadline) for d in more]
    # A key both judged and planned, running on another count in each.
    holding.append(Demand(jobs[0].key, more[0].seconds, max(1, more[0].held), more[0].pause_s, jobs[0].deadline))
    timeline, reserved = reserve_all(jobs, capacity, NOW, holding=holding)
    plain_timeline, plain_reserved = _plain_reserve_all(jobs, capacity, NOW, holding)
    assert reserved == plain_reserved
    assert (timeline.times, timeline.levels) == (plain_timeline.times, plain_timeline.levels)


@given(st.lists(st.tuples(st.floats(1.0, 100.0), st.integers(1, 8)), max_size=12))
def test_stacked_floors_are_their_reservations_one_by_one(ends: list[tuple[float, int]]) -> None:
    stacked, one_by_one = Timeline(1000), Timeline(1000)
    stacked.stack(0.0, ends)
    for end, units in ends:
        one_by_one.reserve(Reservation(JobKey("j"), units, 0.0, end))
    assert (stacked.times, stacked.levels) == (one_by_one.times, one_by_one.levels)


def test_a_job_predicted_done_keeps_its_units_until_it_ends() -> None:
    """A rigid job run past its prediction has 0 (or less) left at its count: its units are
    still taken now, so the plan never hands out more than the capacity."""
    for left in (0.0, -5.0):
        done = Demand(JobKey("a"), {4: left}, held=4, deadline=100.0)
        waiting = Demand(JobKey("b"), {4: 50.0}, deadline=100.0)
        result = plan([done, waiting], [], 4, 0.0)
        assert result.targets == {JobKey("a"): 4} and sum(result.targets.values()) <= 4
        assert result.reserved[JobKey("b")].start == MIN_HOLD_S  # once the first is gone
        assert admit(waiting, [done], 4, 0.0) == Admission(True, MIN_HOLD_S + 50.0)
