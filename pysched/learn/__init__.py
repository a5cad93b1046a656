"""Learned scheduling policies: Gymnasium environments that run the production scheduler on the
simulated cluster (registered on import as `pysched/Ordering-v0` and `pysched/Allocation-v0`), the
least-laxity heuristic the ordering policy warm-starts from, online tuning of Autoscale's args
with a bandit (`pysched.learn.tuning`), and (with the `learn` extra) training and export
(`pysched.learn.train`)."""

from __future__ import annotations

import gymnasium as gym

ORDERING_ID = "pysched/Ordering-v0"
ALLOCATION_ID = "pysched/Allocation-v0"

if ORDERING_ID not in gym.registry:
    gym.register(id=ORDERING_ID, entry_point="pysched.learn.ordering:OrderingEnv")
if ALLOCATION_ID not in gym.registry:
    gym.register(id=ALLOCATION_ID, entry_point="pysched.learn.allocation:AllocationEnv")
