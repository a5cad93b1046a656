"""`pysched simulate --plot DIR`: PNG charts (matplotlib, imported only here)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def same_curves(results: Mapping[str, PolicyResult]) -> dict[str, str]:
    """Policy -> the earlier policy whose JCT curve it repeats exactly (drawn on top of each other,
    the legend says so)."""
    seen: dict[tuple[float, ...], str] = {}
    same: dict[str, str] = {}
    for name, result in results.items():
        curve = tuple(sorted(result.jct))
        if curve and curve in seen:
            same[name] = seen[curve]
        else:
            seen.setdefault(curve, name)
    return same


DEADLINE_MET, CPU_ALLOCATED, JCT_CDF = "deadline_met.png", "cpu_allocated_vs_used.png", "jct_cdf.png"
PLOT_FILES = (DEADLINE_MET, CPU_ALLOCATED, JCT_CDF)  # what `--plot DIR` writes in DIR


def write_plots(
    results: Mapping[str, PolicyResult], directory: str | Path, workload: str = "", capacity_cpu: float | None = None
) -> list[Path]:
    """`workload` (the scenario or trace and its job count) goes under every title; `capacity_cpu`
    is drawn on the CPU panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    def titled(fig: Any, title: str) -> None:
        fig.suptitle(f"{title}\n{workload}" if workload else title, fontsize=10)

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    names = list(results)
    written = []

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ratios = [results[n].deadline_met_ratio for n in names]
    ax.bar(names, ratios, color="tab:blue")
    ax.set_ylim(0, 1.12)  # room for the labels above full bars
    ax.set_ylabel("deadline met ratio")
    titled(fig, "Jobs finished by their deadline")
    for i, r in enumerate(ratios):
        ax.text(i, r + 0.02, f"{r:.0%}", ha="center")
    fig.tight_layout()
    written.append(out / DEADLINE_MET)
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(len(names), 1, figsize=(7, 2.2 * len(names)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        hours, allocated, used = cpu_over_time(results[name])
        if capacity_cpu:
            ax.axhline(capacity_cpu, color="black", ls="--", lw=1, label="capacity")
        ax.fill_between(hours, allocated, step="mid", color="tab:blue", alpha=0.25, label="allocated")
        ax.plot(hours, used, color="tab:orange", lw=1.2, label="used")
        ax.set_ylabel("CPUs")
        ax.set_title(f"{name}: utilisation {results[name].cpu_utilization:.0%}", fontsize=9)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("hours (CPU-model jobs)")
    titled(fig, "CPUs allocated and used")
    fig.tight_layout()
    written.append(out / CPU_ALLOCATED)
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.8))
    same = same_curves(results)
    for name in names:
        jct = np.sort(np.array(results[name].jct)) / 3600
        if jct.size:
            label = f"{name} (same as {same[name]})" if name in same else name
            style = "--" if name in same else "-"
            ax.step(jct, np.arange(1, jct.size + 1) / jct.size, style, where="post", label=label)
    ax.set_xscale("log")
    plain = FuncFormatter(lambda x, _: f"{x:g}")  # 0.1, 2, 10: not 10^-1, 2x10^0
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))  # every minor tick labelled overprints
    ax.xaxis.set_minor_formatter(plain)
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of finished jobs")
    ax.legend(fontsize=8)
    titled(fig, "Job completion time, cumulative")
    fig.tight_layout()
    written.append(out / JCT_CDF)
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)
    return written
