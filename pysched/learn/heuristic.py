"""The teachers of the warm start (DL2's supervised start, here from privileged information the
simulator has and the scheduler does not), which the network then has to approach from what a
pod shows (its total steps tell its kind of job, its deadline the time left).

`least_laxity_known` orders by laxity given each job's run time (its true one, or its kind's
typical one). `most_to_lose` knows only what a job of its kind typically takes and how far one
may stray from it, as the network can at best, and picks the job whose chance of meeting its
deadline drops most if it waits."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from pysched.deadline.features import FEATURES, TIME_SCALE_S

BEST_EFFORT = FEATURES.index("best_effort")
TO_DEADLINE = FEATURES.index("to_deadline")
POSITION = FEATURES.index("position")

# How long a job passed over now is taken to wait for its next chance, in seconds: on the
# training workloads (seed-insufficient, seeds 0-199) 900 to 1,200 s did best as a teacher on
# its own, and both 600 and 2,400 s did worse.
WAIT_S = 1200.0
MIN_SPREAD = 0.02  # a kind's runs taken to stray at least this much (a deterministic truth: 0)
_STANDARD_NORMAL = NormalDist()


def time_left(features: np.ndarray) -> np.ndarray:
    """Seconds to each row's deadline, unsquashed."""
    squashed = features[:, TO_DEADLINE].astype(np.float64)
    left: np.ndarray = np.sign(squashed) * TIME_SCALE_S * np.expm1(np.abs(squashed))
    return left


def least_laxity_known(features: np.ndarray, allowed: np.ndarray, run_seconds: np.ndarray) -> int:
    """The allowed deadline row of least laxity given its run time; a job that can no longer
    meet its deadline goes after the others, as DeadlineLaxity demotes one (best-effort), and
    those go in window order. With no run times it is EDF over the window."""
    laxity = time_left(features) - run_seconds
    feasible = allowed & (features[:, BEST_EFFORT] < 0.5) & (laxity >= 0)
    if feasible.any():
        return int(np.argmin(np.where(feasible, laxity, np.inf)))
    return int(np.argmin(np.where(allowed, features[:, POSITION], np.inf)))


def most_to_lose(
    features: np.ndarray,
    allowed: np.ndarray,
    typical_seconds: np.ndarray,
    spread: np.ndarray,
    wait_s: float = WAIT_S,
) -> int:
    """The allowed deadline row whose chance of meeting its deadline falls most if it starts
    `wait_s` later, its run time taken as normal around its kind's typical time (standard
    deviation `spread` times it). Least laxity would start a job on the brink, which often
    misses anyway, before one that meets its deadline now but not after a wait. When no row has
    anything to lose (each safe or lost either way), least laxity at the typical times."""
    left = time_left(features)
    deadline_rows = allowed & (features[:, BEST_EFFORT] < 0.5) & (typical_seconds > 0)
    loss = np.zeros(features.shape[0])
    for i in np.flatnonzero(deadline_rows):
        sd = typical_seconds[i] * max(float(spread[i]), MIN_SPREAD)
        now = _STANDARD_NORMAL.cdf((left[i] - typical_seconds[i]) / sd)
        later = _STANDARD_NORMAL.cdf((left[i] - wait_s - typical_seconds[i]) / sd)
        loss[i] = now - later
    if deadline_rows.any() and loss.max() > 1e-6:
        return int(np.argmax(np.where(deadline_rows, loss, -np.inf)))
    return least_laxity_known(features, allowed, typical_seconds)
