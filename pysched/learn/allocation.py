"""`pysched/Allocation-v0`: for the running deadline jobs Autoscale looks at together, a step
down, keep or a step up each.

Each episode replays a generated workload on the simulated cluster with the production scheduler
and the built-in `pysched` profile; Autoscale hands the jobs it looks at in one reconcile to the
agent, `window` at a time, and acts on its answers through its own machinery (the node's room
shared in deadline order, in-place steps, cooldown), so a policy learns on the scheduler that
deploys it. Observation: one row per job (`pysched.deadline.allocation.FEATURES`, which include
Autoscale's own answer), padded with zero rows to K. Action: `MultiDiscrete([3] * K)`, one of
`allocation.ACTIONS` per row; `action_masks()` allows only "keep" on padding rows. Answering
every row with its `heuristic` column replays the `pysched` profile exactly.

Rewards, seeds and reproducibility as for `pysched/Ordering-v0` (`pysched.learn.base`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from pysched.api.limits import clip
from pysched.deadline.allocation import ACTIONS, FEATURES, KEEP, WIDTH
from pysched.learn.base import SimulatedEnv
from pysched.learn.episodes import ALLOCATION_ENV, Decision

ENV_PROFILE = "pysched"  # the profile an episode runs; its Autoscale asks the agent
HEURISTIC_COLUMN = FEATURES.index("heuristic")


def heuristic_answers(rows: np.ndarray) -> np.ndarray:
    """Autoscale's own answer for each row (the `heuristic` column: -1, 0, +1)."""
    answers: np.ndarray = np.rint(rows[:, HEURISTIC_COLUMN]).astype(np.int64) + KEEP
    return answers


class AllocationEnv(SimulatedEnv):
    kind = ALLOCATION_ENV
    width = WIDTH
    default_profile = ENV_PROFILE

    def _action_space(self, window: int) -> gym.Space[Any]:
        return gym.spaces.MultiDiscrete([len(ACTIONS)] * window)

    def _answer(self, action: Any, decision: Decision) -> np.ndarray:
        """The real rows' answers (padding rows' are not read). An action outside the action
        space is refused here, before the run sees it: Autoscale would take it for a policy's bug
        and act on its own answers."""
        answers = np.asarray(action)
        if (
            answers.shape != (self.window,)
            or answers.dtype.kind not in "iu"
            or not ((answers >= 0) & (answers < len(ACTIONS))).all()
        ):
            raise ValueError(
                f"action: {self.window} whole numbers, each 0 (down), 1 (keep) or 2 (up); got {clip(repr(action))}"
            )
        return answers[: decision.features.shape[0]].astype(np.int64)

    def action_masks(self) -> np.ndarray:
        """Per row, which of the three answers may be given, flattened row by row (as
        sb3-contrib's MaskablePPO reads a MultiDiscrete mask)."""
        mask = np.zeros((self.window, len(ACTIONS)), dtype=np.bool_)
        mask[:, KEEP] = True
        if self._decision is not None:
            mask[: min(self.window, self._decision.features.shape[0])] = True
        return mask.reshape(-1)
