"""One simulation run paused at every decision of its learned plugin: the bridge between the
simulator (which calls the policy) and a Gymnasium environment (which is called with actions).
Two kinds of decision: which waiting pod goes next (LearnedQueueSort's picks, `ORDERING_ENV`) and, for
the running jobs Autoscale looks at together, a step down, keep or a step up each (`ALLOCATION_ENV`,
in groups of at most `window` jobs).

The run lives in a thread of its own and the two sides hand over strictly in turn, so an episode
is as deterministic as the simulator: the run never moves while the environment holds a decision.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pysched.api.resources import CPU, GPU
from pysched.framework.config import SchedulerConfig
from pysched.framework.interfaces import QueuedPod
from pysched.framework.registry import Registry
from pysched.plugins.autoscale import Autoscale
from pysched.plugins.learned_queue_sort import LearnedQueueSort
from pysched.scheduler.scheduler import Scheduler
from pysched.sim.runner import EPOCH, PolicyResult, Replay, run_policy
from pysched.sim.scenario import Scenario

Kind = Literal["ordering", "allocation"]
ORDERING_ENV: Kind = "ordering"
ALLOCATION_ENV: Kind = "allocation"


class EpisodeAborted(BaseException):
    """Raised inside the run's thread to end it early; a BaseException so that no plugin's or
    the scheduler's containment of ordinary errors swallows it."""


@dataclass(frozen=True, slots=True)
class Decision:
    features: np.ndarray  # (candidates, WIDTH): waiting pods (ordering) or running jobs (allocation)
    allowed: np.ndarray  # (candidates,) bool: may be picked (ordering); all True (allocation)
    # From the simulator's hidden truth, read only by a teacher (the warm start), never by the
    # policy; 0: unknown. Each candidate's own run time at its request; the mean run time of the
    # workload's jobs of its model at that request (what its kind of job typically takes); and
    # their coefficient of variation (how far one such job may stray from it).
    truth_seconds: np.ndarray
    typical_seconds: np.ndarray
    spread: np.ndarray


@dataclass(frozen=True, slots=True)
class Outcomes:
    met: int = 0
    missed: int = 0
    finished_hours: float = 0.0  # summed job completion times of the jobs finished, in hours


class Episode:
    """A run of `policy` over `scenario`: `next()` runs it to its next decision (None: it ended),
    `answer(a)` gives the pick (ordering: a row) or the answers (allocation: one per row).
    `outcomes()` counts deadline jobs judged so far."""

    def __init__(
        self,
        scenario: Scenario,
        config: SchedulerConfig,
        policy: str,
        registry: Registry,
        seed: int,
        window: int,
        kind: Kind = ORDERING_ENV,
    ) -> None:
        self._window = window
        self._kind = kind
        self._to_run: queue.SimpleQueue[int | np.ndarray | None] = queue.SimpleQueue()
        self._to_env: queue.SimpleQueue[tuple[str, object]] = queue.SimpleQueue()
        self._replay: Replay | None = None
        self._verdicts = Verdicts()
        self._kinds: dict[tuple[str, float, int], tuple[float, float]] = {}
        self.result: PolicyResult | None = None
        self.decisions = 0

        def main() -> None:
            try:
                result = asyncio.run(run_policy(scenario, config, policy, registry, seed=seed, prepare=self._attach))
                self._to_env.put(("done", result))
            except EpisodeAborted:
                pass
            except BaseException as err:  # handed to the environment's thread, raised there
                self._to_env.put(("error", err))

        self._thread = threading.Thread(target=main, name=f"episode-{scenario.name}-{seed}", daemon=True)
        self._started = False

    def _attach(self, scheduler: Scheduler, replay: Replay) -> None:
        self._replay = replay
        if self._kind == ALLOCATION_ENV:
            scalers = [p for f in scheduler.frameworks.values() for p in f.reconcile if isinstance(p, Autoscale)]
            if not scalers:
                raise ValueError("the episode's profile has no Autoscale to learn for")
            for scaler in scalers:
                scaler.controller.agent = self._allocate
            return
        plugins = [f.queue_sort for f in scheduler.frameworks.values() if isinstance(f.queue_sort, LearnedQueueSort)]
        if not plugins:
            raise ValueError("the episode's profile has no LearnedQueueSort to learn for")
        for plugin in plugins:
            plugin.agent = self._decide
            plugin.window = self._window

    def _ask(self, decision: Decision) -> int | np.ndarray:
        self._to_env.put(("decide", decision))
        answer = self._to_run.get()
        if answer is None:
            raise EpisodeAborted
        return answer

    def _decide(self, features: np.ndarray, allowed: np.ndarray, candidates: Sequence[QueuedPod]) -> int:
        return int(self._ask(Decision(features, allowed, *self._truths(candidates))))

    def _allocate(self, rows: np.ndarray, own: np.ndarray) -> np.ndarray:
        """The jobs looked at together, `window` at a time; the heuristic's answers are a column
        of the rows (`allocation.FEATURES`), so they are not sent apart."""
        answers = np.full(rows.shape[0], -1, np.int64)
        for start in range(0, rows.shape[0], self._window):
            part = rows[start : start + self._window]
            n = part.shape[0]
            none = np.zeros(n)
            given = np.asarray(self._ask(Decision(part, np.ones(n, np.bool_), none, none, none)), np.int64).reshape(-1)
            if given.shape[0] < n:
                raise ValueError(f"{given.shape[0]} answers for {n} jobs")
            answers[start : start + n] = given[:n]
        return answers

    def _truths(self, candidates: Sequence[QueuedPod]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`Decision`'s truth_seconds, typical_seconds and spread of the candidates."""
        own, typical, spread = np.zeros(len(candidates)), np.zeros(len(candidates)), np.zeros(len(candidates))
        replay = self._replay
        if replay is None:
            return own, typical, spread
        for i, queued in enumerate(candidates):
            pod = queued.pod
            key = replay.members.get(pod.key, (pod.key, 0))[0]
            job = replay.jobs.get(key)
            if job is not None:
                cpu, gpus = pod.requests.get(CPU, 0) / 1000, pod.requests.get(GPU, 0)
                own[i] = job.steps * job.truth.step_seconds(cpu, gpus)
                mean_step, spread[i] = self._kind_of(replay, job.model, cpu, gpus)
                typical[i] = job.steps * mean_step
        return own, typical, spread

    def _kind_of(self, replay: Replay, model: str, cpu: float, gpus: int) -> tuple[float, float]:
        """Mean step time of the workload's jobs of `model` at a request, and its coefficient of
        variation across them (remembered: the workload does not change within an episode)."""
        key = (model, cpu, gpus)
        known = self._kinds.get(key)
        if known is None:
            times = np.array([j.truth.step_seconds(cpu, gpus) for j in replay.jobs.values() if j.model == model])
            mean = float(times.mean())
            known = (mean, float(times.std() / mean) if mean > 0 else 0.0)
            self._kinds[key] = known
        return known

    def next(self) -> Decision | None:
        """Run to the next decision; None when the run is over (`result` then holds its metrics)."""
        if not self._started:
            self._started = True
            self._thread.start()
        kind, value = self._to_env.get()
        if kind == "decide":
            self.decisions += 1
            assert isinstance(value, Decision)
            return value
        if kind == "error":
            assert isinstance(value, BaseException)
            raise value
        assert isinstance(value, PolicyResult)
        self.result = value
        return None

    def answer(self, answer: int | np.ndarray) -> None:
        self._to_run.put(answer)

    def close(self) -> None:
        """End the run if it is paused at a decision (its thread then exits)."""
        if self._started and self._thread.is_alive():
            self._to_run.put(None)
            self._thread.join()

    def outcomes(self, final: bool = False) -> Outcomes:
        """Deadline jobs judged so far (`Verdicts.count`)."""
        return Outcomes() if self._replay is None else self._verdicts.count(self._replay, final)


class Verdicts:
    """Deadline jobs of a run judged so far, each once: met (finished by the deadline), missed
    (finished late, or the deadline passed unfinished; with `final`, every deadline job not
    finished)."""

    def __init__(self) -> None:
        self._judged: set[str] = set()
        self._met = self._missed = 0
        self._hours = 0.0

    def count(self, replay: Replay, final: bool = False) -> Outcomes:
        now = replay.clock.now()
        for key, job in replay.jobs.items():
            if job.deadline is None or key in self._judged:
                continue
            finished = replay.finished.get(key)
            due = EPOCH + job.deadline
            if finished is not None:
                self._judged.add(key)
                if finished <= due:
                    self._met += 1
                else:
                    self._missed += 1
                self._hours += (finished - EPOCH - job.submit) / 3600.0
            elif now > due or final:
                self._judged.add(key)
                self._missed += 1
        return Outcomes(self._met, self._missed, self._hours)


Agent = Callable[[Decision], "int | np.ndarray"]


def play(episode: Episode, agent: Agent) -> PolicyResult:
    """Run a whole episode with `agent` answering each decision (evaluation, warm-start data)."""
    while (decision := episode.next()) is not None:
        episode.answer(agent(decision))
    assert episode.result is not None
    return episode.result
