"""`python -m perf curve`: time per pod against cluster size, scheduler_perf's basic shape (small
plain pods, created first) at each node count, in process (sim) and against the API (live).

    python -m perf curve --nodes 1000,5000,10000,15000 --backend sim,live \\
        --scheduler pysched,kube-scheduler --json curve.json --plot curve.png

At each size the schedulers alternate round by round, as in `run`; a point is the median of its
rounds. The simulated backend runs pysched alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from perf.harness.live import RoundResult
from perf.harness.workload import MAX_NODES, MAX_PODS, Nodes, PodGroup, Workload

Round = Callable[[Workload, str, str, int], RoundResult]  # workload, backend, scheduler, round -> result


@dataclass(frozen=True, slots=True)
class Point:
    backend: str
    scheduler: str
    nodes: int
    pods: int
    pods_per_second: float  # median over rounds
    correct: bool

    @property
    def ms_per_pod(self) -> float | None:
        return round(1000.0 / self.pods_per_second, 4) if self.pods_per_second > 0 else None


def basic(nodes: int, pods_per_node: int) -> Workload:
    """scheduler_perf's SchedulingBasic shape at `nodes` nodes."""
    pods = min(nodes * pods_per_node, MAX_PODS)
    return Workload(f"basic-{nodes}", Nodes(nodes, "32", "256Gi", 110), (PodGroup(pods, "100m", "128Mi"),))


def sizes(text: str) -> list[int]:
    """`1000,5000`: node counts, each from 1 to MAX_NODES; ValueError (one line) otherwise."""
    out = []
    for part in text.split(","):
        if not part.strip().isdecimal() or not 1 <= int(part) <= MAX_NODES or int(part) in out:
            raise ValueError(f"--nodes: distinct node counts from 1 to {MAX_NODES}, comma-separated, got {text!r}")
        out.append(int(part))
    return out


def measure(
    node_counts: Sequence[int],
    pods_per_node: int,
    runs: Sequence[tuple[str, str]],
    rounds: int,
    one: Round,
    say: Callable[[str], None] = lambda line: None,
) -> list[Point]:
    """Every (backend, scheduler) of `runs` at every size, alternating within a size."""
    points = []
    for nodes in node_counts:
        workload = basic(nodes, pods_per_node)
        results: dict[tuple[str, str], list[RoundResult]] = {run: [] for run in runs}
        for n in range(rounds):
            for backend, scheduler in runs:
                result = one(workload, backend, scheduler, n)
                results[(backend, scheduler)].append(result)
                say(f"{nodes} nodes, {backend} {scheduler}: {result.pods_per_second:.0f} pods/s")
        for (backend, scheduler), rs in results.items():
            rate = statistics.median(r.pods_per_second for r in rs)
            points.append(
                Point(backend, scheduler, nodes, workload.pod_count, round(rate, 1), all(r.correct for r in rs))
            )
    return points


def report(points: Sequence[Point], pods_per_node: int) -> dict[str, Any]:
    return {
        "workload": "basic",
        "pods_per_node": pods_per_node,
        "points": [{**asdict(p), "ms_per_pod": p.ms_per_pod} for p in points],
    }


def markdown(points: Sequence[Point]) -> str:
    lines = ["| backend | scheduler | nodes | pods | pods/s | ms per pod | correct |", "|---" * 7 + "|"]
    for p in points:
        per_pod = "-" if p.ms_per_pod is None else f"{p.ms_per_pod:g}"
        rate = f"{p.pods_per_second:,.0f}"
        lines.append(f"| {p.backend} | {p.scheduler} | {p.nodes:,} | {p.pods:,} | {rate} | {per_pod} | {p.correct} |")
    return "\n".join(lines)


def plot(points: Sequence[Point], out: Path) -> None:
    """Time per pod against nodes: a line per backend and scheduler (log scale: in process and
    live differ by two orders of magnitude)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for key in dict.fromkeys((p.backend, p.scheduler) for p in points):
        line = [(p.nodes, p.ms_per_pod) for p in points if (p.backend, p.scheduler) == key and p.ms_per_pod]
        ax.plot([n for n, _ in line], [ms for _, ms in line], "o-", label=f"{key[1]} ({key[0]})")
    ax.set_xlabel("nodes")
    ax.set_ylabel("ms per pod (first to last bind)")
    ax.set_yscale("log")
    ax.set_title("scheduler_perf's basic shape: time per pod against cluster size", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
