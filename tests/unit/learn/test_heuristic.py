"""The warm start's teachers, and the privileged facts an episode hands them."""

import numpy as np

from pysched.deadline.features import FEATURES, WIDTH, squash
from pysched.learn.episodes import Decision, play
from pysched.learn.heuristic import least_laxity_known, most_to_lose
from pysched.learn.ordering import OrderingEnv

from .toy import toy

TO_DEADLINE, BEST_EFFORT = FEATURES.index("to_deadline"), FEATURES.index("best_effort")


def _window(seconds_left: list[float]) -> np.ndarray:
    rows = np.zeros((len(seconds_left), WIDTH), np.float32)
    rows[:, TO_DEADLINE] = [squash(s) for s in seconds_left]
    return rows


def test_the_job_that_meets_its_deadline_only_if_it_starts_now_goes_before_one_on_the_brink() -> None:
    # Both typically run 3,000 s, give or take 14%. The first has 100 s to spare: it misses two
    # times in five if it starts now, and nearly always after a wait. The second has 900 s: nearly
    # sure now, and it misses three times in four after a wait of 1,200 s.
    rows = _window([3100.0, 3900.0, 20000.0])
    allowed = np.ones(3, np.bool_)
    typical, spread = np.full(3, 3000.0), np.full(3, 0.14)
    assert least_laxity_known(rows, allowed, typical) == 0
    assert most_to_lose(rows, allowed, typical, spread) == 1


def test_a_row_not_allowed_or_best_effort_is_never_picked_while_another_has_something_to_lose() -> None:
    rows = _window([3900.0, 3900.0, 4000.0])
    rows[1, BEST_EFFORT] = 1.0
    allowed = np.array([False, True, True])
    assert most_to_lose(rows, allowed, np.full(3, 3000.0), np.full(3, 0.14)) == 2


def test_with_nothing_to_lose_anywhere_it_is_least_laxity_at_the_typical_times() -> None:
    # Every job is sure to make its deadline even after the wait: the least slack goes first.
    rows = _window([90000.0, 50000.0, 70000.0])
    allowed = np.ones(3, np.bool_)
    typical = np.array([3000.0, 6000.0, 3000.0])
    assert most_to_lose(rows, allowed, typical, np.full(3, 0.14)) == 1
    # Every job is lost either way: window order, as least laxity orders the hopeless.
    hopeless = _window([100.0, 200.0, 300.0])
    assert most_to_lose(hopeless, allowed, typical, np.full(3, 0.14)) == 0


def test_each_candidate_comes_with_its_kinds_typical_run_time_and_spread() -> None:
    scenario = toy(3)
    by_model: dict[str, list[float]] = {}
    for job in scenario.jobs:
        by_model.setdefault(job.model, []).append(job.steps * job.truth.step_seconds(job.cpu, 0))
    typical = {model: float(np.mean(times)) for model, times in by_model.items()}
    spread = {model: float(np.std(times) / np.mean(times)) for model, times in by_model.items()}
    seen: list[tuple[float, float, float]] = []

    def agent(decision: Decision) -> int:
        seen.extend(zip(decision.truth_seconds, decision.typical_seconds, decision.spread, strict=True))
        return 0

    env = OrderingEnv(window=8, scenario=toy)
    play(env.episode(3), agent)
    env.close()
    assert seen
    for own, kind_typical, kind_spread in seen:
        # the toy's jobs of one model share their steps, so the kind is the one whose truths hold `own`
        model = next(m for m, times in by_model.items() if any(abs(own - t) < 1e-6 for t in times))
        assert abs(kind_typical - typical[model]) < 1e-6
        assert abs(kind_spread - spread[model]) < 1e-9
        if len(by_model[model]) > 1:
            assert kind_spread > 0.01  # the paper's jobs stray from their kind's mean
