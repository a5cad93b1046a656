"""The CPU count a deadline job should run on, from its speed model."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pysched.deadline.predictor import BAND_Z, JobModel, candidate_counts


@dataclass(frozen=True, slots=True)
class Choice:
    """The smallest count that makes the deadline, with its predicted finish (None: none does)."""

    cpus: float | None
    finish: float  # predicted finish at `cpus`, or at the largest count tried when None


def choose(
    model: JobModel,
    deadline: float,
    now: float,
    current: float,
    lo: float,
    hi: float,
    margin: float,
    restart: bool,
    restart_s: float,
    band_z: float = BAND_Z,
) -> Choice | None:
    """Smallest count in [lo, hi] predicted to finish by the deadline; None when nothing is known
    yet. Moving a restarting container to another count starts its run again."""
    done = model.steps_at(now)
    if done is None:
        return None
    finish = math.inf
    for cpus in candidate_counts(lo, hi):
        est = model.step_estimate(cpus)
        if est is None:
            return None
        moves = cpus != current
        steps = model.total_steps - (0.0 if restart and moves else done)
        remaining = max(0.0, steps) * est.step_seconds * (1 + band_z * est.rel_sigma) * (1 + margin)
        finish = now + remaining + (restart_s if restart and moves else 0.0)
        if finish <= deadline:
            return Choice(cpus, finish)
    return Choice(None, finish)


def central_finish(model: JobModel, now: float, current: float, cpus: float, restart: bool, restart_s: float) -> float:
    """The predicted finish at `cpus` without band or margin (what users are told); inf when
    nothing is known yet."""
    choice = choose(model, -math.inf, now, current, cpus, cpus, 0.0, restart, restart_s, 0.0)
    return math.inf if choice is None else choice.finish
