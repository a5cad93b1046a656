"""Deadline planning over a pool of units (GPUs): each job's minimum satisfactory share, admission, and
the leftover by marginal gain. Pure computation: times and predictions are passed in.

The resource-time model: a job that holds `n` units from `start` on finishes `seconds[n]` later (its
predicted run time at `n`, the band's upper edge), plus `pause_s` when it is running on another
count (a change of count restarts the workers from a checkpoint). A plan walks the admitted deadline
jobs in deadline order and reserves for each the fewest units that finish it by its deadline on what
the earlier ones leave: a rectangle `[start, finish) x n`, starting now or when capacity frees up.
That count is the job's *minimum satisfactory share*. A running job is never stopped for another:
until its turn in that order it holds its *floor* (its smallest count, from now until it would
finish on it), so a job due earlier fits around it or starts after it, never in its place. A job
none of whose counts fits is *at risk*: it keeps no reservation (a running one keeps its floor) and
competes for the leftover like a best-effort job. The units free now are then handed out one count
step at a time to whichever job gains the most rate per unit (1 / remaining seconds), so short jobs
and efficient scale-ups come first and a job that scales badly is left where it is.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from pysched.api.ids import JobKey

MIN_HOLD_S = 1.0  # the shortest reservation: what a job holds now is taken now


@dataclass(frozen=True, slots=True)
class Demand:
    """One job as the planner sees it."""

    key: JobKey
    seconds: Mapping[int, float]  # predicted seconds to finish when holding each count, from now
    held: int = 0  # units it holds now (0: not running)
    pause_s: float = 0.0  # cost of moving a running job to another count
    deadline: float | None = None  # absolute; None: best-effort
    # The counts it may finish on, fewest first (a fold asks at every step: computed once).
    counts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        counts = tuple(sorted(n for n, s in self.seconds.items() if n > 0 and math.isfinite(s)))
        object.__setattr__(self, "counts", counts)

    def duration(self, n: int) -> float:
        """Seconds from a start at `n` to the finish, the pause of a change included."""
        pause = self.pause_s if self.held and n != self.held else 0.0
        return self.seconds.get(n, math.inf) + pause


@dataclass(frozen=True, slots=True)
class Reservation:
    key: JobKey
    units: int
    start: float
    end: float


@dataclass(slots=True)
class Timeline:
    """Units reserved over time, as a step function: `levels[i]` units are reserved from
    `times[i]` until `times[i + 1]` (the last level lasts forever; it is 0)."""

    capacity: int
    times: list[float] = field(default_factory=lambda: [-math.inf])
    levels: list[int] = field(default_factory=lambda: [0])

    def _split(self, t: float) -> int:
        """The index of the step that starts at `t`, made if needed."""
        i = bisect.bisect_right(self.times, t) - 1
        if self.times[i] == t:
            return i
        self.times.insert(i + 1, t)
        self.levels.insert(i + 1, self.levels[i])
        return i + 1

    def peak(self, start: float, end: float) -> int:
        """The most units reserved at any moment of [start, end)."""
        i = bisect.bisect_right(self.times, start) - 1
        j = bisect.bisect_left(self.times, end)
        return max(self.levels[i:j]) if j > i else self.levels[i]

    def fits(self, units: int, start: float, end: float) -> bool:
        return self.peak(start, end) + units <= self.capacity

    def starts(self, now: float) -> list[float]:
        """Where a new rectangle may begin: now, or when the reserved units drop."""
        found = [now]
        for k in range(1, len(self.times)):
            if self.times[k] > now and self.levels[k] < self.levels[k - 1]:
                found.append(self.times[k])
        return found

    def reserve(self, reservation: Reservation) -> None:
        i, j = self._split(reservation.start), self._split(reservation.end)
        for k in range(i, j):
            self.levels[k] += reservation.units

    def release(self, reservation: Reservation) -> None:
        """Take a reservation made before off again."""
        self.reserve(Reservation(reservation.key, -reservation.units, reservation.start, reservation.end))

    def empty(self) -> bool:
        return len(self.times) == 1 and self.levels[0] == 0

    def stack(self, start: float, ends: Sequence[tuple[float, int]]) -> None:
        """On an empty timeline: each `(end, units)` reserved from `start` (every end after it),
        as that many `reserve` calls would leave it."""
        if not ends:
            return
        by_end: dict[float, int] = {}
        for end, units in ends:
            by_end[end] = by_end.get(end, 0) + units
        level = sum(by_end.values())
        self.times, self.levels = [-math.inf, start], [0, level]
        for end in sorted(by_end):
            level -= by_end[end]
            self.times.append(end)
            self.levels.append(level)

    def copy(self) -> Timeline:
        return Timeline(self.capacity, list(self.times), list(self.levels))

    def used_at(self, t: float) -> int:
        return self.levels[bisect.bisect_right(self.times, t) - 1]


def _placements(
    demand: Demand, timeline: Timeline, now: float, until: float, pinned: bool = True
) -> Iterator[Reservation]:
    """For each count, fewest first, its earliest start that fits on what `timeline` leaves and
    ends by `until`; a running job starts now (it is not stopped to wait) unless not `pinned`."""
    starts = [now] if demand.held and pinned else timeline.starts(now)
    for n in demand.counts:
        if n > timeline.capacity:
            return
        # A job predicted done (its last steps left, or run past its prediction) still holds its
        # units until it ends: an empty rectangle would let the next job take them again.
        duration = max(demand.duration(n), MIN_HOLD_S)
        for start in starts:
            if start + duration > until:
                break  # later starts end later still
            if timeline.fits(n, start, start + duration):
                yield Reservation(demand.key, n, start, start + duration)
                break


def minimum_share(demand: Demand, timeline: Timeline, now: float) -> Reservation | None:
    """The fewest units that finish the job by its deadline on what `timeline` leaves, with the
    earliest start for that count. None when no count does (or the job has no deadline)."""
    if demand.deadline is None:
        return None
    return next(_placements(demand, timeline, now, demand.deadline), None)


def earliest_finish(demand: Demand, timeline: Timeline, now: float) -> float:
    """The soonest the job could finish on what `timeline` leaves (inf: never), a running one
    from now on (it is not stopped to wait for room, so admission never plans it later)."""
    return min((r.end for r in _placements(demand, timeline, now, math.inf)), default=math.inf)


@dataclass(frozen=True, slots=True)
class Plan:
    reserved: Mapping[JobKey, Reservation]  # admitted jobs that can meet their deadlines
    at_risk: frozenset[JobKey]  # admitted deadline jobs no count saves under the plan
    targets: Mapping[JobKey, int]  # units each job should hold now (absent: none)


def _deadline_order(demand: Demand) -> tuple[float, JobKey]:
    return (demand.deadline if demand.deadline is not None else math.inf), demand.key


def _reserve(demand: Demand, timeline: Timeline, reserved: dict[JobKey, Reservation], now: float) -> bool:
    """Reserve the job's minimum share on what `timeline` leaves; False when it has none."""
    share = minimum_share(demand, timeline, now)
    if share is None:
        return False
    timeline.reserve(share)
    reserved[demand.key] = share
    return True


def _floor(demand: Demand, now: float) -> Reservation | None:
    """What a running job holds whatever the plan: its smallest count (a rigid job's own), or
    what it holds when that is less (a gang partly placed), from now until it would finish on
    that count. A running job is never stopped for another, so a job planned before it in
    deadline order must fit around this, or start after it. Running jobs hold no more than the
    capacity together, so every floor fits."""
    if not demand.held or not demand.counts:
        return None
    n = demand.counts[0]
    return Reservation(demand.key, min(n, demand.held), now, now + max(demand.duration(n), MIN_HOLD_S))


def _floors(demands: Iterable[Demand], timeline: Timeline, now: float) -> dict[JobKey, Reservation]:
    """Each running job's floor, reserved on `timeline` (those that fit)."""
    found = [floor for demand in demands if (floor := _floor(demand, now)) is not None]
    floors: dict[JobKey, Reservation] = {}
    if found and timeline.empty() and sum(f.units for f in found) <= timeline.capacity:
        # All from now and together within the capacity, so every one fits: laid down at once.
        floors = {f.key: f for f in reversed(found)}  # the first of a key, in their order
        floors = {f.key: f for f in found if floors[f.key] is f}
        timeline.stack(now, [(f.end, f.units) for f in floors.values()])
        return floors
    for floor in found:
        if floor.key not in floors and timeline.fits(floor.units, floor.start, floor.end):
            timeline.reserve(floor)
            floors[floor.key] = floor
    return floors


def _floor_is_share(demand: Demand, floor: Reservation, now: float) -> bool:
    """The job's minimum share would be the floor it gives up: its fewest count from now (where
    the floor's own units fit again) ending when that count would end it, by its deadline."""
    if demand.deadline is None or not demand.counts or floor.end > demand.deadline:
        return False
    n = demand.counts[0]
    return floor.units == n and floor.end == now + max(demand.duration(n), MIN_HOLD_S)


def _reserve_in_turn(
    demand: Demand,
    timeline: Timeline,
    reserved: dict[JobKey, Reservation],
    floors: dict[JobKey, Reservation],
    now: float,
) -> bool:
    """`_reserve` at the job's place in deadline order: a running job's floor is given up for its
    share, and kept when no count meets its deadline (it runs on anyway)."""
    floor = floors.pop(demand.key, None)
    if floor is not None:
        if _floor_is_share(demand, floor, now):
            reserved[demand.key] = floor  # its share is the very rectangle it holds: nothing moves
            return True
        timeline.release(floor)
    if _reserve(demand, timeline, reserved, now):
        return True
    if floor is not None:
        timeline.reserve(floor)
        floors[demand.key] = floor
    return False


def reserve_all(
    demands: Iterable[Demand], capacity: int, now: float, holding: Sequence[Demand] = ()
) -> tuple[Timeline, dict[JobKey, Reservation]]:
    """Minimum satisfactory shares in deadline order (ties by key), around what running jobs hold
    (those of `holding` too, which are not planned: a running job being judged)."""
    timeline = Timeline(capacity)
    reserved: dict[JobKey, Reservation] = {}
    ordered = sorted((d for d in demands if d.deadline is not None), key=_deadline_order)
    floors = _floors([*holding, *ordered], timeline, now)
    for demand in ordered:
        _reserve_in_turn(demand, timeline, reserved, floors, now)
    return timeline, reserved


def plan(
    admitted: Sequence[Demand], best_effort: Sequence[Demand], capacity: int, now: float, efficiency: float = 0.0
) -> Plan:
    """Reserve the admitted jobs' minimum shares, then hand out what is free now by marginal gain
    among every job (admitted jobs above their share, at-risk and best-effort jobs from their
    floor when running, from zero when not). A
    step up from a count is taken only where the rate it adds per unit is at least `efficiency`
    times the rate per unit the job already has, so units go where they are really used."""
    # Running jobs are never stopped for another: the admitted ones' shares are planned around
    # what the others hold, and each running job without a share now keeps its floor.
    _, reserved = reserve_all(admitted, capacity, now, holding=[d for d in best_effort if d.held])
    targets = {key: r.units for key, r in reserved.items() if r.start <= now}
    everyone = [*admitted, *best_effort]
    free = capacity - sum(targets.values())
    for demand in everyone:
        floor = _floor(demand, now)
        if floor is not None and demand.key not in targets and floor.units <= free:
            targets[demand.key] = floor.units
            free -= floor.units
    at_risk = frozenset(d.key for d in admitted if d.deadline is not None and d.key not in reserved)
    _leftover(everyone, targets, free, efficiency)
    return Plan(reserved, at_risk, targets)


def _rate(demand: Demand, n: int) -> float:
    if n <= 0:
        return 0.0
    duration = demand.duration(n)
    return 1.0 / duration if duration > 0 and math.isfinite(duration) else 0.0


def _next_count(demand: Demand, n: int) -> int | None:
    for count in demand.counts:
        if count > n:
            return count
    return None


def _leftover(demands: Sequence[Demand], targets: dict[JobKey, int], free: int, efficiency: float) -> None:
    """Greedy by rate gained per unit; a step only where the next count is faster by enough."""
    by_key = {d.key: d for d in demands}
    heap: list[tuple[float, JobKey, int]] = []

    def offer(demand: Demand) -> None:
        now_n = targets.get(demand.key, 0)
        nxt = _next_count(demand, now_n)
        if nxt is None:
            return
        gain = (_rate(demand, nxt) - _rate(demand, now_n)) / (nxt - now_n)
        if gain > 0 and (now_n == 0 or gain >= efficiency * _rate(demand, now_n) / now_n):
            heapq.heappush(heap, (-gain, demand.key, nxt))

    for demand in demands:
        offer(demand)
    while heap and free > 0:
        _, key, nxt = heapq.heappop(heap)
        demand = by_key[key]
        step = nxt - targets.get(key, 0)
        if step > free:
            continue  # too big for what is left; smaller steps of others may still fit
        targets[key] = nxt
        free -= step
        offer(demand)


MAX_DEADLINE_TRIES = 4  # admitted deadlines tried after a refused job's earliest finish


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: bool
    finish: float  # the soonest the job could finish planned after the admitted ones (inf: never)


def admit(candidate: Demand, admitted: Sequence[Demand], capacity: int, now: float) -> Admission:
    """Admit the job only if the plan with it still finds a share for every job that had one
    without it, and one for the job itself."""
    return Admission(*_admit(candidate, admitted, capacity, now))


def earliest_deadline(candidate: Demand, admitted: Sequence[Demand], capacity: int, now: float, finish: float) -> float:
    """The earliest deadline a refused job would have been admitted with (inf: never), from its
    `finish` planned after the admitted jobs (`Admission.finish`): that, unless a deadline that
    early puts it ahead of admitted jobs it then makes miss; then each later admitted deadline is
    tried in turn (a few), the job planned after that one. With a deadline after every admitted one
    it is planned last and admitted, so what it is told is never a deadline that would be refused.
    Each try is a whole second, rounded up: a deadline is written in whole seconds, and one rounded
    down could be refused."""
    if not math.isfinite(finish):
        return finish
    later = sorted({d.deadline for d in admitted if d.deadline is not None and d.deadline > finish})
    tries = [math.ceil(finish), *(math.floor(t) + 1 for t in later[:MAX_DEADLINE_TRIES])]
    for deadline in tries:
        if _admit(dataclasses.replace(candidate, deadline=float(deadline)), admitted, capacity, now)[0]:
            return float(deadline)
    return float(math.floor(later[-1]) + 1) if later else float(math.ceil(finish))


def _admit(candidate: Demand, admitted: Sequence[Demand], capacity: int, now: float) -> tuple[bool, float]:
    """The verdict, and the soonest the candidate could finish planned after the admitted jobs.

    The plan with it is the plan without it up to its place in the deadline order (a fold over
    that order), so it goes on from there; with every key distinct it stops at the first job
    that loses its share."""
    ordered = sorted((d for d in admitted if d.deadline is not None), key=_deadline_order)
    # Where the sort of `[*admitted, candidate]` (stable) puts the candidate.
    place = (
        len(ordered)
        if candidate.deadline is None
        else bisect.bisect_right(ordered, _deadline_order(candidate), key=_deadline_order)
    )
    timeline = Timeline(capacity)
    # What running jobs hold (the candidate too, if it runs) is theirs in both plans.
    floors = _floors([candidate, *ordered], timeline, now)
    before: dict[JobKey, Reservation] = {}
    for demand in ordered[:place]:
        _reserve_in_turn(demand, timeline, before, floors, now)
    plan_with, after, floors_with = timeline.copy(), dict(before), dict(floors)
    for demand in ordered[place:]:
        _reserve_in_turn(demand, timeline, before, floors, now)
    own = floors.pop(candidate.key, None)  # the candidate's floor is no obstacle to its own finish
    if own is not None:
        timeline.release(own)
    earliest = earliest_finish(candidate, timeline, now)
    rest = [candidate] if candidate.deadline is not None else []
    rest += ordered[place:]
    distinct = len({d.key for d in ordered} | {candidate.key}) == len(ordered) + 1
    for demand in rest:
        if (
            not _reserve_in_turn(demand, plan_with, after, floors_with, now)
            and distinct
            and (demand is candidate or demand.key in before)
        ):
            return False, earliest  # a job that had a share, or the candidate, has none
    return candidate.key in after and all(key in after for key in before), earliest
