"""Least laxity over feature rows, given each job's true run time, which the simulator knows and
the scheduler does not: the teacher of the warm start (DL2's supervised start, here from
privileged information), which the network then has to approach from what it can see (a job's
total steps, its deadline). With no run times it is EDF over the window."""

from __future__ import annotations

import numpy as np

from pysched.deadline.features import FEATURES, TIME_SCALE_S

BEST_EFFORT = FEATURES.index("best_effort")
TO_DEADLINE = FEATURES.index("to_deadline")
POSITION = FEATURES.index("position")


def least_laxity_known(features: np.ndarray, allowed: np.ndarray, run_seconds: np.ndarray) -> int:
    """The allowed deadline row of least laxity given its true run time; a job that can no longer
    meet its deadline goes after the others, as DeadlineLaxity demotes one (best-effort), and
    those go in window order."""
    squashed = features[:, TO_DEADLINE].astype(np.float64)
    left = np.sign(squashed) * TIME_SCALE_S * np.expm1(np.abs(squashed))
    laxity = left - run_seconds
    feasible = allowed & (features[:, BEST_EFFORT] < 0.5) & (laxity >= 0)
    if feasible.any():
        return int(np.argmin(np.where(feasible, laxity, np.inf)))
    return int(np.argmin(np.where(allowed, features[:, POSITION], np.inf)))
