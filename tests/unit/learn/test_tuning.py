"""Online tuning: a bandit swaps Autoscale's args between reconciles; with the profile's own args
it replays the profile exactly, other arms change what happens, UCB1 settles on the best arm."""

import asyncio
import dataclasses

import pytest

from pysched.learn.tuning import OnlineTuner, Ucb1, parse_arm, tuned_run, with_arm
from pysched.plugins import default_registry
from pysched.plugins.autoscale import Autoscale
from pysched.plugins.autoscale.args import AutoscaleArgs
from pysched.plugins.builtin import builtin_config
from pysched.sim.runner import run_policy
from pysched.sim.scenario import builtin_scenario

SEED = 1  # a seed of `small` (never a held-out one) on which the margins give different results


def test_one_arm_with_the_profile_s_own_args_replays_the_profile_exactly() -> None:
    registry = default_registry()
    config = builtin_config(registry)
    plain = asyncio.run(run_policy(builtin_scenario(SEED, "small"), config, "pysched", registry, seed=SEED))
    tuned, tuner = asyncio.run(
        tuned_run(builtin_scenario(SEED, "small"), config, registry, SEED, [{"safetyMargin": 0.05}], 600.0)
    )
    assert dataclasses.asdict(tuned) == dataclasses.asdict(plain)
    assert len(tuner.periods) > 3 and {p.arm for p in tuner.periods} == {0}


def test_the_arms_played_are_the_args_autoscale_decides_with() -> None:
    registry = default_registry()
    config = builtin_config(registry)
    seen: list[float] = []
    arms = [{"safetyMargin": 0.05}, {"safetyMargin": 0.0}, {"safetyMargin": 0.3, "cooldownSeconds": 300}]

    class Watching(OnlineTuner):
        def _play(self, arm: int) -> None:
            super()._play(arm)
            scaler = self._scalers[0][0]
            assert isinstance(scaler, Autoscale)
            seen.append(scaler.controller.args.safety_margin)
            if arm == 2:
                assert scaler.controller.args.cooldown_seconds == 300
            else:
                assert scaler.controller.args.cooldown_seconds == 120  # the profile's own, kept

    tuner = Watching(arms, 600.0)
    plain = asyncio.run(run_policy(builtin_scenario(SEED, "small"), config, "pysched", registry, seed=SEED))
    tuned = asyncio.run(
        run_policy(builtin_scenario(SEED, "small"), config, "pysched", registry, seed=SEED, prepare=tuner.attach)
    )
    assert seen[:3] == [0.05, 0.0, 0.3]  # each arm once, in order, then UCB1's choices
    assert len(tuner.periods) == len(seen) - 1 and all(p.met + p.missed > 0 for p in tuner.periods)
    assert tuned.deadline_met != plain.deadline_met or tuned.rescales != plain.rescales


def test_ucb1_tries_every_arm_then_plays_the_best_most() -> None:
    bandit = Ucb1(3)
    payoff = [0.2, 0.9, 0.5]
    played = []
    for _ in range(200):
        arm = bandit.choose()
        played.append(arm)
        bandit.reward(arm, payoff[arm])
    assert played[:3] == [0, 1, 2]
    assert bandit.pulls[1] > 150 and bandit.pulls[0] < bandit.pulls[2] < bandit.pulls[1]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("safetyMargin=-1", "safetyMargin: must be >= 0"),
        ("speed=2", "NAME one of safetyMargin"),
        ("bandZ=x", "bandZ: a number"),
        ("bandZ=nan", "a finite number"),
        ("bandZ=1,bandZ=2", "given once"),
        ("safetyMargin", "NAME=VALUE"),
    ],
)
def test_a_bad_arm_is_one_line(text: str, problem: str) -> None:
    found = parse_arm(text)
    assert isinstance(found, str) and problem in found and "\n" not in found


def test_an_arm_changes_only_the_args_it_names() -> None:
    arm = parse_arm("bandZ=2,cooldownSeconds=30")
    assert arm == {"bandZ": 2.0, "cooldownSeconds": 30.0}
    base = AutoscaleArgs(safety_margin=0.2)
    assert with_arm(base, arm) == dataclasses.replace(base, band_z=2.0, cooldown_seconds=30.0)
