"""Finish-time prediction from observed training progress.

Pure computation: no I/O and no clock; every time is passed in (epoch seconds).

Per job, a `JobModel` takes progress observations (`pysched.io/progress`: steps done at a time,
with the CPU count the job had during the interval that ends there) and learns the job's speed
model `t_step(c) = a + b / c` (Amdahl: `a` serial seconds, `b` parallel CPU-seconds per step):

- **Measured step time per CPU count**: the intervals between consecutive observations at one
  count give `sum(seconds) / sum(steps)` for that count (a ratio estimator: long intervals weigh
  more; stalled intervals count as time without steps).
- **Resized midway**: an interval whose two ends have different CPU counts is split at the resize
  time when the caller gives it (`resized_at`): the part before the resize is charged at the old
  count's measured step time, the rest of the steps go to the new count (`resized_at` equal to
  the previous observation's time gives the whole interval to the new count). Without the resize
  time the interval is skipped (it still anchors progress). If the old count was never measured
  (resized before its first report), the steps are shared with the prior's ratio of step times,
  with a wide uncertainty. Once a count has clean intervals its split intervals are dropped: they
  were estimates.
- **Observation times**: the annotation's whole-second stamps are truncated by the helper, so the
  middle of the second is taken (`ProgressStamp.middle`). A caller that knows when steps
  started may observe `0` steps then, so that the first report already gives a step time;
  otherwise the first report only anchors progress. A caller that only believes so (the bind:
  the container still has to start, and a run resumed from a checkpoint reports steps it did not
  do since) marks the start `provisional` (`JobModel.started`): the interval to the first report
  is then an estimate, replaced by the first measured interval at its count, as a split is. A
  first report within one progress interval of that start is the helper's (it writes its first
  report at once, after the start-up and a step or so): it anchors progress instead.
- **Prior** (fewer than two counts measured): a generic assumed serial fraction
  (`PRIOR_SERIAL_FRACTION` = 5% of the single-CPU step time) through the one measured count. It is
  never read from the model catalogue.
- **Fit** (two or more counts measured): weighted non-negative least squares of the measured step
  times on `1 / c` (weights: inverse variance of each count's measurement, relative residuals).
  A count that has been measured is predicted from its own measurement, not from the curve: the
  curve cannot represent a parallelism cap, and the measurement is the better estimate there.
- Below one CPU the whole step is throttled (CFS quota): `t(c) = t(1) / c` for `c < 1`.

Uncertainty band: a relative standard deviation `rel_sigma` of the predicted step time, and the
band is `remaining_s * (1 +- BAND_Z * rel_sigma)`, about 95% under a normal approximation:

- measured count: the spread of its intervals' step times divided by sqrt(number of intervals)
  (with fewer than two intervals, an assumed `SINGLE_INTERVAL_CV` of 5%), combined with the
  timestamp resolution (RFC 3339 whole seconds, `STAMP_RESOLUTION_S`, or the stamp's own fraction
  of a second when it has one: `pysched.api.annotations.stamp_resolution`) over the measured span and
  one step of counting resolution over the measured steps;
- fitted curve at an unmeasured count: the fit's relative RMS residual combined with the largest
  measured-count sigma, widened by `EXTRAPOLATION_WIDENING` per e-fold of distance outside the
  measured counts (a parallelism cap beyond the largest measured count is invisible to the fit);
- prior: the spread of the prior over serial fractions `PRIOR_SERIAL_RANGE`, combined with the
  measurement sigma of the one measured count.

Bad progress (backwards, beyond total steps, from the future, older than the last observation,
non-finite) is rejected with an `ObserveResult` whose verdict says why; the model is unchanged.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pysched.api.annotations import PROGRESS_INTERVAL, STAMP_RESOLUTION_S
from pysched.api.ids import PodKey

PRIOR_SERIAL_FRACTION = 0.05  # assumed serial share of the single-CPU step time (generic prior)
PRIOR_SERIAL_RANGE = (0.0, 0.25)  # serial fractions the prior's band spans
BAND_Z = 2.0  # band half-width in standard deviations (~95%)
SINGLE_INTERVAL_CV = 0.05  # assumed per-interval variation until two intervals are seen
# A first report sooner than this after a provisional start is the helper's first, written at once
# (the start-up and a step or so): the next one, an interval later, is truncated to whole seconds.
FIRST_REPORT_S = PROGRESS_INTERVAL - STAMP_RESOLUTION_S
EXTRAPOLATION_WIDENING = 0.1  # extra relative sigma per e-fold outside the measured counts
FUTURE_TOLERANCE_S = 5.0  # clock skew allowed between the training pod and the scheduler
MIN_REL_SIGMA = 1e-3  # floor, keeps fit weights finite


class Verdict(enum.Enum):
    ACCEPTED = "Accepted"
    DUPLICATE = "Duplicate"  # same steps and time as the last observation: nothing new
    MALFORMED = "Malformed"  # not `STEPS@RFC3339`, or non-finite numbers
    BACKWARDS = "Backwards"  # fewer steps than already observed
    STALE = "Stale"  # observed before the last accepted observation
    BEYOND_TOTAL = "BeyondTotal"  # more steps than the job has
    FUTURE = "Future"  # observed after `now` (beyond the clock-skew tolerance)
    BEFORE_START = "BeforeStart"  # observed before the run began (beyond the clock-skew tolerance)
    BAD_CPUS = "BadCpus"  # CPU count not positive and finite


@dataclass(frozen=True, slots=True)
class ObserveResult:
    """An observation's fate; a rejection's message is meant for a Warning event."""

    verdict: Verdict
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.ACCEPTED or self.verdict is Verdict.DUPLICATE


ACCEPTED = ObserveResult(Verdict.ACCEPTED)


@dataclass(frozen=True, slots=True)
class Observation:
    steps: int
    at: float
    cpus: float  # the CPU count during the interval that ends here
    resolution: float = STAMP_RESOLUTION_S  # how finely `at` was stamped
    provisional: bool = False  # a start the caller assumed (`JobModel.started`), not a report


@dataclass(frozen=True, slots=True)
class Interval:
    """Steps done in `seconds` at a constant CPU count (steps may be fractional after a split)."""

    seconds: float
    steps: float
    cpus: float
    # An estimate, replaced by the count's first measured interval: the new-count part of an
    # interval that contained a resize, or the interval from a provisional start.
    estimate: bool = False
    rel_sigma: float = 0.0  # an estimate's or a restored count's own relative uncertainty
    resolution: float = STAMP_RESOLUTION_S  # the coarser of its two stamps' resolutions
    restored: bool = False  # a count's summary read back from a previous leader's condition


class Source(enum.Enum):
    MEASURED = "measured"  # the count's own measured step time
    FITTED = "fitted"  # NNLS curve over two or more measured counts
    PRIOR = "prior"  # one measured count and the generic serial fraction


@dataclass(frozen=True, slots=True)
class CountStats:
    """What the intervals at one CPU count say."""

    cpus: float
    step_seconds: float  # sum(seconds) / sum(steps)
    rel_sigma: float
    seconds: float
    steps: float
    intervals: int
    estimate: bool = False  # only estimates so far (`Interval.estimate`), no measured interval


@dataclass(frozen=True, slots=True)
class SpeedFit:
    """`t(c) = a + b / c` for c >= 1, `(a + b) / c` below one CPU."""

    a: float
    b: float
    source: Source  # FITTED or PRIOR
    rel_rms: float  # relative RMS residual over the measured counts (0 for a prior)
    counts: tuple[float, ...]  # the measured counts it rests on

    def step_seconds(self, cpus: float) -> float:
        if cpus <= 0:
            return math.inf
        if cpus < 1:
            return (self.a + self.b) / cpus
        return self.a + self.b / cpus


@dataclass(frozen=True, slots=True)
class StepEstimate:
    cpus: float
    step_seconds: float
    rel_sigma: float
    source: Source


@dataclass(frozen=True, slots=True)
class Remaining:
    """The rest of a job at one CPU count: its steps, their seconds (central) and the relative
    sigma of the step time the seconds rest on."""

    steps: float
    seconds: float
    rel_sigma: float
    source: Source

    def upper(self, band_z: float) -> float:
        """Seconds at the band's upper edge, `band_z` sigmas out."""
        return self.seconds * (1 + band_z * self.rel_sigma)


# --- non-negative least squares, two parameters ------------------------------------------------


def nnls_amdahl(
    cpus: np.ndarray | list[float],
    step_seconds: np.ndarray | list[float],
    weights: np.ndarray | list[float] | None = None,
) -> tuple[float, float]:
    """Weighted least squares `y = a + b * x` with `x = 1 / c`, subject to a >= 0 and b >= 0.

    Solve unconstrained; if that is infeasible the convex optimum lies on the boundary, so take
    the best of a = 0, b = 0 (each with its own clamped optimum) and (0, 0). Counts below one CPU
    are mapped to the equivalent point at one CPU (`y * c`, the whole step is throttled)."""
    # Plain floats: a job refits after every report, on a handful of counts, where numpy's
    # per-call overhead is most of the cost. `_sum` keeps numpy's results bit for bit.
    c = [float(v) for v in cpus]
    w = [1.0] * len(c) if weights is None else [float(v) for v in weights]
    y = [float(v) * ci if ci < 1 else float(v) for v, ci in zip(step_seconds, c, strict=True)]
    x = [1.0 / max(ci, 1.0) for ci in c]
    wx = [wi * xi for wi, xi in zip(w, x, strict=True)]
    sw, swx, swy = _sum(w), _sum(wx), _sum([wi * yi for wi, yi in zip(w, y, strict=True)])
    swxx = _sum([wxi * xi for wxi, xi in zip(wx, x, strict=True)])
    swxy = _sum([wxi * yi for wxi, yi in zip(wx, y, strict=True)])

    def cost(a: float, b: float) -> float:
        return _sum([wi * _square(yi - a - b * xi) for wi, xi, yi in zip(w, x, y, strict=True)])

    det = sw * swxx - swx * swx
    if det > 1e-12 * max(sw * swxx, 1e-300):
        a = (swxx * swy - swx * swxy) / det
        b = (sw * swxy - swx * swy) / det
        if a >= 0 and b >= 0:
            return float(a), float(b)
    candidates = [(0.0, 0.0)]
    if swxx > 0:
        candidates.append((0.0, max(0.0, float(swxy / swxx))))
    if sw > 0:
        candidates.append((max(0.0, float(swy / sw)), 0.0))
    return min(candidates, key=lambda ab: cost(*ab))


def _sum(values: list[float]) -> float:
    """`np.sum`, bit for bit: numpy adds fewer than eight values one by one from zero (and in
    blocks beyond; Python's `sum` compensates since 3.12)."""
    if len(values) >= 8:
        return float(np.sum(values))
    total = 0.0
    for value in values:
        total += value
    return total


def _square(value: float) -> float:
    return value * value  # what numpy's `** 2` computes


def prior_fit(cpus: float, step_seconds: float, serial_fraction: float = PRIOR_SERIAL_FRACTION) -> SpeedFit:
    """The Amdahl curve with the assumed serial fraction through one measured point."""
    t1 = step_seconds * cpus if cpus < 1 else step_seconds / (serial_fraction + (1 - serial_fraction) / cpus)
    return SpeedFit(serial_fraction * t1, (1 - serial_fraction) * t1, Source.PRIOR, 0.0, (cpus,))


def prior_step_ratio(cpus: float, serial_fraction: float = PRIOR_SERIAL_FRACTION) -> float:
    """Step time on `cpus` relative to one CPU under the generic prior (the whole step is throttled
    below one CPU), for a job known only by its total steps."""
    if cpus < 1:
        return 1.0 / cpus
    return serial_fraction + (1.0 - serial_fraction) / cpus


# --- the per-job model ---------------------------------------------------------------------------


class JobModel:
    """One job's progress and speed model. Mutable; feed it observations in time order."""

    __slots__ = (
        "_base_sigma",
        "_dirty",
        "_fit",
        "_groups",
        "_intervals",
        "_last",
        "_prior_range",
        "_stats",
        "serial_fraction",
        "total_steps",
    )

    def __init__(self, total_steps: int, *, serial_fraction: float = PRIOR_SERIAL_FRACTION) -> None:
        if total_steps <= 0:
            raise ValueError(f"total_steps must be positive, got {total_steps}")
        self.total_steps = total_steps
        self.serial_fraction = serial_fraction
        self._last: Observation | None = None
        self._intervals: list[Interval] = []
        # Per CPU count: its intervals and their summary, recomputed only for the counts that got a
        # new interval (a job reports every minute for hours: never a pass over all of them).
        self._groups: dict[float, _CountSums] = {}
        self._stats: dict[float, CountStats] = {}
        self._dirty: set[float] = set()
        # Derived from `_stats` when first asked for: the curve, the largest measured sigma, and
        # for a prior the curves at the ends of its serial-fraction range.
        self._fit: SpeedFit | None = None
        self._base_sigma = 0.0
        self._prior_range: tuple[SpeedFit, ...] = ()

    @property
    def last(self) -> Observation | None:
        return self._last

    @property
    def intervals(self) -> tuple[Interval, ...]:
        return tuple(self._intervals)

    def out_of_bounds(self, steps: int, at: float, now: float) -> ObserveResult | None:
        """The rejection of a report no state of the model accepts (more steps than the job has,
        a time to come), else None: a reader that observes lazily can tell it at once."""
        if steps > self.total_steps:
            return ObserveResult(Verdict.BEYOND_TOTAL, f"progress {steps} steps exceeds total-steps {self.total_steps}")
        if at > now + FUTURE_TOLERANCE_S:
            return ObserveResult(Verdict.FUTURE, f"progress observed {at - now:.0f}s in the future")
        return None

    def observe(
        self,
        steps: int,
        at: float,
        cpus: float,
        now: float,
        *,
        resized_at: float | None = None,
        resolution: float = STAMP_RESOLUTION_S,
    ) -> ObserveResult:
        """Steps done at `at` (stamped to within `resolution` seconds), the job having run on
        `cpus` since the previous observation.

        If it ran on the previous observation's count until `resized_at` and on `cpus` after,
        say so: the interval is split at the resize. A rejection leaves the model unchanged."""
        if not (math.isfinite(at) and math.isfinite(now)):
            return ObserveResult(Verdict.MALFORMED, f"progress time {at!r} is not a finite time")
        if not (math.isfinite(cpus) and cpus > 0):
            return ObserveResult(Verdict.BAD_CPUS, f"CPU count {cpus!r} must be positive")
        if steps < 0:
            return ObserveResult(Verdict.MALFORMED, f"progress steps {steps} must not be negative")
        refused = self.out_of_bounds(steps, at, now)
        if refused is not None:
            return refused
        last = self._last
        current = Observation(steps, at, cpus, resolution)
        if last is None:
            self._last = current
            return ACCEPTED
        if last.provisional and at < last.at - FUTURE_TOLERANCE_S:
            # Not this run's: taken as its anchor, the next report would measure a day-long step.
            return ObserveResult(Verdict.BEFORE_START, f"progress observed {last.at - at:.0f}s before the run began")
        if last.provisional and at < last.at + FIRST_REPORT_S:
            self._last = current  # the helper's first report, written at once: the better anchor
            return ACCEPTED
        if steps == last.steps and at == last.at:
            return ObserveResult(Verdict.DUPLICATE)
        if at <= last.at:
            return ObserveResult(
                Verdict.STALE, f"progress observed at or before the last observation ({last.steps} steps)"
            )
        if steps < last.steps:
            return ObserveResult(Verdict.BACKWARDS, f"progress went backwards from {last.steps} to {steps} steps")
        self._add_interval(last, current, resized_at)
        self._last = current
        return ACCEPTED

    def restarted(self) -> None:
        """The job restarted and lost its progress: forget the progress, keep the speed data."""
        self._last = None

    def started(self, at: float, cpus: float) -> None:
        """A new run began at `at` on `cpus`, presumably from step 0 (a bind): the interval to
        its first report gives a step time at once, as an estimate until a measured one exists
        at that count (it also counts the container's start, or steps a resumed run did before);
        a first report sooner than `FIRST_REPORT_S` anchors progress instead."""
        self._last = Observation(0, at, cpus, provisional=True)

    def is_measured(self, cpus: float) -> bool:
        """Whether `cpus` has a measured interval, not only estimates."""
        group = self._groups.get(cpus)
        return group is not None and group.measured.intervals > 0

    def restore(self, counts: Iterable[CountStats]) -> None:
        """Take back what another scheduler (a previous leader) measured, one summary per CPU
        count, as if its intervals had been seen here; its uncertainty comes with it. Later
        observations at the same count are pooled with it."""
        for stats in counts:
            if stats.cpus > 0 and stats.step_seconds > 0 and stats.seconds > 0 and stats.rel_sigma >= 0:
                # The step time is the summary's point; the steps follow from it and the seconds.
                steps = stats.seconds / stats.step_seconds
                interval = Interval(stats.seconds, steps, stats.cpus, stats.estimate, stats.rel_sigma, restored=True)
                self._append(interval)

    def _add_interval(self, prev: Observation, cur: Observation, resized_at: float | None) -> None:
        seconds, steps = cur.at - prev.at, float(cur.steps - prev.steps)
        resolution = max(prev.resolution, cur.resolution)
        if prev.cpus == cur.cpus:
            self._append(Interval(seconds, steps, cur.cpus, estimate=prev.provisional, resolution=resolution))
        elif resized_at is not None and prev.at <= resized_at < cur.at:
            old_s, new_s = resized_at - prev.at, cur.at - resized_at
            old = self._count_stats().get(prev.cpus)
            if old is not None and old.step_seconds > 0:
                before = old_s / old.step_seconds
                after = steps - before
                sigma = before * old.rel_sigma / after if after > 0 else 0.0
            else:
                # The old count was never measured (resized before its first report): share the
                # steps with the prior's ratio of step times (t_new / t_old); its uncertainty
                # spans the prior's serial fractions and no speed change at all (a cap).
                def share(ratio: float) -> float:
                    return steps * new_s / (new_s + old_s * ratio)

                ratios = [_prior_ratio(prev.cpus, cur.cpus, f) for f in (self.serial_fraction, *PRIOR_SERIAL_RANGE)]
                after = share(ratios[0])
                spread = max(abs(share(r) / after - 1) for r in (*ratios[1:], 1.0)) if after > 0 else 0.0
                sigma = spread / BAND_Z
            if after <= 0:
                return
            self._append(Interval(new_s, after, cur.cpus, estimate=True, rel_sigma=sigma, resolution=resolution))
        else:
            return  # resized at an unknown time: skip the interval

    def _append(self, interval: Interval) -> None:
        self._intervals.append(interval)
        group = self._groups.get(interval.cpus)
        if group is None:
            group = self._groups[interval.cpus] = _CountSums()
        group.add(interval)
        self._dirty.add(interval.cpus)

    # --- estimates ---

    def _count_stats(self) -> dict[float, CountStats]:
        if self._dirty:
            for cpus in self._dirty:
                stats = _stats_of(cpus, self._groups[cpus])
                if stats is not None:
                    self._stats[cpus] = stats
                else:
                    self._stats.pop(cpus, None)
            self._dirty.clear()
            self._fit = None
        return self._stats

    def count_stats(self) -> tuple[CountStats, ...]:
        return tuple(sorted(self._count_stats().values(), key=lambda s: s.cpus))

    def speed(self) -> SpeedFit | None:
        """The fitted curve (two or more measured counts), the prior (one), or None (none)."""
        counts = self._count_stats()
        if self._fit is None and counts:
            fit = self._fit = self._fitted()
            self._base_sigma = max(s.rel_sigma for s in counts.values())
            if fit.source is Source.PRIOR:
                c1 = fit.counts[0]
                y1 = fit.step_seconds(c1)
                self._prior_range = tuple(prior_fit(c1, y1, f) for f in PRIOR_SERIAL_RANGE)
        return self._fit

    def _fitted(self) -> SpeedFit:
        stats = self.count_stats()
        if len(stats) == 1:
            return prior_fit(stats[0].cpus, stats[0].step_seconds, self.serial_fraction)
        weights = [1.0 / _square(s.step_seconds * max(s.rel_sigma, MIN_REL_SIGMA)) for s in stats]
        a, b = nnls_amdahl([s.cpus for s in stats], [s.step_seconds for s in stats], weights)
        fit = SpeedFit(a, b, Source.FITTED, 0.0, tuple(s.cpus for s in stats))
        rel = [(s.step_seconds - fit.step_seconds(s.cpus)) / s.step_seconds for s in stats]
        seconds = [s.seconds for s in stats]
        rms = math.sqrt(_sum([t * _square(r) for t, r in zip(seconds, rel, strict=True)]) / _sum(seconds))
        return SpeedFit(a, b, Source.FITTED, rms, fit.counts)

    def step_estimate(self, cpus: float) -> StepEstimate | None:
        """Seconds per step at `cpus`, with its relative sigma and where it comes from."""
        found = self.step_and_sigma(cpus)
        return None if found is None else StepEstimate(cpus, *found)

    def step_and_sigma(self, cpus: float) -> tuple[float, float, Source] | None:
        """`step_estimate` as a plain tuple (predictions price many counts per reconcile)."""
        own = self._count_stats().get(cpus)
        if own is not None:
            return own.step_seconds, own.rel_sigma, Source.MEASURED
        fit = self.speed()
        if fit is None:
            return None
        return self._curve_estimate(fit, cpus)

    def _curve_estimate(self, fit: SpeedFit, cpus: float) -> tuple[float, float, Source]:
        """The curve's estimate at a count, as if it were not measured."""
        t = fit.step_seconds(cpus)
        base = self._base_sigma
        if fit.source is Source.PRIOR:
            # The largest relative change of the prior's prediction over its serial-fraction range.
            spread = max(abs(other.step_seconds(cpus) / t - 1) for other in self._prior_range)
            return t, math.hypot(base, spread / BAND_Z), Source.PRIOR
        lo, hi = fit.counts[0], fit.counts[-1]  # `count_stats` order: ascending
        distance = math.log(lo / cpus) if cpus < lo else math.log(cpus / hi) if cpus > hi else 0.0
        return t, math.hypot(fit.rel_rms, base) + EXTRAPOLATION_WIDENING * distance, Source.FITTED

    def has_speed(self) -> bool:
        """Whether some count is measured (`speed` is not None), without fitting the curve."""
        return bool(self._count_stats())

    def measured(self) -> Mapping[float, CountStats]:
        """The measured counts, by CPU count: where `step_estimate` gives the count's own."""
        return self._count_stats()

    def curve_floor(self, lo: float, hi: float) -> tuple[float, float] | None:
        """Lower bounds of `step_estimate`'s step seconds and relative sigma over every count in
        [lo, hi] that is not measured; None while nothing is known.

        The curve's step time falls as the count grows, and its sigma grows with the distance from
        the measured counts (the fit's range, or the prior's one count), so the bounds are the step
        time at `hi` and the sigma at the point of [lo, hi] nearest those counts. Each is computed
        by the same float operations as the estimate itself, which round monotonically."""
        fit = self.speed()
        if fit is None:
            return None
        step = fit.step_seconds(hi)
        first, last = fit.counts[0], fit.counts[-1]
        nearest = hi if hi < first else lo if lo > last else None
        if nearest is not None:
            return step, self._curve_estimate(fit, nearest)[1]
        if fit.source is Source.PRIOR:
            return step, math.hypot(self._base_sigma, 0.0)
        return step, math.hypot(fit.rel_rms, self._base_sigma) + EXTRAPOLATION_WIDENING * 0.0

    def steps_at(self, now: float) -> float | None:
        """Steps done by `now`, extrapolated from the last observation at its own count."""
        last = self._last
        if last is None:
            return None
        if now <= last.at:
            return float(last.steps)
        est = self.step_and_sigma(last.cpus)
        if est is None or est[0] <= 0 or math.isinf(est[0]):
            return float(last.steps)
        return min(float(self.total_steps), last.steps + (now - last.at) / est[0])

    def remaining(
        self, cpus: float, now: float, *, from_start: bool = False, done: float | None = None
    ) -> Remaining | None:
        """What is left if the job runs on `cpus` from `now` on (all of it again when `from_start`:
        a restart loses the progress); None until the job's progress and some speed are known.
        `done`: `steps_at(now)`, when the caller has it already."""
        if done is None:
            done = self.steps_at(now)
        est = self.step_estimate(cpus)
        if done is None or est is None:
            return None
        steps = max(0.0, self.total_steps - (0.0 if from_start else done))
        return Remaining(steps, steps * est.step_seconds, est.rel_sigma, est.source)


def _prior_ratio(old: float, new: float, serial_fraction: float) -> float:
    """t(new) / t(old) under the prior with this serial fraction."""
    fit = prior_fit(1.0, 1.0, serial_fraction)
    return fit.step_seconds(new) / fit.step_seconds(old)


@dataclass(slots=True)
class _Sums:
    """Running sums over one kind of interval (measured, or estimates) at one CPU count,
    so that a count's summary costs the same after a thousand reports as after one."""

    intervals: int = 0
    seconds: float = 0.0
    steps: float = 0.0
    stepped: int = 0  # intervals with steps > 0; over them:
    weight: float = 0.0  # sum of seconds
    weight_sq: float = 0.0  # sum of seconds^2
    sy: float = 0.0  # sum of seconds x (seconds / steps)
    syy: float = 0.0  # sum of seconds x (seconds / steps)^2
    stamp: float = 0.0  # the coarsest stamp resolution
    estimate_sigma: float = 0.0  # the largest estimate's own sigma
    restored_sigma: float | None = None  # the first interval's, when restored from a previous leader

    def add(self, iv: Interval) -> None:
        if self.intervals == 0 and iv.restored:
            self.restored_sigma = iv.rel_sigma
        self.intervals += 1
        self.seconds += iv.seconds
        self.steps += iv.steps
        if iv.steps > 0:
            y = iv.seconds / iv.steps
            self.stepped += 1
            self.weight += iv.seconds
            self.weight_sq += iv.seconds * iv.seconds
            self.sy += iv.seconds * y
            self.syy += iv.seconds * y * y
        self.stamp = max(self.stamp, iv.resolution)
        if iv.estimate:
            self.estimate_sigma = max(self.estimate_sigma, iv.rel_sigma)


@dataclass(slots=True)
class _CountSums:
    measured: _Sums = field(default_factory=_Sums)
    estimates: _Sums = field(default_factory=_Sums)  # only used while the count has no measurement

    def add(self, iv: Interval) -> None:
        (self.estimates if iv.estimate else self.measured).add(iv)


def _stats_of(cpus: float, sums: _CountSums) -> CountStats | None:
    estimated = not sums.measured.intervals
    own = sums.estimates if estimated else sums.measured  # measurements replace estimates
    seconds, steps = own.seconds, own.steps
    if steps <= 0 or seconds <= 0:
        return None
    mean = seconds / steps
    if own.intervals == 1 and own.restored_sigma is not None:
        # A previous leader's summary already carries its spread and resolution.
        return CountStats(cpus, mean, max(own.restored_sigma, MIN_REL_SIGMA), seconds, steps, 1, estimated)
    if own.stepped >= 2:
        # sum(s (y / mean - 1)^2) / sum(s), expanded over the running sums
        var = max(0.0, (own.syy / (mean * mean) - 2.0 * own.sy / mean + own.weight) / own.weight)
        n_eff = own.weight * own.weight / own.weight_sq
        spread = math.sqrt(var / n_eff)
    else:
        spread = SINGLE_INTERVAL_CV
    resolution = math.hypot(own.stamp / seconds, 1.0 / steps)
    sigma = max(math.hypot(spread, resolution, own.estimate_sigma), MIN_REL_SIGMA)
    return CountStats(cpus, mean, sigma, seconds, steps, own.intervals, estimated)


MAX_CANDIDATES = 1024  # whole counts tried between the bounds; callers cap them by node capacity


def candidate_counts(cpu_min: float, cpu_max: float) -> Iterator[float]:
    """cpu_min, each whole count above it below cpu_max, cpu_max (ascending, no repeats). A range
    wider than MAX_CANDIDATES steps by more than one CPU, so no range can stall the caller."""
    if not (cpu_min > 0 and cpu_max >= cpu_min and math.isfinite(cpu_max)):
        return
    yield float(cpu_min)
    step = max(1, math.ceil((cpu_max - cpu_min) / MAX_CANDIDATES))
    c = math.floor(cpu_min) + step
    while c < cpu_max:
        yield float(c)
        c += step
    if cpu_max > cpu_min:
        yield float(cpu_max)


@functools.lru_cache(maxsize=4096)
def _candidate_table(cpu_min: float, cpu_max: float) -> tuple[tuple[float, ...], Mapping[float, int]]:
    """`candidate_counts` as a tuple with each count's position: a reconcile prices the same few
    ranges for every job, tick after tick."""
    counts = tuple(candidate_counts(cpu_min, cpu_max))
    return counts, {c: i for i, c in enumerate(counts)}


def predicted_finish(
    model: JobModel,
    now: float,
    done: float,
    cpus: float,
    *,
    current: float,
    margin: float,
    band_z: float,
    restart_s: float | None,
) -> float:
    """When the job ends on `cpus` (`done` steps by `now`), at the band's upper edge times
    `1 + margin`; inf while nothing is known of its speed. See `choose`."""
    cost = restart_s if restart_s is not None and cpus != current else None  # a move that restarts
    est = model.step_and_sigma(cpus)
    if est is None:
        return math.inf
    # `remaining` and `Remaining.upper`, operation for operation, without their objects.
    steps = max(0.0, model.total_steps - (0.0 if cost is not None else done))
    return now + steps * est[0] * (1 + band_z * est[1]) * (1 + margin) + (0.0 if cost is None else cost)


@dataclass(frozen=True, slots=True)
class Choice:
    """The smallest count that makes the deadline, with its predicted finish (None: none does)."""

    cpus: float | None
    finish: float  # predicted finish at `cpus`, or at the largest count tried when None


def choose(
    model: JobModel,
    deadline: float,
    now: float,
    lo: float,
    hi: float,
    *,
    current: float,
    margin: float = 0.0,
    band_z: float = BAND_Z,
    restart_s: float | None = None,
) -> Choice | None:
    """The smallest count in [lo, hi] (`candidate_counts`) whose remaining time, at the band's upper
    edge `band_z` sigmas out and times `1 + margin`, ends by the deadline; None when nothing is
    known of the job yet. `current` is the count the job runs on; with `restart_s` a move to
    another count restarts the job (its progress is lost) and costs that many seconds first,
    without it a move is in place."""
    done = model.steps_at(now)
    if done is None:
        return None
    counts, position = _candidate_table(lo, hi)
    if not counts:
        return Choice(None, math.inf)
    if not model.has_speed():
        return None

    def finish_at(cpus: float) -> float:
        return predicted_finish(
            model, now, done, cpus, current=current, margin=margin, band_z=band_z, restart_s=restart_s
        )

    # Every count but the measured ones and the current one is priced on the curve, with the same
    # steps left and restart cost: a run of such counts whose floor misses the deadline holds no
    # fit (a hopeless job is judged in a few steps, not one prediction per count).
    moved = restart_s is not None
    steps = max(0.0, model.total_steps - (0.0 if moved else done))
    extra = restart_s if restart_s is not None else 0.0

    def first_fit(run: Sequence[float]) -> Choice | None:
        pending = [(0, len(run) - 1)]
        while pending:
            i, j = pending.pop()
            if i < j:
                floor = model.curve_floor(run[i], run[j])
                assert floor is not None
                step, sigma = floor
                if now + steps * step * (1 + band_z * sigma) * (1 + margin) + extra > deadline:
                    continue
                middle = (i + j) // 2
                pending += [(middle + 1, j), (i, middle)]  # the lower half first
                continue
            at = finish_at(run[i])
            if at <= deadline:
                return Choice(run[i], at)
        return None

    # The counts priced one by one (the current one, the measured ones) split the others into
    # runs; ascending, each run before the count that ends it.
    own = sorted({i for c in (current, *model.measured()) if (i := position.get(c)) is not None})
    start = 0
    for i in (*own, len(counts)):
        if i > start:
            found = first_fit(counts[start:i])
            if found is not None:
                return found
        if i == len(counts):
            break
        at = finish_at(counts[i])
        if at <= deadline:
            return Choice(counts[i], at)
        start = i + 1
    return Choice(None, finish_at(counts[-1]))


def central_finish(
    model: JobModel, now: float, cpus: float, *, current: float, restart_s: float | None = None
) -> float:
    """The predicted finish at `cpus` without band or margin (what users are told); inf when
    nothing is known yet."""
    done = model.steps_at(now)
    if done is None or not (cpus > 0 and math.isfinite(cpus)):
        return math.inf
    return predicted_finish(model, now, done, cpus, current=current, margin=0.0, band_z=0.0, restart_s=restart_s)


# --- many jobs -----------------------------------------------------------------------------------


class Predictor:
    """The models of all jobs, keyed by pod."""

    __slots__ = ("_jobs",)

    def __init__(self) -> None:
        self._jobs: dict[PodKey, JobModel] = {}

    def job(self, key: PodKey, total_steps: int) -> JobModel:
        """The job's model; a new one when unknown or when its total steps changed."""
        model = self._jobs.get(key)
        if model is None or model.total_steps != total_steps:
            model = self._jobs[key] = JobModel(total_steps)
        return model

    def get(self, key: PodKey) -> JobModel | None:
        return self._jobs.get(key)

    def forget(self, key: PodKey) -> None:
        self._jobs.pop(key, None)

    def __len__(self) -> int:
        return len(self._jobs)
