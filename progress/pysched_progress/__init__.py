"""pysched-progress: training code reports its progress to pysched, with the standard library only.

    import pysched_progress as progress
    for step in range(start, total):
        train_one_step()
        progress.report(step + 1, total=total)
    progress.flush()

`report(step)` writes the pod's `pysched.io/progress` annotation (`STEPS@RFC3339`), which pysched's
predictor reads. The pod's own name and namespace come from the downward API: the environment
variables `POD_NAME` and `POD_NAMESPACE`, else the files `/etc/podinfo/name` and
`/etc/podinfo/namespace` (a downwardAPI volume); the namespace also falls back to the
service-account namespace file. Writes are rate-limited (by default at most once a minute,
`PYSCHED_PROGRESS_INTERVAL` seconds otherwise): 10,000 jobs reporting every 15 s would be 670
writes a second. The first report and the first that reaches `total` are written at once;
`flush()` writes the last step at any time. A step that is not a whole number from 0 to 16 digits
(a bool neither) and a `total` that is not a whole number are ignored, with one warning line per
kind. Fewer steps than before are written as they come: pysched reads them as a run that started
again from scratch (a restart without a checkpoint). The pod's ServiceAccount needs the Role and admission
policy of pysched's `manifests/training/` (a pod may write only its own progress).

Credentials (`ApiTransport`): in a pod, its service-account token (re-read at every write, as the
kubelet rotates it) and CA; outside a pod, a JSON kubeconfig (`$KUBECONFIG`, else
`~/.kube/config`), else what `kubectl config view --raw --minify -o json` prints: a token or a
client certificate. No YAML is parsed here. An exec credential plugin is not run (one warning).

Writes go out on a thread of their own: `report()` never waits for the API server (a hung one
would hold each due step for the write's 10 s timeout), and a step reported while a write is under
way is written after it, the newest only. `flush()` waits for the write under way, then writes;
`drain()` only waits. Nothing here raises into the training loop: a failed write is one warning
line (no traceback), then at most one every ten minutes with the count of failures in between, and
the next due report retries with the newest step.

Only the standard library is imported. Callbacks for Keras and Hugging Face Trainer are
duck-typed. Lightning's Trainer accepts only subclasses of its `Callback`, so
`lightning_callback()` imports `lightning.pytorch` (else `pytorch_lightning`) when called.

With several ranks, report from rank 0 only (its pod is the job's voice; pysched reads rank 0's
annotation for a gang): `if rank == 0: progress.report(step)`. Other ranks' reports are harmless
writes to their own pods.

`granted_cpus()` is the CPU count to size thread pools by: the container's CPU limit (cgroup
quota), else its CPU request (cgroup v2 `cpu.weight`, which the kubelet sets from the request and
changes on an in-place resize of a request-only container), else the CPUs the process may run on.
Container runtimes turn a request into `cpu.weight` by one of two formulas (runc 1.3.2 and crun
1.23 changed it); give the container `PYSCHED_CPU_REQUEST`, its request in millicores from the
downward API, and the weight is read by its runtime's formula (told at the first reading: call
`granted_cpus()` once at start, before any resize); without it, by the formula that reads a
rounder request (2 CPUs, not 4.43): right for most round requests, not all (1.5 CPUs under the
old formula is the weight 0.5 CPUs gets under the new one, and reads 0.5).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import functools
import importlib
import json
import logging
import math
import operator
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

__all__ = [
    "PROGRESS",
    "PROGRESS_INTERVAL",
    "ApiCredentials",
    "ApiTransport",
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
    "format_progress",
    "granted_cpus",
    "lightning_callback",
    "report",
]

PROGRESS = "pysched.io/progress"
PROGRESS_INTERVAL = 60.0  # seconds between writes at most, by default

logger = logging.getLogger("pysched_progress")


POD_NAME_ENV = "POD_NAME"
POD_NAMESPACE_ENV = "POD_NAMESPACE"
INTERVAL_ENV = "PYSCHED_PROGRESS_INTERVAL"
PODINFO_DIR = Path("/etc/podinfo")
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_ACCOUNT_NAMESPACE = SERVICE_ACCOUNT / "namespace"
CGROUP_ROOT = Path("/sys/fs/cgroup")
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
WARN_EVERY_S = 600.0  # after the first failure, at most one warning this often


def format_progress(steps: int, when: float) -> str:
    """`STEPS@RFC3339` (UTC, whole seconds), the form pysched reads."""
    return f"{steps}@{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(when))}"


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


@dataclass(frozen=True, slots=True)
class ApiCredentials:
    """Where the API server is and how to prove who we are."""

    server: str
    token: Callable[[], str | None] = lambda: None  # read at every request (rotated tokens)
    ca_pem: str | None = None  # None: the system's trust store
    client_cert: tuple[str, str] | None = None  # (certificate file, key file)
    insecure: bool = False

    @classmethod
    def in_cluster(cls, root: Path = SERVICE_ACCOUNT, env: Mapping[str, str] | None = None) -> ApiCredentials | None:
        environ = os.environ if env is None else env
        host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host or not (root / "token").is_file():
            return None
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        return cls(server, lambda: _read(root / "token"), _read(root / "ca.crt"))

    @classmethod
    def from_kubeconfig(
        cls, config: Mapping[str, Any], context: str | None = None, base: Path | None = None
    ) -> ApiCredentials:
        """From a kubeconfig as JSON (`kubectl config view --raw -o json`); ValueError when it
        names no usable cluster. Relative file names in it are read from `base`, the kubeconfig's
        folder, as kubectl reads them (else from the current folder)."""

        def named(kind: str, name: object) -> Mapping[str, Any]:
            for entry in config.get(f"{kind}s") or ():
                if isinstance(entry, Mapping) and entry.get("name") == name:
                    return cast("Mapping[str, Any]", entry.get(kind) or {})
            return {}

        ctx = named("context", context or config.get("current-context"))
        cluster, user = named("cluster", ctx.get("cluster")), named("user", ctx.get("user"))
        server = cluster.get("server")
        if not isinstance(server, str) or not server.startswith(("https://", "http://")):
            raise ValueError("the kubeconfig's current context names no cluster server")
        ca = _data_or_file(cluster, "certificate-authority", base)
        if user.get("exec") or user.get("auth-provider"):
            logger.warning("pysched_progress: the kubeconfig's user runs a credential plugin, which is not run here; "
                           "writing without credentials")  # fmt: skip
        token = user.get("token")
        token_file = user.get("tokenFile")
        cert, key = _data_or_file(user, "client-certificate", base), _data_or_file(user, "client-key", base)
        return cls(
            server,
            (lambda: str(token))
            if token
            else (lambda: _read(_beside(base, str(token_file))))
            if token_file
            else (lambda: None),
            ca,
            (_private_file(cert), _private_file(key)) if cert and key else None,
            bool(cluster.get("insecure-skip-tls-verify")),
        )

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> ApiCredentials:
        """In a pod, its service account; else the kubeconfig (JSON, else through kubectl)."""
        environ = os.environ if env is None else env
        found = cls.in_cluster(env=environ)
        if found is not None:
            return found
        path = next((p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p), "")
        config_file = Path(path) if path else Path.home() / ".kube" / "config"
        try:
            config = json.loads(config_file.read_text())
        except (OSError, ValueError):
            config = _kubectl_config(path)
        if not isinstance(config, Mapping):
            raise ValueError(f"no service account and no readable kubeconfig ({config_file})")
        return cls.from_kubeconfig(config, base=config_file.parent)


def _beside(base: Path | None, name: str) -> Path:
    """A file a kubeconfig names: a relative name is beside the kubeconfig (client-go's rule)."""
    path = Path(name).expanduser()
    return path if base is None or path.is_absolute() else base / path


def _data_or_file(section: Mapping[str, Any], key: str, base: Path | None = None) -> str | None:
    """A PEM given inline (`KEY-data`, base64) or as a file (`KEY`)."""
    data = section.get(f"{key}-data")
    if isinstance(data, str) and data:
        return base64.b64decode(data).decode()
    path = section.get(key)
    return _read(_beside(base, path)) if isinstance(path, str) and path else None


def _private_file(pem: str) -> str:
    """`ssl` loads a client certificate from files only: a 0600 file for this process's life."""
    fd, name = tempfile.mkstemp(prefix="pysched-progress-", suffix=".pem")
    with os.fdopen(fd, "w") as f:
        f.write(pem)
    atexit.register(functools.partial(_remove, name))
    return name


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _kubectl_config(path: str) -> object:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    env = {**os.environ, "KUBECONFIG": path} if path else None
    try:
        done = subprocess.run([kubectl, "config", "view", "--raw", "--minify", "-o", "json"],
                              capture_output=True, text=True, timeout=20, check=True, env=env)  # fmt: skip
        return json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


class ApiTransport:
    """A strategic-merge PATCH of the pod through `urllib`; credentials found on the first write
    (`ApiCredentials.from_environment`) unless given."""

    def __init__(self, credentials: ApiCredentials | None = None, *, timeout: float = 10.0) -> None:
        self._credentials = credentials
        self._context: ssl.SSLContext | None = None
        self.timeout = timeout

    def _ssl(self, creds: ApiCredentials) -> ssl.SSLContext:
        if self._context is None:
            context = ssl.create_default_context(cadata=creds.ca_pem) if creds.ca_pem else ssl.create_default_context()
            if creds.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if creds.client_cert is not None:
                context.load_cert_chain(*creds.client_cert)
            self._context = context
        return self._context

    def patch_annotations(self, pod: PodRef, annotations: Mapping[str, str]) -> None:
        if self._credentials is None:
            self._credentials = ApiCredentials.from_environment()
        creds = self._credentials
        body = json.dumps({"metadata": {"annotations": dict(annotations)}}).encode()
        url = f"{creds.server.rstrip('/')}/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        request = urllib.request.Request(url, data=body, method="PATCH")
        request.add_header("Content-Type", STRATEGIC_MERGE_PATCH)
        request.add_header("Accept", "application/json")
        token = creds.token()
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        context = self._ssl(creds) if url.startswith("https://") else None
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=context) as answer:
                answer.read()
        except urllib.error.HTTPError as err:
            detail = err.read()[:300].decode("utf-8", "replace")
            with contextlib.suppress(ValueError):
                parsed = json.loads(detail)
                if isinstance(parsed, dict):  # a Status; any other JSON is shown as it came
                    detail = str(parsed.get("message") or detail)
            raise RuntimeError(f"HTTP {err.code}: {detail}") from None


class KubernetesTransport:
    """PATCH through the synchronous `kubernetes` client, for code that has one configured
    (`ApiTransport` needs none); in-cluster credentials unless an `ApiClient` is given. The client
    is imported on the first write."""

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

    A due write goes out on a thread of its own, so `report()` never waits for the API server: a
    slow or hung server (a 10 s timeout per write) must not stall a training step. `flush()` and
    `drain()` wait for it. `pod=None` (not running in a pod) makes every call a no-op. `clock`
    gives epoch seconds: it stamps observations and paces writes.
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
        self._fresh_locks()
        self._pending: tuple[int, float] | None = None  # the newest observation not yet written
        self._written: str | None = None
        self._last_attempt: float | None = None
        self._last_warning: float | None = None
        self._failures = 0  # since the last warning
        self._finished = False  # the total was reached (and written at once)
        self._warned: set[str] = set()  # kinds of bad calls warned about
        _REPORTERS.add(self)

    def _fresh_locks(self) -> None:
        """New locks and no writer: at start, and in a forked child, where the parent's writer
        thread does not exist and may have held a lock at the fork."""
        self._lock = threading.Lock()  # the state below
        self._io = threading.Lock()  # one write at a time (the writer's or flush()'s)
        self._idle = threading.Condition(self._lock)  # the writer ended
        self._handed = False  # a due write waits for the writer
        self._writing = False  # the writer thread runs

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> Reporter:
        environ = os.environ if env is None else env
        pod = PodRef.from_downward_api(environ)
        if pod is None:
            logger.warning(
                "pysched_progress: no pod name/namespace (set %s and %s from the downward API); not reporting",
                POD_NAME_ENV,
                POD_NAMESPACE_ENV,
            )
        interval = PROGRESS_INTERVAL
        if INTERVAL_ENV in environ:
            try:
                given = float(environ[INTERVAL_ENV])
            except ValueError:
                given = math.nan
            if math.isfinite(given) and given >= 0:
                interval = given
            else:  # NaN or a negative number would turn the rate limit off
                logger.warning(
                    "pysched_progress: ignoring %s=%r (seconds, 0 or more, expected)",
                    INTERVAL_ENV,
                    environ[INTERVAL_ENV],
                )
        return cls(pod, interval=interval)

    def report(self, step: int, *, total: int | None = None) -> bool:
        """Record `step` steps done now; when the interval has passed since the last write (or
        this is the first report, or `step` reached `total`), start writing it in the background.
        True when a write of this step was started."""
        if self.pod is None:
            return False
        steps = _count(step)
        if isinstance(steps, str):
            self._warn_once(steps, f"ignoring {steps} step {step!r} (a whole number from 0 to {MAX_STEPS})")
            return False
        counted = _count(total) if total is not None else None
        last_total = counted if isinstance(counted, int) else None
        if isinstance(counted, str):
            self._warn_once("total", f"ignoring total={total!r}: a whole number expected")
        with self._lock:
            now = self._clock()
            self._pending = (steps, now)
            last = self._last_attempt
            # A clock that went backwards counts as due, so writes never stall.
            due = last is None or not 0 <= now - last < self.interval
            # Reaching the total is written at once, once: a wrong total must not write every step.
            finished = last_total is not None and steps >= last_total and not self._finished
            if finished:
                self._finished = True
            if not (due or finished):
                return False
            self._last_attempt = now  # a failed or slow write counts for the rate limit too
            self._handed = True
            if self._writing:
                return True
            self._writing = True
        try:
            threading.Thread(target=self._writer, name="pysched-progress", daemon=True).start()
        except RuntimeError:  # no thread to be had (at interpreter exit, or none left): write here
            self._writer()
        return True

    def _writer(self) -> None:
        """Write the newest step while writes are handed over (one more may come during one)."""
        while True:
            with self._lock:
                if not self._handed:
                    self._writing = False
                    self._idle.notify_all()
                    return
                self._handed = False
            self._write()

    def _warn_once(self, kind: str, message: str) -> None:
        """One line per kind of bad call: a loop of them must not flood the training log."""
        if kind not in self._warned:
            self._warned.add(kind)
            logger.warning("pysched_progress: %s", message)

    def _warn_failure(self, now: float, value: str, err: Exception) -> None:
        """One line, no traceback; after the first, one every WARN_EVERY_S with the count."""
        self._failures += 1
        if self._last_warning is not None and 0 <= now - self._last_warning < WARN_EVERY_S:
            return
        assert self.pod is not None
        more = f" ({self._failures - 1} more failed since the last warning)" if self._failures > 1 else ""
        reason = " ".join(str(err).split())[:300] or type(err).__name__
        logger.warning("pysched_progress: could not write %s=%s on pod %s/%s: %s%s",
                       PROGRESS, value, self.pod.namespace, self.pod.name, reason, more)  # fmt: skip
        self._last_warning, self._failures = now, 0

    def flush(self) -> bool:
        """Write the newest step now if it is not written yet, after any write under way. True
        when it is written."""
        if self.pod is None:
            return False
        return self._write(stamp=True)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until no write is under way or handed over; False when `timeout` (s) passed first."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._writing, timeout)

    def _write(self, stamp: bool = False) -> bool:
        """Write the newest step unless it is written; `stamp`: the attempt counts for the rate
        limit (a handed-over write was counted when handed)."""
        with self._io:
            with self._lock:
                pending = self._pending
                if pending is None:
                    return self._written is not None
                value = format_progress(*pending)
                if value == self._written:
                    self._pending = None
                    return True
                if stamp:
                    self._last_attempt = self._clock()
                if self._transport is None:
                    self._transport = ApiTransport()
                transport = self._transport
            assert self.pod is not None
            try:
                transport.patch_annotations(self.pod, {PROGRESS: value})
            except Exception as err:
                # Training must go on: the next due report (or flush) retries with the newest step.
                with self._lock:
                    self._warn_failure(self._clock(), value, err)
                return False
            with self._lock:
                self._written = value
                if self._pending == pending:  # no newer step came meanwhile
                    self._pending = None
            return True


_REPORTERS: weakref.WeakSet[Reporter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for reporter in list(_REPORTERS):
        reporter._fresh_locks()


if hasattr(os, "register_at_fork"):  # POSIX: a DataLoader worker or any fork may report too
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
        "pysched_progress.lightning_callback() needs PyTorch Lightning: neither lightning.pytorch nor "
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


MAX_STEPS = 10**16 - 1  # 16 digits: what the progress admission policy admits


def _count(value: object) -> int | str:
    """A step count from user code (int-like: numpy / 0-d tensor integers too; not a bool; 0 to
    MAX_STEPS), or what is wrong with it: non-integer, negative or too large. Read once a step."""
    if isinstance(value, bool):
        return "non-integer"
    try:
        count = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return "non-integer"
    return "negative" if count < 0 else "too large" if count > MAX_STEPS else count


def granted_cpus(root: Path = CGROUP_ROOT, env: Mapping[str, str] | None = None) -> float:
    """CPUs to size thread pools by: the container's CPU quota (cgroup v2 `cpu.max`, else v1 CFS
    quota / period under `root`), which follows an in-place resize of the CPU limit; without a
    quota, its CPU request read back from cgroup v2 `cpu.weight` (also rewritten on an in-place
    resize; see `_cgroup_request` for the two ways runtimes write it); else the CPUs this process
    may run on (its affinity mask, i.e. the cpuset; `os.cpu_count()` where there is none)."""
    quota = _cgroup_quota(root)
    if quota is not None:
        return quota
    request = _cgroup_request(root, os.environ if env is None else env)
    if request is not None:
        return request
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


# The kubelet asks for cpu.shares = request in millicores * 1024 / 1000 (at least 2); the OCI
# runtime turns shares into cgroup v2's cpu.weight, one of two ways.
MIN_SHARES, MAX_SHARES = 2, 262144


def _linear_weight(shares: int) -> int:
    """runc before 1.3.2, crun before 1.23: 1 CPU is weight 39."""
    return 1 + (shares - 2) * 9999 // 262142


def _quadratic_weight(shares: int) -> int:
    """runc 1.3.2 and later, crun 1.23 and later: 1 CPU is weight 100, the cgroup default."""
    if shares <= MIN_SHARES:
        return 1
    if shares >= MAX_SHARES:
        return 10000
    level = math.log2(shares)
    return math.ceil(10 ** ((level * level + 125 * level) / 612 - 7 / 34))


WEIGHT_FORMULAS: dict[str, Callable[[int], int]] = {"linear": _linear_weight, "quadratic": _quadratic_weight}
CPU_REQUEST_ENV = "PYSCHED_CPU_REQUEST"  # the container's request in millicores, from the downward API
_known_formula: list[str] = []  # the runtime's, once the request at start has told it


def _shares(millicores: int) -> int:
    return max(MIN_SHARES, millicores * 1024 // 1000)


def _cgroup_request(root: Path, env: Mapping[str, str]) -> float | None:
    """The CPU request behind a cgroup v2 `cpu.weight`. Which formula wrote it (`WEIGHT_FORMULAS`)
    is told once by the request the container started with, when it is given (`PYSCHED_CPU_REQUEST`:
    a downward API `resourceFieldRef` to `requests.cpu` with divisor `1m`, fixed at start while
    the weight follows resizes); else the formula whose reading is the rounder request wins (a user
    writes 2 or 1.5, not 4.43), the quadratic one on a tie. Weight 1 is no request (BestEffort)."""
    text = _read(root / "cpu.weight")
    try:
        weight = int(text or "")
    except ValueError:
        return None
    if not 1 < weight <= 10000:
        return None
    if not _known_formula:
        started = _millicores(env.get(CPU_REQUEST_ENV))
        if started is not None:
            matching = [name for name, formula in WEIGHT_FORMULAS.items() if formula(_shares(started)) == weight]
            if len(matching) == 1:
                _known_formula.append(matching[0])
    names = _known_formula[:1] or ["quadratic", "linear"]
    readings = [r for r in (_request_of(weight, WEIGHT_FORMULAS[name]) for name in names) if r is not None]
    if not readings:
        return None
    millicores, _ = max(readings, key=lambda r: r[1])  # the first (quadratic) on a tie
    return millicores / 1000


def _millicores(text: str | None) -> int | None:
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 9:
        return None
    return int(text)


def _request_of(weight: int, formula: Callable[[int], int]) -> tuple[int, int] | None:
    """The roundest request in millicores that `formula` turns into `weight`, and its unit (every
    request of a small range writes one weight: the one a user wrote is the roundest of them, 8
    CPUs and not the 7.99 the range also holds); None when no request writes it."""
    low, high = MIN_SHARES, MAX_SHARES
    while low < high:  # the fewest shares whose weight reaches `weight` (the formulas only grow)
        middle = (low + high) // 2
        if formula(middle) < weight:
            low = middle + 1
        else:
            high = middle
    first = low
    low, high = first, MAX_SHARES
    while low < high:  # the most shares still writing `weight`
        middle = (low + high + 1) // 2
        if formula(middle) > weight:
            high = middle - 1
        else:
            low = middle
    if formula(first) != weight:
        return None
    smallest, largest = -(-first * 1000 // 1024), ((low + 1) * 1000 - 1) // 1024
    for unit in (1000, 500, 250, 100, 50, 10, 1):
        rounded = -(-smallest // unit) * unit
        if rounded <= largest:
            return rounded, unit
    return None
