"""A multi-pod job's run: which members run, and its segment while all of them do. The simulator
runs it on virtual time, the kubelet emulator on scaled wall time.

Members bound while others wait hold their resources (charged as allocated) and make no progress.
Once every member runs, the job runs one segment at the rate its gang truth gives for what the
members hold (`pysched.workload.gang`); a change of any member closes the segment. Training saves a
checkpoint every CHECKPOINT_SECONDS of training: a member that leaves (preempted, failed) or
restarts takes the job back to it. A scale of an elastic job (its owner's worker count changed,
`scale`) is no failure: the job checkpoints on the change, loses nothing, and resumes after a pause.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from pysched.workload.accounting import Accounting, Usage
from pysched.workload.gang import Gang, Held
from pysched.workload.job import Job
from pysched.workload.segment import (
    CHECKPOINT_SECONDS,
    RESTART_SECONDS,
    Run,
    noisy_step_seconds,
    scale_pause_seconds,
)
from pysched.workload.speed import STEP_NOISE


@dataclass(slots=True)
class GangRun:
    job: Job
    gang: Gang
    held: dict[int, Held] = field(default_factory=dict)  # member index -> what it holds, while bound
    since: dict[int, float] = field(default_factory=dict)  # accounting: when each allocation began
    run: Run | None = None  # the current segment, while every member runs
    steps: int = 0  # steps done when the job last paused
    checkpoint: int = 0  # steps saved by the last periodic checkpoint
    trained_s: float = 0.0  # training seconds before the current segment
    generation: int = 0  # versions the segments, so a superseded finish event is ignored
    paused_until: float = -math.inf  # no segment starts before this (the last scale's pause)

    @property
    def complete(self) -> bool:
        return len(self.held) == len(self.gang.members)

    def bind(self, index: int, held: Held, now: float, rng: random.Random, noise: float = STEP_NOISE) -> bool:
        """A member started; True when it completes the gang (the job starts or resumes)."""
        self.held[index] = held
        self.since[index] = now
        if not self.complete or self.run is not None:
            return False
        self._start(now, now, rng, noise)
        return True

    def resize(
        self, index: int, cpu: float, now: float, books: Accounting, rng: random.Random, noise: float = STEP_NOISE
    ) -> None:
        """A member's CPUs changed: in place keeps the steps, a container restart goes back to the
        checkpoint and pays RESTART_SECONDS."""
        running = self.run is not None
        self.close(now, books)
        self.held[index] = dataclasses.replace(self.held[index], cpu=cpu)
        if not running:
            return
        books.rescaled(self.job.name)
        if self.job.restart_on_resize:
            self.steps = self.checkpoint
            self._start(now + RESTART_SECONDS, now, rng, noise)
        else:
            self._start(now, now, rng, noise)

    def scale(
        self,
        gang: Gang,
        now: float,
        books: Accounting,
        rng: random.Random,
        noise: float = STEP_NOISE,
        renumber: Mapping[int, int] | None = None,
    ) -> float:
        """The job's members are now `gang`'s: its owner's worker count changed (an elastic
        Indexed Job's Job controller created the new indexes or removed the highest ones). The
        training (torchrun --nnodes=MIN:MAX) checkpoints on the change, so no step is lost, then
        meets again and resumes from it a pause later (drawn here, returned) at the new set's
        rate, once all of `gang`'s members run; new indexes join through `bind`. `renumber` maps
        each member that stays from its index to its new one (default: indexes below the new
        count stay, the others are gone); a member no longer in the gang may still `leave`."""
        count = len(gang.members)
        moves = dict(renumber) if renumber is not None else {i: i for i in self.held if i < count}
        if len(set(moves.values())) != len(moves) or not all(0 <= j < count for j in moves.values()):
            raise ValueError(f"renumbering {moves} does not fit {count} members")
        running = self.run is not None
        self.close(now, books)
        self.checkpoint = self.steps
        self.held = {moves[i]: h for i, h in self.held.items() if i in moves}
        self.since = {moves[i]: t for i, t in self.since.items() if i in moves}
        self.gang = gang
        pause = scale_pause_seconds(self.job, rng)
        if running or self.steps > 0:  # a job that never trained has no workers to restart
            self.paused_until = now + pause
        if running:
            books.rescaled(self.job.name)
        if self.complete:
            self._start(now, now, rng, noise)
        return pause

    def leave(self, index: int, now: float, books: Accounting) -> None:
        """A member is gone (preempted, failed): the job pauses and will resume from its checkpoint.
        A member that a scale already removed changes nothing."""
        if index not in self.held:
            return
        self.close(now, books)
        self.held.pop(index, None)
        self.since.pop(index, None)
        self.steps = self.checkpoint

    def close(self, now: float, books: Accounting) -> None:
        """End the current segment at `now` and charge every member's allocation since it began."""
        held = self._ordered()
        # No training yet: nothing used, or None for a GPU model (no CPU accounting).
        used: float | None = self.gang.speed.used_cpu_s(self.job.truth, 0, 0.0, held)
        if self.run is not None:
            run, self.run = self.run, None
            seconds = max(0.0, now - run.seg_start)
            done = run.steps_at(now)
            used = self.gang.speed.used_cpu_s(self.job.truth, done - run.seg_steps, seconds, held)
            trained = self.trained_s + seconds
            last = math.floor(trained / CHECKPOINT_SECONDS) * CHECKPOINT_SECONDS
            if last > self.trained_s:
                self.checkpoint = run.steps_at(run.seg_start + last - self.trained_s)
            self.trained_s = trained
            self.steps = done
        if used is not None:  # a CPU model: charge every member's allocation, used or not
            self._charge(now, used, books)
        for i in self.held:
            self.since[i] = now

    def _charge(self, now: float, used: float, books: Accounting) -> None:
        allocated = {i: h.cpu * (now - self.since[i]) for i, h in self.held.items() if now > self.since[i]}
        total = sum(allocated.values())
        books.allocated_cpu_s += total
        books.used_cpu_s += used
        for i, cpu_s in allocated.items():
            share = used * cpu_s / total if total else 0.0
            books.usage.append(Usage(self.since[i], now, self.held[i].cpu, share, self.job.name))

    def _ordered(self) -> tuple[Held, ...]:
        return tuple(self.held[i] for i in sorted(self.held))

    def _start(self, seg_start: float, now: float, rng: random.Random, noise: float) -> None:
        seg_start = max(seg_start, self.paused_until)
        held = self._ordered()
        rate = self.gang.speed.steps_per_s(self.job.truth, held)
        mean = 1.0 / rate if rate > 0 else math.inf
        step_s = noisy_step_seconds(mean, self.job.steps - self.steps, rng, noise)
        self.generation += 1
        cpu, gpu = sum(h.cpu for h in held), sum(h.gpu for h in held)
        self.run = Run(self.job, cpu, gpu, seg_start, self.steps, step_s, now, self.generation)
