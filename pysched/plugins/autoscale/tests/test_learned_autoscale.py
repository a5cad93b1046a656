"""LearnedAutoscale: Autoscale's machinery with a learned allocation policy's answers. A policy
that answers what Autoscale would replays the `pysched` profile exactly; another changes the run;
a weights file that is not an allocation policy's is refused when the profile loads."""

import asyncio
import re
from pathlib import Path

import numpy as np
import pytest

from pysched.deadline.allocation import DOWN, FEATURES, KEEP, UP
from pysched.deadline.scorer import ALLOCATION, QUEUE, dump_policy, policy_at
from pysched.framework.config import ConfigError
from pysched.learn.evaluate import LEARNED_ALLOCATION_PROFILE, allocation_config
from pysched.plugins import default_registry
from pysched.plugins.autoscale import Autoscale, LearnedAutoscale
from pysched.plugins.autoscale.tests.test_shared_room import Node
from pysched.sim.runner import PolicyResult, run_policy
from pysched.sim.scenario import builtin_scenario


def heuristic_copy(path: Path) -> str:
    """A one-layer network whose arg-max is the row's `heuristic` column (-1, 0, +1)."""
    weight = np.zeros((3, len(FEATURES)))
    weight[DOWN, FEATURES.index("heuristic")], weight[UP, FEATURES.index("heuristic")] = -2.0, 2.0
    path.write_text(dump_policy([(weight, np.array([-0.5, 0.0, -0.5]))], "relu", 16, {}, ALLOCATION))
    return str(path)


def always(path: Path, answer: int) -> str:
    bias = np.zeros(3)
    bias[answer] = 1.0
    path.write_text(dump_policy([(np.zeros((3, len(FEATURES))), bias)], "relu", 16, {}, ALLOCATION))
    return str(path)


def run(weights: str, policy: str, seed: int = 2) -> PolicyResult:
    # A seed on which Autoscale resizes jobs (on seed 3 DeadlineLaxity's run history leaves none at risk).
    registry = default_registry()
    config = allocation_config(registry, weights)
    return asyncio.run(run_policy(builtin_scenario(seed, "seed-insufficient"), config, policy, registry, seed=seed))


def test_a_policy_answering_autoscales_own_choice_replays_the_pysched_profile(tmp_path: Path) -> None:
    weights = heuristic_copy(tmp_path / "copy.json")
    learned, heuristic = run(weights, LEARNED_ALLOCATION_PROFILE), run(weights, "pysched")
    assert learned == heuristic and learned.rescales > 0  # decisions were made, the same ones


def test_other_answers_change_the_run(tmp_path: Path) -> None:
    heuristic = run(always(tmp_path / "keep.json", KEEP), "pysched")
    keep = run(always(tmp_path / "keep.json", KEEP), LEARNED_ALLOCATION_PROFILE)
    down = run(always(tmp_path / "down.json", DOWN), LEARNED_ALLOCATION_PROFILE)
    assert keep.rescales == 0 < heuristic.rescales  # Autoscale's resizes, all answered "keep"
    assert down.rescales > heuristic.rescales and down.mean_jct_s > heuristic.mean_jct_s


def test_the_plugin_evaluates_the_file_with_numpy(tmp_path: Path) -> None:
    registry = default_registry()
    config = allocation_config(registry, heuristic_copy(tmp_path / "copy.json"))
    (profile,) = config.only(LEARNED_ALLOCATION_PROFILE).profiles
    assert any(entry.name == "LearnedAutoscale" for entry in profile.plugins["reconcile"])
    rows = np.zeros((3, len(FEATURES)), np.float32)
    rows[:, FEATURES.index("heuristic")] = (-1, 0, 1)
    spec = registry.get("LearnedAutoscale")
    assert spec is not None and spec.plugin_class is LearnedAutoscale
    assert {"preBind", "postBind", "reconcile"} <= spec.points()
    assert policy_at(str(tmp_path / "copy.json"), ALLOCATION).answers(rows).tolist() == [DOWN, KEEP, UP]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "weights file is required"),
        ("queue", "not a pysched.io/allocation-policy file (it is a 'pysched.io/queue-policy' file)"),
        ("nan", "not a number"),
        ("truncated", "not JSON (truncated?)"),
    ],
)
def test_a_bad_weights_file_is_one_line_at_load(tmp_path: Path, content: str | None, problem: str) -> None:
    path = tmp_path / "w.json"
    good = dump_policy([(np.zeros((3, len(FEATURES))), np.zeros(3))], "relu", 16, {}, ALLOCATION)
    if content == "queue":
        path.write_text(dump_policy([(np.zeros((1, 15)), np.zeros(1))], "relu", 16, {}, QUEUE))
    elif content == "nan":
        path.write_text(good.replace('"bias":[0.0,0.0,0.0]', '"bias":[NaN,0.0,0.0]'))
    elif content == "truncated":
        path.write_text(good[: len(good) // 2])
    with pytest.raises(ConfigError, match=re.escape(problem)) as caught:
        allocation_config(default_registry(), "" if content is None else str(path))
    assert "\n" not in str(caught.value)


def one_job(answer: int, notes: dict[str, str], agent_fails: bool = False) -> tuple[float, list[str], list[int]]:
    """A job of 4 CPUs, fast enough for 2 (10,000 steps at 15 a second, 30 minutes to its
    deadline), alone on a 16-CPU node, its first look answered `answer`: its CPUs then, its
    Rescaled events and Autoscale's own answers."""
    own: list[int] = []

    async def run() -> Node:
        node = Node(cpu="16", down_slack=0.95)  # Autoscale itself keeps it where it is
        await node.submit("job", "4", "30m", False, **notes)
        (plugin,) = [p for p in node.scheduler.frameworks["pysched"].reconcile if isinstance(p, Autoscale)]

        def agent(rows: np.ndarray, heuristic: np.ndarray) -> np.ndarray:
            own.extend(heuristic.tolist())
            if agent_fails:
                raise RuntimeError("a broken policy")
            return np.full(rows.shape[0], answer)

        plugin.controller.agent = agent
        await node.progress(60, job=900)
        return node

    node = asyncio.run(run())
    return node.cpus("job"), node.notes("job", "Rescaled"), own


def test_each_answer_moves_the_job_as_documented() -> None:
    up, notes, own = one_job(UP, {"pysched.io/cpu-min": "4"})  # its own choice is its floor, 4: one CPU more
    assert own == [KEEP] and up == 5 and any("by the allocation policy" in n for n in notes)
    assert one_job(DOWN, {"pysched.io/cpu-min": "2"})[::2] == (2, [KEEP])  # down to its own, lower choice
    assert one_job(DOWN, {"pysched.io/cpu-min": "4"})[0] == 4  # never below its floor
    assert one_job(UP, {"pysched.io/cpu-min": "4", "pysched.io/cpu-max": "4"})[0] == 4  # nor above its bound
    assert one_job(KEEP, {"pysched.io/cpu-min": "2"})[:2] == (4, [])
    # A policy's bug: Autoscale's own choice stands (here, keep).
    assert one_job(UP, {"pysched.io/cpu-min": "4"}, agent_fails=True) == (4, [], [KEEP])
