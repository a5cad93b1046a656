"""Feature rows of waiting jobs: the facts a learned order reads, in the schema's columns."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pysched.deadline.features import FEATURES, WIDTH, ClusterView, Waiting, squash, static, window_rows

NOW = 10_000.0


def _job(deadline: float | None, steps: int | None = 1000, created: float = 9_000.0) -> Waiting:
    return Waiting(created=created, deadline=deadline, total_steps=steps, cpus=2.0, cpus_max=8.0, gpus=0, workers=1)


def _rows(
    fixed: list[np.ndarray], cluster: ClusterView, now: float, room: tuple[float, float] = (math.inf, math.inf)
) -> tuple[np.ndarray, np.ndarray, int]:
    """`window_rows` of a window that is every row, in order."""
    return window_rows(np.array(fixed), np.arange(len(fixed), dtype=np.int64), cluster, now, room)


def col(name: str) -> int:
    return FEATURES.index(name)


def test_rows_carry_laxity_waiting_position_and_the_cluster() -> None:
    window = [_job(NOW + 3600), _job(None), _job(NOW + 600, steps=None)]
    m, _, _ = _rows([static(j, 1.0) for j in window], ClusterView(0.25, 0.0), NOW)
    assert m.shape == (3, WIDTH) and m.dtype == np.float32
    assert m[0, col("waiting")] == np.float32(squash(1000.0))
    # at 2 CPUs under the prior a step takes 0.05 + 0.95 / 2 = 0.525 s: 1000 steps, 525 s
    assert np.isclose(m[0, col("remaining_requested")], squash(525.0))
    assert m[0, col("remaining_max")] < m[0, col("remaining_requested")]  # 8 CPUs go faster
    assert np.isclose(m[0, col("laxity")], squash(3600.0 - 525.0))
    assert m[0, col("band")] > 0
    assert m[1, col("best_effort")] == 1.0 and m[1, col("laxity")] == 0.0 and m[1, col("to_deadline")] == 0.0
    assert m[2, col("steps")] == 0.0 and m[2, col("remaining_requested")] == 0.0
    assert list(m[:, col("position")]) == [0.0, np.float32(1 / 3), np.float32(2 / 3)]
    assert np.all(m[:, col("free_cpu")] == np.float32(0.25))


def test_without_a_prior_the_remaining_time_is_unknown() -> None:
    m, _, _ = _rows([static(_job(NOW + 3600), 0.0)], ClusterView(1.0, 0.0), NOW)
    assert m[0, col("remaining_requested")] == 0.0
    assert np.isclose(m[0, col("laxity")], squash(3600.0))


@given(st.floats(-1e9, 1e9), st.floats(-1e9, 1e9))
def test_squash_keeps_the_order_of_times(a: float, b: float) -> None:
    if a < b:
        assert squash(a) <= squash(b)
    assert abs(squash(a)) < 15


def test_the_window_allows_the_head_priority_and_what_fits_the_most_room() -> None:
    jobs = [
        Waiting(0.0, None, None, 2.0, 2.0, 0, 1, priority=5),
        Waiting(0.0, None, None, 2.0, 2.0, 1, 1, priority=5),  # a GPU
        Waiting(0.0, None, None, 8.0, 8.0, 0, 1, priority=5),  # more CPUs than any node has free
        Waiting(0.0, None, None, 1.0, 1.0, 0, 1, priority=0),  # a lower priority
    ]
    _, allowed, count = _rows([static(j, 0.0) for j in jobs], ClusterView(0.5, 0.0), NOW, room=(4000, 0))
    assert list(allowed) == [True, False, False, False] and count == 1
    _, allowed, count = _rows([static(j, 0.0) for j in jobs], ClusterView(0.5, 0.0), NOW, room=(8000, 1))
    assert list(allowed) == [True, True, True, False] and count == 3
