"""Training the learned policies (the `learn` extra: torch, Stable-Baselines3, sb3-contrib).

The network is the deployed one: one small MLP reads each row of the window. For the ordering
policy its one output per row is the row's score and the logits are the scores; for the allocation
policy its three outputs per row are the logits of that job's answer (MultiDiscrete). sb3-contrib's
MaskablePPO masks the empty and lower-priority rows. The critic pools a second MLP's rows. Before
PPO, a supervised warm start teaches the network a heuristic (DL2's idea): for the order, the pick
of the job with the most to lose by waiting (`heuristic.most_to_lose`); for allocation, Autoscale's
own answer. RL then starts from the heuristic rather than from noise.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv
from torch import nn

from pysched.deadline import features
from pysched.deadline.scorer import QUEUE, PolicyKind, dump_policy
from pysched.learn.allocation import AllocationEnv, heuristic_answers
from pysched.learn.base import TRAIN_SEEDS, VALIDATION_SEEDS, SimulatedEnv, policy_kind
from pysched.learn.episodes import ALLOCATION_ENV, ORDERING_ENV, Decision, Kind, play
from pysched.learn.heuristic import most_to_lose
from pysched.learn.ordering import OrderingEnv
from pysched.learn.ranges import RANGE_SEEDS, Ranges, pod_ranges, widened
from pysched.sim.scenario import Scenario

HIDDEN = 16  # two hidden layers of 16 ReLUs: LearnedQueueSort scores a window of 16 in ~7 us


class RowNets(nn.Module):
    """SB3's `mlp_extractor` for a window of rows: the actor's latent is the network that ships,
    applied to every row (one score per row, or `outputs` logits per row, row after row), the
    critic's the mean of a second MLP over the rows."""

    def __init__(self, window: int, width: int = features.WIDTH, outputs: int = 1, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.window, self.width, self.outputs = window, width, outputs
        self.latent_dim_pi = window * outputs
        self.latent_dim_vf = hidden
        self.score = nn.Sequential(
            nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, outputs)
        )
        self.value = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())

    def _rows(self, features: torch.Tensor) -> torch.Tensor:
        return features.reshape(-1, self.window, self.width)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def row_logits(self, features: torch.Tensor) -> torch.Tensor:
        """(batch, window, outputs)."""
        return cast(torch.Tensor, self.score(self._rows(features)))

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        return self.row_logits(features).reshape(-1, self.window * self.outputs)

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.value(self._rows(features)).mean(dim=1))


class ScoringPolicy(MaskableActorCriticPolicy):
    """MaskablePPO's policy with `RowNets`: the action logits are the row scores themselves."""

    def _build_mlp_extractor(self) -> None:
        shape = self.observation_space.shape
        assert shape is not None
        space = self.action_space
        outputs = int(space.nvec[0]) if isinstance(space, gym.spaces.MultiDiscrete) else 1
        self.mlp_extractor = RowNets(shape[0], shape[1], outputs)  # type: ignore[assignment]  # SB3 duck-types it

    def _build(self, lr_schedule: Callable[[float], float]) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the scores are the logits
        self.optimizer = self.optimizer_class(  # type: ignore[call-arg]  # SB3 passes lr the same way
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )


def scorer_layers(policy: ScoringPolicy) -> list[tuple[np.ndarray, np.ndarray]]:
    """The scorer's linear layers as numpy (weight [out, in], bias [out])."""
    nets = policy.mlp_extractor
    assert isinstance(nets, RowNets)
    return [
        (m.weight.detach().cpu().numpy().astype(np.float64), m.bias.detach().cpu().numpy().astype(np.float64))
        for m in nets.score
        if isinstance(m, nn.Linear)
    ]


def export(
    policy: ScoringPolicy, window: int, meta: dict[str, str], kind: PolicyKind = QUEUE, trained_on: Ranges | None = None
) -> str:
    return dump_policy(scorer_layers(policy), "relu", window, meta, kind, trained_on)


@dataclass(slots=True)
class Curve:
    """Per finished training episode: (environment steps so far, deadline-met ratio, return)."""

    points: list[tuple[int, float, float]] = field(default_factory=list)


class _Record(BaseCallback):
    def __init__(
        self, curve: Curve, report: Callable[[str], None] | None, critic_steps: int = 0, every: int = 50
    ) -> None:
        super().__init__()
        self.critic_steps = critic_steps
        self.frozen = False
        self.curve = curve
        self.report = report
        self.every = every
        self.returns: dict[int, float] = {}

    def _actor_parameters(self) -> list[nn.Parameter]:
        nets = self.model.policy.mlp_extractor
        assert isinstance(nets, RowNets)
        return list(nets.score.parameters())

    def _on_training_start(self) -> None:
        """A warm-started actor is held still while the critic learns its values: updates from an
        untrained critic would undo the warm start."""
        if self.model.num_timesteps < self.critic_steps:
            self.frozen = True
            for parameter in self._actor_parameters():
                parameter.requires_grad_(False)

    def _on_step(self) -> bool:
        if self.frozen and self.num_timesteps >= self.critic_steps:
            self.frozen = False
            for parameter in self._actor_parameters():
                parameter.requires_grad_(True)
        rewards, dones, infos = self.locals["rewards"], self.locals["dones"], self.locals["infos"]
        for i, (reward, done, info) in enumerate(zip(rewards, dones, infos, strict=True)):
            self.returns[i] = self.returns.get(i, 0.0) + float(reward)
            if done:
                ratio = float(info.get("deadline_met_ratio", float("nan")))
                self.curve.points.append((self.num_timesteps, ratio, self.returns.pop(i)))
                done_count = len(self.curve.points)
                if self.report is not None and done_count % self.every == 0:
                    recent = [p[1] for p in self.curve.points[-self.every :]]
                    self.report(
                        f"episodes {done_count}, steps {self.num_timesteps:,}: "
                        f"deadline-met ratio {sum(recent) / len(recent):.3f} over the last {self.every}"
                    )
        return True


def warm_start(
    policy: ScoringPolicy,
    make_env: Callable[[], OrderingEnv],
    episodes: int,
    epochs: int,
    seed: int,
    rounds: int = 3,
) -> float:
    """Fit the scorer to the teacher's picks (`most_to_lose`), DAgger-style: the first round's
    episodes follow the teacher, later rounds follow the scorer as trained so far while the teacher
    labels what it meets, and every round trains on all the labels gathered. Returns the last
    epoch's share of picks the scorer agrees with."""
    env = make_env()
    assert isinstance(env, OrderingEnv)
    windows: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    targets: list[int] = []
    nets = policy.mlp_extractor
    assert isinstance(nets, RowNets)
    acting = [False]  # the scorer acts (rounds after the first)

    def agent(decision: Decision) -> int:
        rows = np.zeros((env.window, features.WIDTH), np.float32)
        allowed = np.zeros(env.window, np.bool_)
        n = min(env.window, decision.features.shape[0])
        rows[:n], allowed[:n] = decision.features[:n], decision.allowed[:n]
        typical, spread = np.zeros(env.window), np.zeros(env.window)
        typical[:n], spread[:n] = decision.typical_seconds[:n], decision.spread[:n]
        label = most_to_lose(rows, allowed, typical, spread)
        windows.append(rows)
        masks.append(allowed)
        targets.append(label)
        if not acting[0]:
            return label
        with torch.no_grad():
            scores = nets.forward_actor(torch.as_tensor(rows[None]))[0].numpy()
        return int(np.argmax(np.where(allowed, scores, -np.inf)))

    rng = np.random.default_rng(seed)
    optimizer = torch.optim.Adam(nets.score.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    agreed = 0.0
    for round_ in range(max(1, rounds)):
        acting[0] = round_ > 0
        for _ in range(episodes):
            workload = int(env.seeds[int(rng.integers(len(env.seeds)))])
            play(env.episode(workload), agent)
        x = torch.as_tensor(np.stack(windows))
        mask = torch.as_tensor(np.stack(masks))
        y = torch.as_tensor(np.array(targets))

        def masked(batch: torch.Tensor, x: torch.Tensor = x, mask: torch.Tensor = mask) -> torch.Tensor:
            return nets.forward_actor(x[batch]).masked_fill(~mask[batch], -1e9)

        agreed = _fit(masked, y, optimizer, generator, epochs, 64)
    env.close()
    return agreed


def _fit(
    logits_of: Callable[[torch.Tensor], torch.Tensor],
    y: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    epochs: int,
    batch_size: int,
) -> float:
    """Cross-entropy epochs on the labels `y` (`logits_of` a batch of indices); the last epoch's
    share of labels the arg-max agrees with."""
    agreed = 0.0
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=generator)
        hits = 0
        for start in range(0, len(y), batch_size):
            batch = order[start : start + batch_size]
            logits = logits_of(batch)
            loss = nn.functional.cross_entropy(logits, y[batch])
            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            hits += int((logits.argmax(dim=1) == y[batch]).sum())
        agreed = hits / max(1, len(y))
    return agreed


def warm_start_allocation(
    policy: ScoringPolicy, make_env: Callable[[], AllocationEnv], episodes: int, epochs: int, seed: int
) -> float:
    """Fit the network to Autoscale's own answer for every row (the episodes follow Autoscale, so
    the rows are those it meets). Returns the last epoch's share of answers it agrees with."""
    env = make_env()
    rows: list[np.ndarray] = []

    def agent(decision: Decision) -> np.ndarray:
        rows.append(decision.features)
        return heuristic_answers(decision.features)

    rng = np.random.default_rng(seed)
    for _ in range(episodes):
        play(env.episode(int(env.seeds[int(rng.integers(len(env.seeds)))])), agent)
    env.close()
    nets = policy.mlp_extractor
    assert isinstance(nets, RowNets)
    if not rows:
        return float("nan")
    x = torch.as_tensor(np.concatenate(rows))
    y = torch.as_tensor(heuristic_answers(x.numpy()))
    optimizer = torch.optim.Adam(nets.score.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    return _fit(lambda batch: cast(torch.Tensor, nets.score(x[batch])), y, optimizer, generator, epochs, 256)


@dataclass(frozen=True, slots=True)
class TrainSettings:
    steps: int
    seed: int = 0
    window: int = 16
    envs: int = 1
    warm_episodes: int = 16  # per DAgger round
    warm_epochs: int = 100
    warm_rounds: int = 3
    scenario: str | Callable[[int], Scenario] = "seed-insufficient"
    learning_rate: float = 3e-5
    critic_steps: int = 20_000  # environment steps during which only the critic learns
    n_steps: int = 2048
    gamma: float = 0.995
    validate_every: int = 25_000  # environment steps between checks on validation workloads (0: never)
    validation_episodes: int = 40  # of VALIDATION_SEEDS, the first ones
    env: Kind = ORDERING_ENV
    # A queue policy's pod feature ranges from earlier training (fine-tuning starts from its file).
    trained_before: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def trained_on(self) -> Ranges:
        """What the weights file records of the pods trained on (a queue policy's; none for allocation)."""
        if self.env != ORDERING_ENV:
            return {}
        return widened(pod_ranges(self.scenario, TRAIN_SEEDS[:RANGE_SEEDS]), self.trained_before)

    def make_env(self) -> SimulatedEnv:
        if self.env == ALLOCATION_ENV:
            return AllocationEnv(window=self.window, scenario=self.scenario)
        return OrderingEnv(window=self.window, scenario=self.scenario)


@dataclass(frozen=True, slots=True)
class Trained:
    text: str  # the weights file: the checkpoint that did best on the validation workloads
    curve: Curve
    warm_agreement: float
    seconds: float
    validation: tuple[tuple[int, float], ...] = ()  # (steps after the warm start, mean met ratio)
    chosen_steps: int = -1  # PPO steps of the checkpoint exported (the last one without validation)
    # Environment steps PPO took: each `learn` call collects whole rollouts, so more than asked.
    steps_taken: int = 0


def vector_env(settings: TrainSettings) -> VecEnv:
    def make(rank: int) -> Callable[[], gym.Env[Any, Any]]:
        def build() -> gym.Env[Any, Any]:
            env = settings.make_env()
            env.reset(seed=settings.seed * 1000 + rank)
            return env

        return build

    makers = [make(i) for i in range(settings.envs)]
    return SubprocVecEnv(makers) if settings.envs > 1 else DummyVecEnv(makers)


def ppo(env: VecEnv, settings: TrainSettings) -> MaskablePPO:
    """MaskablePPO held close to where it starts (small steps, a tight clip, few epochs per batch):
    it starts from the warm start, not from noise."""
    model = MaskablePPO(
        ScoringPolicy,
        env,
        learning_rate=settings.learning_rate,
        n_steps=max(64, settings.n_steps // settings.envs),
        batch_size=256,
        n_epochs=4,
        clip_range=0.1,
        gamma=settings.gamma,
        seed=settings.seed,
        verbose=0,
        device="cpu",
    )
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default makes a folder in /tmp per run
    return model


def train(
    settings: TrainSettings,
    meta: dict[str, str],
    model_in: MaskablePPO | None = None,
    report: Callable[[str], None] | None = None,
) -> tuple[Trained, MaskablePPO]:
    """Warm start, then MaskablePPO for `settings.steps` environment steps; the weights file."""
    started = time.perf_counter()
    torch.manual_seed(settings.seed)
    torch.set_num_threads(1)
    env = vector_env(settings)
    curve = Curve()
    agreement = float("nan")
    if model_in is None:
        model = ppo(env, settings)
        if settings.warm_episodes > 0:
            policy = model.policy
            assert isinstance(policy, ScoringPolicy)
            if settings.env == ALLOCATION_ENV:
                agreement = warm_start_allocation(
                    policy,
                    lambda: AllocationEnv(window=settings.window, scenario=settings.scenario),
                    settings.warm_episodes,
                    settings.warm_epochs,
                    settings.seed,
                )
            else:
                agreement = warm_start(
                    policy,
                    lambda: OrderingEnv(window=settings.window, scenario=settings.scenario),
                    settings.warm_episodes,
                    settings.warm_epochs,
                    settings.seed,
                    settings.warm_rounds,
                )
            if report is not None:
                report(f"warm start: the scorer agrees with the teacher on {agreement:.1%} of its picks")
    else:
        model = model_in
        model.set_env(env)
    record = _Record(curve, report, settings.critic_steps if model_in is None and settings.warm_episodes else 0)
    policy = model.policy
    assert isinstance(policy, ScoringPolicy)
    checks: list[tuple[int, float]] = []
    kind = policy_kind(settings.env)
    trained_on = settings.trained_on()
    best = (-1.0, export(policy, settings.window, meta, kind, trained_on), 0)

    taken = 0

    def check(steps: int) -> None:
        nonlocal best
        if settings.validate_every <= 0:
            return
        text = export(policy, settings.window, {**meta, "checkpoint_steps": str(steps)}, kind, trained_on)
        score = validate(text, settings)
        checks.append((steps, score))
        if report is not None:
            report(f"validation after {taken:,} PPO steps: mean deadline-met ratio {score:.4f}")
        if score > best[0]:
            best = (score, text, steps)

    check(0)
    done = 0  # steps asked for so far (what the file's checkpoint says, as the command reproduces it)
    while done < settings.steps:
        chunk = min(settings.steps - done, settings.validate_every or settings.steps)
        fresh = model_in is None and done == 0
        before = 0 if fresh else model.num_timesteps
        model.learn(total_timesteps=chunk, callback=record, reset_num_timesteps=fresh)
        taken += model.num_timesteps - before
        done += chunk
        check(done)
    env.close()
    if settings.validate_every <= 0:
        best = (0.0, export(policy, settings.window, meta, kind, trained_on), done)
    seconds = time.perf_counter() - started
    return Trained(best[1], curve, agreement, seconds, tuple(checks), best[2], taken), model


def validate(text: str, settings: TrainSettings) -> float:
    """Mean deadline-met ratio of the network `text` (greedy answers) on the first validation seeds."""
    from pysched.deadline.scorer import parse_policy

    scorer = parse_policy(text, policy_kind(settings.env))
    env = settings.make_env()

    def agent(decision: Decision) -> int | np.ndarray:
        if settings.env == ALLOCATION_ENV:
            return scorer.answers(decision.features)
        return scorer.pick(decision.features, decision.allowed)

    ratios = [
        play(env.episode(seed), agent).deadline_met_ratio for seed in VALIDATION_SEEDS[: settings.validation_episodes]
    ]
    env.close()
    return sum(ratios) / max(1, len(ratios))


def load_for_tuning(path: Path | str, settings: TrainSettings) -> MaskablePPO:
    """A fresh model whose scorer starts from a weights file (fine-tuning on another workload)."""
    from pysched.deadline.scorer import load_policy

    scorer = load_policy(path, policy_kind(settings.env))
    model = ppo(vector_env(settings), settings)
    nets = model.policy.mlp_extractor
    assert isinstance(nets, RowNets)
    linears = [m for m in nets.score if isinstance(m, nn.Linear)]
    if len(linears) != len(scorer.layers) or any(
        m.weight.shape != w.shape for m, (w, _) in zip(linears, scorer.layers, strict=False)
    ):
        raise ValueError(f"{path}: its layers are not this trainer's ({HIDDEN} hidden units, 3 layers)")
    if scorer.activation != "relu":
        raise ValueError(f"{path}: its activation is {scorer.activation}; this trainer's is relu")
    with torch.no_grad():
        for m, (w, b) in zip(linears, scorer.layers, strict=True):
            m.weight.copy_(torch.as_tensor(w))
            m.bias.copy_(torch.as_tensor(b))
    return model
