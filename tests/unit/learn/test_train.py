"""Training with the learn extra (torch, Stable-Baselines3, sb3-contrib): SB3's own checker, the
deployed numpy scorer equal to the trained network, and a seeded run that learns."""

import numpy as np
import pytest

pytest.importorskip("sb3_contrib", reason="the learn extra is not installed")
pytestmark = pytest.mark.learn

import torch  # noqa: E402
from stable_baselines3.common.env_checker import check_env  # noqa: E402

from pysched.deadline.allocation import WIDTH as ALLOCATION_WIDTH  # noqa: E402
from pysched.deadline.features import WIDTH  # noqa: E402
from pysched.deadline.scorer import ALLOCATION, parse_policy  # noqa: E402
from pysched.learn.allocation import AllocationEnv  # noqa: E402
from pysched.learn.episodes import play  # noqa: E402
from pysched.learn.ordering import OrderingEnv  # noqa: E402
from pysched.learn.train import RowNets, ScoringPolicy, TrainSettings, export, train  # noqa: E402

from .toy import toy  # noqa: E402


def test_stable_baselines3_accepts_the_environment() -> None:
    env = OrderingEnv(window=8, scenario=toy)
    check_env(env, warn=False)
    env.close()


def _met(weights: str | None, seeds: range) -> float:
    """Deadline-met ratio summed over `seeds` with the scorer of `weights` (None: random picks)."""
    env = OrderingEnv(window=8, scenario=toy)
    scorer = None if weights is None else parse_policy(weights)
    rng = np.random.default_rng(0)
    total = 0.0
    for seed in seeds:

        def agent(decision, scorer=scorer):  # type: ignore[no-untyped-def]
            rows = decision.features[:8]
            allowed = decision.allowed[:8]
            if scorer is None:
                return int(rng.choice(np.flatnonzero(allowed)))
            return scorer.pick(rows, allowed)

        total += play(env.episode(seed), agent).deadline_met_ratio
    env.close()
    return total


def test_a_short_seeded_run_learns_and_exports_what_it_learned() -> None:
    settings = TrainSettings(
        steps=3072,
        seed=1,
        window=8,
        warm_episodes=0,
        scenario=toy,
        n_steps=512,
        validate_every=1024,
        validation_episodes=8,
        learning_rate=3e-4,
    )
    trained, model = train(settings, {"command": "test"})
    assert isinstance(model.policy, ScoringPolicy)
    scorer = parse_policy(export(model.policy, 8, {}))
    # the numpy scorer is the trained network's actor
    x = np.random.default_rng(7).normal(size=(5, 8, WIDTH)).astype(np.float32)
    nets = model.policy.mlp_extractor
    assert isinstance(nets, RowNets)
    with torch.no_grad():
        expected = nets.forward_actor(torch.as_tensor(x)).numpy()
    for batch in range(5):
        assert np.allclose(scorer.scores(x[batch]), expected[batch], atol=1e-4)
    # and it picks better than chance on workloads it never saw
    held_out = range(1000, 1012)
    assert _met(trained.text, held_out) >= _met(None, held_out) + 0.5  # 12 workloads: +4 points each on average
    assert len(trained.curve.points) > 0 and trained.seconds > 0
    # the file written is the checkpoint that did best on the validation workloads
    assert [steps for steps, _ in trained.validation] == [0, 1024, 2048, 3072]
    assert trained.steps_taken == model.num_timesteps == 3072
    assert trained.chosen_steps == max(trained.validation, key=lambda c: c[1])[0]
    assert parse_policy(trained.text).meta["checkpoint_steps"] == str(trained.chosen_steps)
    # it knows it has seen CPU jobs only
    assert parse_policy(trained.text).ranges() == {"gpus": (0.0, 0.0)}


def test_a_fine_tuned_policy_records_the_pods_of_both_trainings() -> None:
    before = {"gpus": (0.125, 0.5)}
    assert TrainSettings(steps=1, scenario=toy, trained_before=before).trained_on() == {"gpus": (0.0, 0.5)}
    assert TrainSettings(steps=1, scenario=toy, env="allocation", trained_before=before).trained_on() == {}


def test_stable_baselines3_accepts_the_allocation_environment() -> None:
    env = AllocationEnv(window=4, scenario=toy)
    check_env(env, warn=False)
    env.close()


def _allocated(weights: str | None, seeds: range) -> float:
    """Deadline-met ratio summed over `seeds` with the allocation policy of `weights` (None: random
    answers)."""
    env = AllocationEnv(window=8, scenario=toy)
    scorer = None if weights is None else parse_policy(weights, ALLOCATION)
    rng = np.random.default_rng(0)
    total = 0.0
    for seed in seeds:

        def agent(decision, scorer=scorer):  # type: ignore[no-untyped-def]
            n = decision.features.shape[0]
            return rng.integers(0, 3, n) if scorer is None else scorer.answers(decision.features)

        total += play(env.episode(seed), agent).deadline_met_ratio
    env.close()
    return total


def test_a_short_allocation_run_learns_autoscales_answers_and_exports_them() -> None:
    settings = TrainSettings(
        steps=300, seed=1, window=8, warm_episodes=3, warm_epochs=300, scenario=toy, n_steps=512,
        validate_every=300, validation_episodes=2, env="allocation",
    )  # fmt: skip
    trained, model = train(settings, {"command": "test"})
    assert trained.warm_agreement > 0.95
    scorer = parse_policy(trained.text, ALLOCATION)
    # the numpy network is the trained one, three logits a row
    x = np.random.default_rng(7).normal(size=(5, 8, ALLOCATION_WIDTH)).astype(np.float32)
    nets = model.policy.mlp_extractor
    assert isinstance(nets, RowNets) and nets.outputs == 3
    with torch.no_grad():
        expected = nets.row_logits(torch.as_tensor(x)).numpy()
    assert isinstance(model.policy, ScoringPolicy)
    live = parse_policy(export(model.policy, 8, {}, ALLOCATION), ALLOCATION)
    for batch in range(5):
        assert np.allclose(live.logits(x[batch]), expected[batch], atol=1e-4)
    # it answers better than chance on workloads it never saw
    held_out = range(1000, 1006)
    learned, chance = _allocated(trained.text, held_out), _allocated(None, held_out)
    assert learned >= chance + 0.3, (learned, chance)  # 6 workloads: +0.05 each on average
    assert scorer.window == 8 and [steps for steps, _ in trained.validation] == [0, 300]
    assert trained.steps_taken == model.num_timesteps == 512  # PPO collects whole rollouts of 512
