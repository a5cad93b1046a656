"""A bounded soak of `pysched run`: steady pod churn on its own control plane, sampled at an interval.

`run_soak` starts etcd + kube-apiserver + kube-controller-manager, fake nodes, the kubelet emulator
(a process) and one `pysched run` process on the built-in `pysched` profile, then for the churn time
creates pods at a steady rate (all with a deadline and total steps; a share are emulated training
jobs whose deadline needs more CPUs than they ask for, so Autoscale resizes them in place; the
others just run for a while) and deletes each pod once it has finished. Every interval it takes a
`Sample`: the scheduler process's RSS and the sizes of what it keeps (queues, cache, informer store,
Permit waits, event backlog and series, Autoscale's per-job state). After the churn it waits until
every pod finished and was deleted and the scheduler's structures are empty again (`drained`), and
fits a least-squares line to each size over the second half of the churn (`Trend`).

`perf/soak.py` is the command; `tests/integration/test_soak.py` runs a short one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from pysched.api.annotations import DEADLINE, TOTAL_STEPS
from pysched.testing.controlplane import LocalControlPlane, ManagedProcess
from pysched.testing.emulator import RUN_SECONDS_ANNOTATION
from pysched.testing.helpers import make_pod
from pysched.testing.kube import JSON, KubeAPI, KubeAPIError
from pysched.testing.scheduler import SchedulerProcess, start_scheduler
from pysched.workload.pod import EMULATE_MODEL

NAMESPACE = "soak"
SCHEDULER_NAME = "pysched"  # the built-in profile `pysched run` runs without --config
TRAINING_MODEL = "lstm"  # catalogue: 0.6 s a step on one CPU, 2% serial: more CPUs pay off
LSTM_STEP_SECONDS = 0.6
QUEUES = ("active", "backoff", "unschedulable", "gated", "parked")
TREND_SIGMAS = 3.0  # a slope counts as rising only this many standard errors above zero


@dataclass(frozen=True, slots=True)
class Workload:
    """What is created, how fast, and how long each pod runs (emulated seconds = wall seconds)."""

    rate: float = 5.0  # pods created per second
    run_seconds: tuple[float, float] = (30.0, 180.0)  # plain pods: uniform run time
    training_share: float = 0.2
    training_steps: tuple[int, int] = (250, 450)  # 150-270 s on the CPU they ask for
    deadline_share: tuple[float, float] = (0.5, 0.8)  # of the run on that CPU: scale-up needed
    cpus: tuple[str, ...] = ("500m", "1", "2", "4")
    memories: tuple[str, ...] = ("256Mi", "1Gi", "2Gi")
    seed: int = 0

    def pod(self, index: int, rng: random.Random) -> JSON:
        name = f"soak-{index:07d}"
        if rng.random() < self.training_share:
            steps = rng.randint(*self.training_steps)
            deadline = steps * LSTM_STEP_SECONDS * rng.uniform(*self.deadline_share)
            notes = {
                EMULATE_MODEL: TRAINING_MODEL,
                "pysched.io/emulate-seed": str(index),
                TOTAL_STEPS: str(steps),
                DEADLINE: f"{math.ceil(deadline)}s",
            }
            cpu = "1"
        else:
            run = rng.uniform(*self.run_seconds)
            # Generous deadlines: ordered by DeadlineLaxity, known to Autoscale, never resized (no progress).
            notes = {RUN_SECONDS_ANNOTATION: f"{run:.1f}", TOTAL_STEPS: "1000", DEADLINE: f"{math.ceil(3 * run)}s"}
            cpu = rng.choice(self.cpus)
        return make_pod(
            name, cpu=cpu, memory=rng.choice(self.memories), cpu_limit=None, memory_limit=None,
            scheduler=SCHEDULER_NAME, annotations=notes,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class SoakConfig:
    nodes: int = 500
    churn_seconds: float = 900.0
    interval: float = 60.0
    workload: Workload = Workload()
    progress_interval: float = 60.0  # the emulator's progress writes (the training helper's default)
    autoscale: Mapping[str, float] | None = None  # Autoscale args over the built-in profile's (camelCase)
    warmup_share: float = 0.5  # trends are fitted after this share of the churn
    drain_timeout: float = 600.0  # for every pod to finish and be deleted after the churn
    settle_timeout: float = 30.0  # then for the scheduler's structures to empty


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading of the scheduler process (`t`: seconds since the churn began)."""

    t: float
    phase: str  # "churn", or "drained" for the reading after every pod was deleted
    rss_mb: float
    queues: dict[str, int]
    pending: int  # sum of the queues
    cache_pods: int  # assumed ones included (kube-scheduler's scheduler_cache_size{type="pods"})
    cache_assumed: int
    cache_nodes: int
    informer_pods: int
    waiting: int  # held at Permit
    event_backlog: int
    event_series: int
    events_dropped: int
    autoscale_jobs: int  # running deadline jobs Autoscale keeps a prediction for
    rescales: int  # resizes Autoscale asked for, accepted ones
    bound: int  # binds that succeeded so far
    created: int
    deleted: int
    alive: int  # created and not yet deleted

    def row(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def line(self) -> str:
        q = " ".join(f"{name[:5]}={self.queues.get(name, 0)}" for name in QUEUES if self.queues.get(name, 0))
        return (
            f"{self.t:7.0f}s {self.phase:7s} rss={self.rss_mb:6.1f}MB"
            f" pending={self.pending:<4d}{f' ({q})' if q else ''}"
            f" cache={self.cache_pods}/{self.cache_nodes}n assumed={self.cache_assumed} informer={self.informer_pods}"
            f" waiting={self.waiting} events={self.event_backlog}+{self.event_series}s dropped={self.events_dropped}"
            f" autoscale={self.autoscale_jobs} rescales={self.rescales} bound={self.bound} alive={self.alive}"
        )


@dataclass(frozen=True, slots=True)
class Trend:
    """A least-squares line through one size against time, per minute."""

    name: str
    samples: int
    mean: float
    spread: float  # the samples' standard deviation
    slope: float  # per minute
    stderr: float  # the slope's standard error, per minute
    rise: float  # slope times the window: what the line gains over it
    rising: bool

    def line(self) -> str:
        verdict = "RISING" if self.rising else "flat"
        return (
            f"{self.name:15s} n={self.samples:<3d} mean={self.mean:10.1f} spread={self.spread:8.2f} "
            f"slope={self.slope:+9.3f}/min ± {self.stderr:.3f} (rise {self.rise:+.1f} over the window): {verdict}"
        )


# Sizes fitted for a trend; a rise smaller than MIN_RISE (MB of RSS, or objects) is never one. Only
# RSS decides the verdict: the counts are checked exactly once drained (`empty`), which a slope over
# a few minute-samples of autocorrelated churn cannot match, so their slopes are only reported.
JUDGED = ("rss_mb",)
TRENDED = (
    "rss_mb", "pending", "cache_pods", "informer_pods", "waiting", "event_backlog", "event_series",
    "autoscale_jobs", "alive",
)  # fmt: skip
MIN_RISE = 1.0


def fit_trend(name: str, ts: Sequence[float], ys: Sequence[float]) -> Trend | None:
    """Least squares of `ys` against `ts` (seconds); rising when the slope is more than
    `TREND_SIGMAS` standard errors above zero and the line gains more than `MIN_RISE` and 1% of
    the mean over the window (a statistically clear but immaterial creep is not a leak). None
    with fewer than 3 samples (no residual left to estimate the noise)."""
    n = len(ts)
    if n < 3:
        return None
    mt, my = sum(ts) / n, sum(ys) / n
    sxx = sum((t - mt) ** 2 for t in ts)
    if sxx == 0:
        return None
    slope = sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / sxx
    residual = sum((y - my - slope * (t - mt)) ** 2 for t, y in zip(ts, ys, strict=True))
    stderr = math.sqrt(residual / (n - 2) / sxx)
    spread = math.sqrt(sum((y - my) ** 2 for y in ys) / (n - 1))
    rise = slope * (max(ts) - min(ts))
    rising = slope > TREND_SIGMAS * stderr and rise > max(MIN_RISE, 0.01 * abs(my))
    return Trend(name, n, my, spread, slope * 60, stderr * 60, rise, rising)


def trends(samples: Sequence[Sample], since: float, series_window: float = 600.0) -> list[Trend]:
    """A trend per size over the churn samples from `since` on. The event series map fills for
    one series window before it can level off, so its fit starts no earlier than that."""
    churn = [s for s in samples if s.phase == "churn"]
    found: list[Trend] = []
    for name in TRENDED:
        start = max(since, series_window) if name == "event_series" else since
        window = [s for s in churn if s.t >= start]
        fitted = fit_trend(name, [s.t for s in window], [float(getattr(s, name)) for s in window])
        if fitted is not None:
            found.append(fitted)
    return found


@dataclass(frozen=True, slots=True)
class SoakResult:
    samples: tuple[Sample, ...]
    warm: Sample  # the first churn sample after the warm-up
    drained: Sample  # after the churn, every pod finished and deleted, the structures given time to empty
    settled: bool  # the structures did empty (see `empty`)
    trends: tuple[Trend, ...]
    errors: tuple[str, ...]  # the load generator's and the reaper's failed API calls

    @property
    def rising(self) -> list[Trend]:
        """The judged sizes that rise beyond their noise."""
        return [t for t in self.trends if t.rising and t.name in JUDGED]


def empty(sample: Sample) -> bool:
    """Nothing left over once every pod is gone: no queued, cached, waiting or tracked pod, no
    event waiting to be sent."""
    return (
        sample.alive == 0
        and sample.pending == 0
        and sample.cache_pods == 0
        and sample.informer_pods == 0
        and sample.waiting == 0
        and sample.event_backlog == 0
        and sample.autoscale_jobs == 0
    )


def rss_mb(pid: int) -> float:
    """VmRSS of a process, in MB (0 when it is gone)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def profile_file(path: Path, autoscale: Mapping[str, float] | None) -> Path:
    """The built-in `pysched` profile, with Autoscale's args overridden where given."""
    data = yaml.safe_load(resources.files("pysched.plugins").joinpath("builtin.yaml").read_text())
    profile = next(p for p in data["profiles"] if p["schedulerName"] == SCHEDULER_NAME)
    if autoscale:
        for entry in profile["pluginConfig"]:
            if entry["name"] == "Autoscale":
                entry["args"] = {**entry["args"], **autoscale}
    path.write_text(yaml.safe_dump({"profiles": [profile]}))
    return path


class _Churn:
    """Creates pods at a steady rate and deletes the finished ones, in threads."""

    def __init__(self, kube: KubeAPI, workload: Workload) -> None:
        self.kube = kube
        self.workload = workload
        self.created = 0
        self.deleted = 0
        self.errors: list[str] = []
        self.creating = threading.Event()
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self.creating.set()
        for target in (self._create_loop, self._reap_loop):
            thread = threading.Thread(target=target, name=f"soak{target.__name__}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop_creating(self) -> None:
        self.creating.clear()

    def stop(self) -> None:
        self.creating.clear()
        self.stopped.set()
        for thread in self._threads:
            thread.join(30)

    @property
    def alive(self) -> int:
        with self._lock:
            return self.created - self.deleted

    def _error(self, what: str, err: Exception) -> None:
        with self._lock:
            self.errors.append(f"{what}: {err}"[:300])

    def _create(self, pod: JSON) -> None:
        try:
            self.kube.create_pod(NAMESPACE, pod)
        except KubeAPIError as err:
            self._error(f"create {pod['metadata']['name']}", err)
            return
        with self._lock:
            self.created += 1

    def _create_loop(self) -> None:
        rng = random.Random(self.workload.seed)
        gap = 1.0 / self.workload.rate
        index = 0
        with ThreadPoolExecutor(max_workers=4) as pool:  # a slow answer must not slow the rate
            next_at = time.monotonic()
            while self.creating.is_set():
                delay = next_at - time.monotonic()
                if delay > 0 and self.stopped.wait(delay):
                    return
                if not self.creating.is_set():
                    return
                pool.submit(self._create, self.workload.pod(index, rng))
                index += 1
                next_at += gap

    def _reap_loop(self) -> None:
        gone: set[str] = set()
        while not self.stopped.wait(1.0):
            for phase in ("Succeeded", "Failed"):
                try:
                    listed = self.kube.get(
                        f"/api/v1/namespaces/{NAMESPACE}/pods", fieldSelector=f"status.phase={phase}"
                    )
                except KubeAPIError as err:
                    self._error("list finished pods", err)
                    continue
                for pod in listed.get("items", []):
                    name = pod["metadata"]["name"]
                    if name in gone:
                        continue
                    try:
                        self.kube.force_delete_pod(NAMESPACE, name)
                    except KubeAPIError as err:
                        self._error(f"delete {name}", err)
                        continue
                    gone.add(name)
                    with self._lock:
                        self.deleted += 1


def _metric_sum(metrics: dict[str, float], prefix: str, *labels: str) -> float:
    return sum(v for k, v in metrics.items() if k.startswith(prefix) and all(label in k for label in labels))


class Soak:
    """One soak: `start` brings everything up, `sample` reads the scheduler, `stop` ends it all."""

    def __init__(self, config: SoakConfig, workdir: Path | None = None) -> None:
        self.config = config
        self.plane = LocalControlPlane(workdir, perf=True)
        self.scheduler: SchedulerProcess | None = None
        self.emulator: ManagedProcess | None = None
        self.churn: _Churn | None = None
        self.begun = self.started = 0.0  # monotonic: start called, churn began

    def start(self) -> None:
        self.begun = time.monotonic()
        plane = self.plane.start()
        kube: KubeAPI = plane.api()
        kube.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        plane.create_nodes(self.config.nodes)
        self.emulator = plane.spawn(
            "kubelet-emulator",
            [
                sys.executable, "-m", "pysched.testing.emulator", f"--kubeconfig={plane.kubeconfig_path}",
                f"--progress-interval={self.config.progress_interval:g}",
            ],
        )  # fmt: skip
        config = profile_file(plane.workdir / "soak-profile.yaml", self.config.autoscale)
        self.scheduler = start_scheduler(plane, "pysched-soak", config=config)
        self.churn = _Churn(kube, self.config.workload)
        self.started = time.monotonic()
        self.churn.start()

    def stop(self) -> None:
        if self.churn is not None:
            self.churn.stop()
        self.plane.stop()

    def __enter__(self) -> Soak:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def sample(self, phase: str = "churn") -> Sample:
        assert self.scheduler is not None and self.churn is not None
        self.plane.check()  # a crashed scheduler, emulator or apiserver ends the soak with its log
        metrics = self.scheduler.metrics()
        queues = {name: int(metrics.get(f'scheduler_pending_pods{{queue="{name}"}}', 0)) for name in QUEUES}
        created, deleted = self.churn.created, self.churn.deleted
        return Sample(
            t=round(time.monotonic() - self.started, 1),
            phase=phase,
            rss_mb=round(rss_mb(self.scheduler.process.pid), 1),
            queues=queues,
            pending=sum(queues.values()),
            cache_pods=int(metrics.get('scheduler_cache_size{type="pods"}', -1)),
            cache_assumed=int(metrics.get('scheduler_cache_size{type="assumed_pods"}', -1)),
            cache_nodes=int(metrics.get('scheduler_cache_size{type="nodes"}', -1)),
            informer_pods=int(metrics.get('pysched_informer_objects{resource="pods"}', -1)),
            waiting=int(metrics.get("pysched_waiting_pods", -1)),
            event_backlog=int(metrics.get("pysched_event_backlog", -1)),
            event_series=int(metrics.get("pysched_event_series", -1)),
            events_dropped=int(metrics.get("pysched_events_dropped_total", 0)),
            autoscale_jobs=sum(1 for k in metrics if k.startswith("pysched_autoscale_predicted_slack_seconds{")),
            rescales=int(_metric_sum(metrics, "pysched_autoscale_rescales_total{", 'result="ok"')),
            bound=int(metrics.get('pysched_bind_calls_total{result="ok"}', 0)),
            created=created,
            deleted=deleted,
            alive=created - deleted,
        )

    def run(self, report: Callable[[Sample], None] = lambda _: None) -> SoakResult:
        """Churn for the configured time sampling every interval, then drain and settle."""
        assert self.churn is not None
        cfg = self.config
        samples: list[Sample] = []
        for _ in self._ticks(cfg.churn_seconds, cfg.interval):
            samples.append(self.sample())
            report(samples[-1])
        self.churn.stop_creating()
        drained = self._wait(lambda s: s.alive == 0, cfg.drain_timeout)
        settled = self._wait(empty, cfg.settle_timeout) if drained.alive == 0 else drained
        final = dataclasses.replace(settled, phase="drained")
        report(final)
        samples.append(final)
        since = cfg.warmup_share * cfg.churn_seconds
        warm = next((s for s in samples if s.phase == "churn" and s.t >= since), samples[0])
        self.churn.stop()
        return SoakResult(
            tuple(samples), warm, final, empty(final), tuple(trends(samples, since)), tuple(self.churn.errors)
        )

    def _ticks(self, seconds: float, interval: float) -> Iterator[None]:
        """Yield every `interval` seconds of the churn (sampling at an interval: a timed wait)."""
        assert self.churn is not None
        next_at = self.started + interval
        end = self.started + seconds
        while next_at <= end + 1e-6:
            if self.churn.stopped.wait(max(0.0, next_at - time.monotonic())):
                return
            yield
            next_at += interval

    def _wait(self, done: Callable[[Sample], bool], timeout: float) -> Sample:
        """Poll the scheduler until `done` holds or `timeout` passes; the last sample either way."""
        deadline = time.monotonic() + timeout
        while True:
            sample = self.sample("drain")
            if done(sample) or time.monotonic() >= deadline:
                return sample
            time.sleep(0.5)
