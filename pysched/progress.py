"""Progress reporting for training code: `report(step)` writes `pysched.io/progress`.

    from pysched import progress
    for step in range(start, total):
        train_one_step()
        progress.report(step + 1, total=total)
    progress.flush()

The pod's own name and namespace come from the downward API: the environment variables
`POD_NAME` and `POD_NAMESPACE`, else the files `/etc/podinfo/name` and `/etc/podinfo/namespace`
(a downwardAPI volume); the namespace also falls back to the service-account namespace file.
Writes are rate-limited (by default at most once a minute, `PYSCHED_PROGRESS_INTERVAL` seconds
otherwise): 10,000 jobs reporting every 15 s would be 670 writes a second. The first report and a
report that reaches `total` are written at once; `flush()` writes the last step at any time.
An API error is logged and never reaches the training loop. The pod's ServiceAccount needs the
Role and admission policy of `manifests/training/` (a pod may write only its own progress).

This module imports only the standard library; the synchronous `kubernetes` client is imported on
the first write. Callbacks for Keras and Hugging Face Trainer are duck-typed. Lightning's Trainer
accepts only subclasses of its `Callback`, so `lightning_callback()` imports `lightning.pytorch`
(else `pytorch_lightning`) when called and returns a `LightningProgress` that is one.

`granted_cpus()` is the CPU count to size thread pools by: the container's CPU limit (cgroup quota,
following an in-place resize), else the CPUs this process may run on.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import logging
import operator
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from pysched.api.annotations import PROGRESS, PROGRESS_INTERVAL, format_progress

__all__ = [
    "PROGRESS",
    "HuggingFaceProgress",
    "KerasProgress",
    "KubernetesTransport",
    "LightningProgress",
    "PodRef",
    "Reporter",
    "Transport",
    "configure",
    "default_reporter",
    "flush",
    "granted_cpus",
    "lightning_callback",
    "report",
]

logger = logging.getLogger(__name__)

POD_NAME_ENV = "POD_NAME"
POD_NAMESPACE_ENV = "POD_NAMESPACE"
INTERVAL_ENV = "PYSCHED_PROGRESS_INTERVAL"
PODINFO_DIR = Path("/etc/podinfo")
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str

    @classmethod
    def from_downward_api(
        cls,
        env: Mapping[str, str] | None = None,
        podinfo: Path = PODINFO_DIR,
        sa_namespace: Path = SERVICE_ACCOUNT_NAMESPACE,
    ) -> PodRef | None:
        """The pod this process runs in; None outside a pod (or without the downward API)."""
        environ = os.environ if env is None else env
        name = environ.get(POD_NAME_ENV) or _read(podinfo / "name")
        namespace = environ.get(POD_NAMESPACE_ENV) or _read(podinfo / "namespace") or _read(sa_namespace)
        return cls(namespace, name) if name and namespace else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


class Transport(Protocol):
    """How a Reporter reaches the API: merge the annotations into the pod's (raise on failure)."""

    def patch_annotations(self, pod: PodRef, annotations: Mapping[str, str]) -> None: ...


class KubernetesTransport:
    """PATCH through the synchronous `kubernetes` client; in-cluster credentials unless an
    `ApiClient` is given. The client is imported and configured on the first write."""

    def __init__(self, api_client: Any = None, *, timeout: float = 10.0) -> None:
        self._api_client = api_client
        self._core: Any = None
        self.timeout = timeout

    def patch_annotations(self, pod: PodRef, annotations: Mapping[str, str]) -> None:
        if self._core is None:
            from kubernetes import client

            api_client = self._api_client
            if api_client is None:
                from kubernetes import config

                loader: Any = config  # untyped package
                configuration = client.Configuration()
                # try_refresh_token (the default) re-reads the projected token kubelet rotates
                loader.load_incluster_config(client_configuration=configuration)
                api_client = client.ApiClient(configuration)
            self._core = client.CoreV1Api(api_client)
        # A dict body goes out as a strategic merge patch; the answer is not parsed into models.
        self._core.patch_namespaced_pod(
            pod.name,
            pod.namespace,
            {"metadata": {"annotations": dict(annotations)}},
            _request_timeout=self.timeout,
            _preload_content=False,
        )


class Reporter:
    """Rate-limited writer of one pod's `pysched.io/progress`; thread-safe, never raises.

    `pod=None` (not running in a pod) makes every call a no-op. `clock` gives epoch seconds: it
    stamps observations and paces writes.
    """

    def __init__(
        self,
        pod: PodRef | None,
        transport: Transport | None = None,
        *,
        interval: float = PROGRESS_INTERVAL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pod = pod
        self.interval = interval
        self._transport = transport
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: tuple[int, float] | None = None  # the newest observation not yet written
        self._written: str | None = None
        self._last_attempt: float | None = None

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> Reporter:
        environ = os.environ if env is None else env
        pod = PodRef.from_downward_api(environ)
        if pod is None:
            logger.warning(
                "pysched.progress: no pod name/namespace (set %s and %s from the downward API); not reporting",
                POD_NAME_ENV,
                POD_NAMESPACE_ENV,
            )
        interval = PROGRESS_INTERVAL
        if INTERVAL_ENV in environ:
            try:
                interval = max(0.0, float(environ[INTERVAL_ENV]))
            except ValueError:
                logger.warning(
                    "pysched.progress: ignoring %s=%r (seconds expected)", INTERVAL_ENV, environ[INTERVAL_ENV]
                )
        return cls(pod, interval=interval)

    def report(self, step: int, *, total: int | None = None) -> bool:
        """Record `step` steps done now; write it if the interval has passed since the last write
        (or this is the first report, or `step` reached `total`). True when this step is written."""
        if self.pod is None:
            return False
        try:
            steps = operator.index(step)  # int-like values too (numpy / 0-d tensor integers)
        except TypeError:
            logger.warning("pysched.progress: ignoring non-integer step %r", step)
            return False
        if steps < 0:
            logger.warning("pysched.progress: ignoring negative step %d", steps)
            return False
        with self._lock:
            now = self._clock()
            self._pending = (steps, now)
            last = self._last_attempt
            # A clock that went backwards counts as due, so writes never stall.
            due = last is None or not 0 <= now - last < self.interval
            if due or (total is not None and steps >= total):
                return self._write(now)
            return False

    def flush(self) -> bool:
        """Write the newest step now if it is not written yet. True when it is written."""
        if self.pod is None:
            return False
        with self._lock:
            return self._write(self._clock())

    def _write(self, now: float) -> bool:
        if self._pending is None:
            return self._written is not None
        value = format_progress(*self._pending)
        if value == self._written:
            self._pending = None
            return True
        self._last_attempt = now
        assert self.pod is not None
        try:
            if self._transport is None:
                self._transport = KubernetesTransport()
            self._transport.patch_annotations(self.pod, {PROGRESS: value})
        except Exception:
            # Training must go on: the next due report (or flush) retries with the newest step.
            logger.warning(
                "pysched.progress: could not write %s=%s on pod %s/%s",
                PROGRESS,
                value,
                self.pod.namespace,
                self.pod.name,
                exc_info=True,
            )
            return False
        self._written = value
        self._pending = None
        return True


_default: Reporter | None = None
_default_lock = threading.Lock()


def default_reporter() -> Reporter:
    """The process-wide Reporter, made from the environment on first use; flushed at exit."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Reporter.from_environment()
            atexit.register(_flush_default)
        return _default


def configure(reporter: Reporter | None) -> None:
    """Replace the process-wide Reporter (None: make it from the environment again)."""
    global _default
    with _default_lock:
        _default = reporter


def _flush_default() -> None:
    if _default is not None:
        _default.flush()


def report(step: int, *, total: int | None = None) -> bool:
    """Record progress on the process-wide Reporter (see `Reporter.report`)."""
    return default_reporter().report(step, total=total)


def flush() -> bool:
    """Write the last reported step now (see `Reporter.flush`)."""
    return default_reporter().flush()


class _Callback:
    """Hooks a framework calls that we do not use are no-ops, so a plain instance works wherever
    the framework only duck-types its callbacks; where it insists on its base class, mix it in
    after ours: `class Progress(LightningProgress, lightning.pytorch.Callback): pass`."""

    def __init__(self, reporter: Reporter | None = None) -> None:
        super().__init__()  # cooperative with a framework base class mixed in after us
        self._reporter = reporter

    @property
    def reporter(self) -> Reporter:
        return self._reporter if self._reporter is not None else default_reporter()

    def __getattr__(self, name: str) -> Callable[..., None]:
        # Only hooks: a default for any other name would answer `getattr(cb, "flag", False)`.
        if name.startswith("on_") or name in _SETTERS:
            return _ignore
        raise AttributeError(name)


_SETTERS = frozenset({"set_model", "set_params"})  # Keras calls these on every callback


def _ignore(*args: object, **kwargs: object) -> None:
    return None


class LightningProgress(_Callback):
    """PyTorch Lightning: reports `trainer.global_step` (optimizer steps) after each batch.
    Lightning's Trainer requires a `Callback` subclass: pass `lightning_callback()` to it."""

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        max_steps = getattr(trainer, "max_steps", -1)
        total = max_steps if isinstance(max_steps, int) and max_steps > 0 else None
        self.reporter.report(trainer.global_step, total=total)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.reporter.flush()


_LIGHTNING_MODULES = ("lightning.pytorch", "pytorch_lightning")


def lightning_callback(reporter: Reporter | None = None) -> LightningProgress:
    """A `LightningProgress` that is also a Lightning `Callback`, for `Trainer(callbacks=[...])`.
    Lightning is imported here, not when this module is (training code without it stays light)."""
    return _lightning_progress_class(_lightning_callback_base())(reporter)


def _lightning_callback_base() -> type:
    for module in _LIGHTNING_MODULES:
        try:
            base: type = importlib.import_module(module).Callback
            return base
        except ModuleNotFoundError as err:
            if err.name not in (module, module.partition(".")[0]):
                raise  # installed but broken (a dependency is missing): that error says why
    raise ImportError(
        "pysched.progress.lightning_callback() needs PyTorch Lightning: neither lightning.pytorch nor "
        "pytorch_lightning can be imported (pip install lightning)"
    )


@functools.cache
def _lightning_progress_class(base: type) -> type[LightningProgress]:
    # One class per base: every callback made shares it, and with it Lightning's `state_key`
    # (the class's qualified name, which keys callback state in checkpoints).
    return cast(type[LightningProgress], type("LightningProgressCallback", (LightningProgress, base), {}))


class KerasProgress(_Callback):
    """Keras: counts training steps across epochs as the epoch's first step plus the batch index
    Keras passes, so a callback made once per execution (`steps_per_execution`) keeps count."""

    def __init__(self, reporter: Reporter | None = None, *, initial_step: int = 0) -> None:
        super().__init__(reporter)
        self.steps = initial_step  # for a run resumed from a checkpoint
        self._epoch_start = initial_step

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._epoch_start = self.steps

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        self.steps = self._epoch_start + int(batch) + 1
        self.reporter.report(self.steps)

    def on_train_end(self, logs: Mapping[str, Any] | None = None) -> None:
        self.reporter.flush()


class HuggingFaceProgress(_Callback):
    """Hugging Face `Trainer`: reports `state.global_step` at the end of each optimizer step."""

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        max_steps = getattr(state, "max_steps", 0)
        self.reporter.report(
            state.global_step, total=max_steps if isinstance(max_steps, int) and max_steps > 0 else None
        )

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.reporter.flush()


def granted_cpus(root: Path = CGROUP_ROOT) -> float:
    """CPUs to size thread pools by: the container's CPU quota (cgroup v2 `cpu.max`, else v1 CFS
    quota / period under `root`), which follows an in-place resize of the CPU limit; without a
    quota (no CPU limit, or no cgroup files) the CPUs this process may run on (its affinity mask,
    i.e. the cpuset; `os.cpu_count()` where there is none). A request alone sets no quota."""
    quota = _cgroup_quota(root)
    if quota is not None:
        return quota
    try:
        return float(len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity API (macOS, Windows)
        return float(os.cpu_count() or 1)


def _cgroup_quota(root: Path) -> float | None:
    v2 = _read(root / "cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        return _ratio(quota, period or "100000")
    for folder in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        quota_text = _read(root / folder / "cpu.cfs_quota_us")
        if quota_text is not None:
            return _ratio(quota_text, _read(root / folder / "cpu.cfs_period_us") or "100000")
    return None


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None  # "max" (v2) means unlimited
    return q / p if q > 0 and p > 0 else None  # v1 writes -1 for unlimited
