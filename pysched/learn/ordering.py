"""`pysched/Ordering-v0`: which of the first K waiting jobs goes next.

Each episode replays a generated workload on the simulated cluster with the production
scheduler and the `learned` profile; its LearnedQueueSort hands every choice among two pods or
more to the agent. Observation: the window's feature rows (`pysched.deadline.features`), padded
with zero rows to K. Action: a row; `action_masks()` marks the rows that may be picked (real pods
of the head's priority). A masked action is read as row 0, the queue's own order.

Reward, per step: `met` for each deadline job that finished by its deadline since the last step,
`missed` for each that finished late or whose deadline passed unfinished, minus `jct_per_hour`
times the completion time of each deadline job that finished. The episode ends with the run.
Episodes draw their workload seed from `seeds` with the environment's generator, so
`reset(seed=s)` makes the whole episode reproducible; train and test seeds are disjoint ranges.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from pysched.api.limits import clip
from pysched.deadline.features import WIDTH
from pysched.learn.base import SimulatedEnv
from pysched.learn.episodes import ORDERING_ENV, Decision

LEARNED_PROFILE = "learned"


class OrderingEnv(SimulatedEnv):
    kind = ORDERING_ENV
    width = WIDTH
    default_profile = LEARNED_PROFILE

    def _action_space(self, window: int) -> gym.Space[Any]:
        return gym.spaces.Discrete(window)

    def _answer(self, action: Any, decision: Decision) -> int:
        """The row picked; one the mask does not allow (a padding row, another priority, no room)
        reads as row 0. An action outside the action space is refused."""
        value = np.asarray(action)
        if value.shape != () or value.dtype.kind not in "iu" or not 0 <= int(value) < self.window:
            raise ValueError(f"action: a row number from 0 to {self.window - 1}, got {clip(repr(action))}")
        index, allowed = int(value), decision.allowed
        return index if index < allowed.shape[0] and allowed[index] else 0

    def action_masks(self) -> np.ndarray:
        mask = np.zeros(self.window, dtype=np.bool_)
        if self._decision is not None:
            allowed = self._decision.allowed[: self.window]
            mask[: allowed.shape[0]] = allowed
        if not mask.any():
            mask[0] = True  # the episode ended: any action, read as row 0
        return mask
