"""The soak's trend check: a steady climb is a trend, noise around a level and a tiny creep are not."""

from __future__ import annotations

import random

from pysched.testing.soak import fit_trend

MINUTES = [60.0 * i for i in range(8)]


def test_a_steady_climb_through_noise_is_rising() -> None:
    rng = random.Random(1)
    ys = [200 + 2.0 * i + rng.uniform(-0.5, 0.5) for i in range(8)]  # 2 MB a minute
    trend = fit_trend("rss_mb", MINUTES, ys)
    assert trend is not None and trend.rising
    assert abs(trend.slope - 2.0) < 3 * trend.stderr and trend.stderr < 0.5


def test_noise_around_a_level_is_flat() -> None:
    for seed in range(20):
        rng = random.Random(seed)
        ys = [600 + rng.gauss(0, 30) for _ in MINUTES]
        trend = fit_trend("alive", MINUTES, ys)
        assert trend is not None and not trend.rising, (seed, trend)


def test_a_clear_but_immaterial_creep_is_not_a_trend() -> None:
    ys = [220.0 + 0.1 * i for i in range(8)]  # 0.7 MB over seven minutes, without any noise
    trend = fit_trend("rss_mb", MINUTES, ys)
    assert trend is not None and trend.slope > 0 and not trend.rising


def test_too_few_samples_give_no_fit() -> None:
    assert fit_trend("rss_mb", [0.0, 60.0], [1.0, 2.0]) is None
