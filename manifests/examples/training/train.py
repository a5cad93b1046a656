"""A small CPU training job that pysched can predict and resize.

It trains a two-layer network on a synthetic regression task, reports each step to pysched
(`pysched_progress.report`, rate-limited to one write a minute) and, every `--check-every`
steps, asks how many CPUs the container has now (`granted_cpus()`: the cgroup's CPU quota, or the
request behind its `cpu.weight`, both rewritten by the kubelet on an in-place resize) and sets its
thread count to match, so a scale-up is used at once and a scale-down does not oversubscribe.

    python train.py --steps 300000          # in the pod of job.yaml, or locally against a cluster

PyTorch when it is installed (`--framework torch`); otherwise the same model in numpy, so the
example also runs where torch is not (`--framework numpy`). Multi-rank jobs report from rank 0
only; this one is a single process.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import pysched_progress as progress

FEATURES, HIDDEN, BATCH = 64, 128, 256


class Trainer(Protocol):
    def step(self) -> float:
        """One optimiser step; the batch loss."""
        ...

    def use_threads(self, threads: int) -> None: ...


class TorchTrainer:
    def __init__(self, seed: int) -> None:
        import torch  # type: ignore[import-not-found,unused-ignore]  # optional: the numpy trainer stands in

        self.torch: Any = torch
        torch.manual_seed(seed)
        self.true_w = torch.randn(FEATURES, 1)
        self.model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 1))
        self.optimiser = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def step(self) -> float:
        x = self.torch.randn(BATCH, FEATURES)
        y = x @ self.true_w
        loss = self.torch.nn.functional.mse_loss(self.model(x), y)
        self.optimiser.zero_grad()
        loss.backward()
        self.optimiser.step()
        return float(loss.item())

    def use_threads(self, threads: int) -> None:
        self.torch.set_num_threads(threads)


class NumpyTrainer:
    """The same network by hand; a batch is split over `threads` workers (numpy's matrix products
    release the GIL), the gradients averaged."""

    def __init__(self, seed: int) -> None:
        import numpy as np

        self.np: Any = np
        self.rng = np.random.default_rng(seed)
        self.true_w = self.rng.standard_normal((FEATURES, 1))
        self.w1 = self.rng.standard_normal((FEATURES, HIDDEN)) / math.sqrt(FEATURES)
        self.w2 = self.rng.standard_normal((HIDDEN, 1)) / math.sqrt(HIDDEN)
        self.pool = ThreadPoolExecutor(1)
        self.threads = 1

    def _gradients(self, x: Any) -> tuple[Any, Any, float]:
        np = self.np
        y = x @ self.true_w
        hidden = np.maximum(x @ self.w1, 0.0)
        error = hidden @ self.w2 - y
        g2 = hidden.T @ error * (2 / len(x))
        g1 = x.T @ ((error @ self.w2.T) * (hidden > 0)) * (2 / len(x))
        return g1, g2, float((error**2).mean())

    def step(self) -> float:
        x = self.rng.standard_normal((BATCH, FEATURES))
        parts = list(self.pool.map(self._gradients, self.np.array_split(x, self.threads)))
        self.w1 -= 0.01 * sum(g1 for g1, _, _ in parts) / len(parts)
        self.w2 -= 0.01 * sum(g2 for _, g2, _ in parts) / len(parts)
        return sum(loss for _, _, loss in parts) / len(parts)

    def use_threads(self, threads: int) -> None:
        self.pool.shutdown()
        self.pool = ThreadPoolExecutor(threads)
        self.threads = threads


def make_trainer(framework: str, seed: int) -> Trainer:
    if framework == "auto":
        framework = "torch" if importlib.util.find_spec("torch") is not None else "numpy"
        if framework == "numpy":
            print("torch is not installed: training the same model with numpy", flush=True)
    return TorchTrainer(seed) if framework == "torch" else NumpyTrainer(seed)


def threads_for(cpus: float) -> int:
    """A thread per whole CPU granted, at least one (a 1.5-CPU share runs one thread well)."""
    return max(1, math.floor(cpus))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="total optimiser steps (default 2000)")
    parser.add_argument("--start", type=int, default=0, help="the step to start from (default 0)")
    parser.add_argument("--check-every", type=int, default=50, help="steps between CPU checks (default 50)")
    parser.add_argument("--framework", choices=("auto", "torch", "numpy"), default="auto", help="default auto")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--cgroup-root",
        type=Path,
        default=Path("/sys/fs/cgroup"),
        help="the container's cgroup (default /sys/fs/cgroup)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.start < args.steps or args.check_every < 1:
        parser.error("need 0 <= --start < --steps and --check-every >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    trainer = make_trainer(args.framework, args.seed)
    threads = threads_for(progress.granted_cpus(args.cgroup_root))
    trainer.use_threads(threads)
    print(f"training {args.steps} steps on {threads} threads", flush=True)
    started = time.monotonic()
    loss = math.nan
    for step in range(args.start, args.steps):
        loss = trainer.step()
        progress.report(step + 1, total=args.steps)  # never raises; a failed write is one warning line
        if (step + 1) % args.check_every == 0:
            now = threads_for(progress.granted_cpus(args.cgroup_root))
            if now != threads:
                print(f"step {step + 1}: CPUs changed, {threads} -> {now} threads", flush=True)
                trainer.use_threads(now)
                threads = now
    progress.flush()
    print(f"done: {args.steps} steps in {time.monotonic() - started:.1f}s, loss {loss:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
