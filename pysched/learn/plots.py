"""The training curve as a PNG (matplotlib, the `plot` extra)."""

from __future__ import annotations

from collections.abc import Sequence


def training_curve(
    points: Sequence[tuple[int, float, float]],
    path: str,
    validation: Sequence[tuple[int, float]] = (),
    window: int = 10,
) -> None:
    """Deadline-met ratio of each training episode (its picks sampled) against PPO steps, with a
    moving mean, and the greedy policy's mean on the validation workloads at each checkpoint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [p[0] for p in points]
    ratios = [p[1] for p in points]
    mean = [
        sum(ratios[max(0, i - window + 1) : i + 1]) / len(ratios[max(0, i - window + 1) : i + 1])
        for i in range(len(ratios))
    ]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, ratios, ".", alpha=0.3, label="episode")
    ax.plot(steps, mean, "-", label=f"mean of {window}")
    if validation:
        ax.plot([v[0] for v in validation], [v[1] for v in validation], "o-", color="black", label="validation")
    ax.set_xlabel("PPO environment steps (after the warm start)")
    ax.set_ylabel("deadline-met ratio")
    ax.set_title("pysched/Ordering-v0 training")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
