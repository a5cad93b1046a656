"""`pysched simulate --plot DIR`: PNG charts (matplotlib, imported only here)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from pysched.sim.runner import PolicyResult


def cpu_over_time(result: PolicyResult, points: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hours, allocated CPUs, used CPUs) sampled on a regular grid from the usage segments."""
    if not result.usage:
        zero = np.zeros(1)
        return zero, zero, zero
    start = np.array([u.start for u in result.usage])
    end = np.array([u.end for u in result.usage])
    cpu = np.array([u.cpu for u in result.usage])
    used = np.array([u.used_cpu_s / (u.end - u.start) for u in result.usage])
    grid = np.linspace(start.min(), end.max(), points)
    active = (start[None, :] <= grid[:, None]) & (grid[:, None] < end[None, :])
    return (grid - start.min()) / 3600, active @ cpu, active @ used


def write_plots(results: Mapping[str, PolicyResult], directory: str | Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    names = list(results)
    written = []

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ratios = [results[n].deadline_met_ratio for n in names]
    ax.bar(names, ratios, color="tab:blue")
    ax.set_ylim(0, 1.12)  # room for the labels above full bars
    ax.set_ylabel("deadline met ratio")
    ax.set_title("Jobs finished by their deadline")
    for i, r in enumerate(ratios):
        ax.text(i, r + 0.02, f"{r:.0%}", ha="center")
    fig.tight_layout()
    written.append(out / "deadline_met.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(len(names), 1, figsize=(7, 2.2 * len(names)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        hours, allocated, used = cpu_over_time(results[name])
        ax.fill_between(hours, allocated, step="mid", alpha=0.3, label="allocated")
        ax.plot(hours, used, lw=1, label="used")
        ax.set_ylabel("CPUs")
        ax.set_title(f"{name}: utilisation {results[name].cpu_utilization:.0%}", fontsize=9)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("hours (CPU-model jobs)")
    fig.tight_layout()
    written.append(out / "cpu_allocated_vs_used.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name in names:
        jct = np.sort(np.array(results[name].jct)) / 3600
        if jct.size:
            ax.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours)")
    ax.set_ylabel("fraction of finished jobs")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(out / "jct_cdf.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)
    return written
