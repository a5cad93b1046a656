"""A real etcd + kube-apiserver + kube-controller-manager on loopback, for tests, perf runs and
``dev-cluster``.

The binaries are built from Go modules by ``hack/build-control-plane.sh`` into
``${PYSCHED_CACHE_DIR:-~/.cache/pysched}/control-plane/k8s-V_etcd-V_goV/bin``;
``PYSCHED_CONTROL_PLANE_BIN`` points somewhere else. Every process is started
in its own session, logs to a file in the work dir and is stopped by pid.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pysched import cache_dir
from pysched.api.inputs import load_yaml
from pysched.api.times import format_rfc3339
from pysched.backend.live.kubeclient import MERGE_PATCH
from pysched.testing.heartbeat import (
    HEARTBEAT_INTERVAL_S,
    NodeHeartbeat,
    create_node_lease,
)

K8S_VERSION = "v1.36.3"
BIN_ENV = "PYSCHED_CONTROL_PLANE_BIN"
# What a default plane starts; without its controller manager, etcd and kube-apiserver alone.
REQUIRED_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
# What hack/build-control-plane.sh builds, and lists on the `binaries=` line of its `.complete` marker.
ALL_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
FAKE_NODE_LABEL = "pysched.io/fake-node"
FAKE_NODE_SELECTOR = f"{FAKE_NODE_LABEL}=true"  # the nodes the heartbeat keeps Ready
# kube-controller-manager's --node-monitor-grace-period: how long a node may go without a renewed
# Lease before it is marked Unknown and tainted unreachable. Kubernetes' default is 50 s; 10 minutes
# lets the heartbeat renew big sets slowly (2,000 fake nodes at 10 a second, 5,000 at 25, each
# within a third of the grace period) and survive a starved test box or a fault test's API outage.
NODE_MONITOR_GRACE_S = 600.0
MAX_PID = 4_194_304  # Linux's largest pid_max (PID_MAX_LIMIT on 64-bit)
# The alpha workload API the gang-scheduling tests need: Workload and PodGroup objects
# (scheduling.k8s.io/v1alpha2), pod.spec.schedulingGroup, kube-scheduler's gang plugin and the Job
# controller making a Workload and PodGroup for each gang-shaped Indexed Job.
FEATURE_GATES = "GenericWorkload=true,GangScheduling=true,WorkloadWithJob=true"
SCHEDULING_API = "scheduling.k8s.io/v1alpha2"
# CRDs every plane serves (the scheduler-plugins PodGroup): the repository's own copies.
REPO_CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
BUILD_HINT = "build them with `bash hack/build-control-plane.sh` (or `make control-plane`)"


class ControlPlaneError(RuntimeError):
    """Starting or talking to the local control plane failed."""


class BinariesNotFound(ControlPlaneError):
    pass


class PortInUse(ControlPlaneError):
    pass


class ProcessCrashed(ControlPlaneError):
    pass


# -- binaries -------------------------------------------------------------------------------


def find_bin_dir(bin_dir: Path | str | None = None, *, need: Iterable[str] = REQUIRED_BINARIES) -> Path:
    """Return a folder holding the control-plane binaries, or raise :class:`BinariesNotFound`.

    Order: the argument, ``$PYSCHED_CONTROL_PLANE_BIN``, then the newest complete
    build for Kubernetes ``K8S_VERSION`` in the cache folder. A build holds a binary when it is
    executable there and, if its ``.complete`` marker lists what was built (``binaries=...``),
    listed: the build script rebuilds a folder whose marker lacks one.
    """
    return find_build(
        bin_dir,
        need=need,
        env=BIN_ENV,
        folder="control-plane",
        prefix=f"k8s-{K8S_VERSION}_",
        what=f"control-plane build for Kubernetes {K8S_VERSION}",
        hint=BUILD_HINT,
    )


def find_build(
    bin_dir: Path | str | None,
    *,
    need: Iterable[str],
    env: str,
    folder: str,
    prefix: str,
    what: str,
    hint: str,
) -> Path:
    """The bin dir of a build script's output (see :func:`find_bin_dir`): ``bin_dir``, else
    ``$env``, else the newest complete ``cache_dir()/folder/prefix*`` build holding ``need``."""
    need = tuple(need)
    candidates: list[Path] = []
    if bin_dir is not None:
        candidates = [Path(bin_dir)]
    elif os.environ.get(env):
        candidates = [Path(os.environ[env])]
    else:
        base = cache_dir() / folder
        builds = [d for d in base.glob(f"{prefix}*") if d.is_dir() and (d / ".complete").is_file()]
        builds.sort(key=lambda d: (d / ".complete").stat().st_mtime, reverse=True)
        candidates = [d / "bin" for d in builds]
        if not candidates:
            raise BinariesNotFound(f"no complete {what} under {base}; {hint}, or set {env}")
    for cand in candidates:
        if not _missing(cand, need):
            return cand
    where = candidates[0]
    raise BinariesNotFound(f"binaries missing in {where}: {', '.join(_missing(where, need))}; {hint}")


def _missing(bin_dir: Path, need: Sequence[str]) -> list[str]:
    """The binaries of ``need`` that ``bin_dir`` lacks (see :func:`find_bin_dir`)."""
    listed: set[str] | None = None
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in (bin_dir.parent / ".complete").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "binaries":
                listed = set(value.split())
    return [b for b in need if not os.access(bin_dir / b, os.X_OK) or (listed is not None and b not in listed)]


# -- ports and processes --------------------------------------------------------------------


ADDRESS_IN_USE = "address already in use"  # how a process that could not bind says so in its log


# Ports are picked below the kernel's ephemeral range, where no outgoing connection takes one
# between its pick and the bind of the process it is for, and each pytest-xdist worker walks its
# own slice, so two workers never pick the same port.
PICK_LOW = 10_000
PICK_SLICE = 1_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_picked = itertools.count()


def _pick_slice() -> range:
    """This process's ports to pick from; empty when the ephemeral range leaves no room below it."""
    low = 32_768  # Linux's default when the range cannot be read
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    slices = (low - PICK_LOW) // PICK_SLICE
    if slices < 1:
        return range(0)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else os.getpid()
    start = PICK_LOW + (index % slices) * PICK_SLICE
    return range(start, start + PICK_SLICE)


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports on 127.0.0.1, held open together while picked. Each pick
    moves on through this worker's slice, so a port just picked is not picked again at once."""
    ports = _pick_slice()
    picked: list[int] = []
    with contextlib.ExitStack() as stack:
        for _ in ports:
            if len(picked) == count:
                break
            port = ports[next(_picked) % len(ports)]
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            with contextlib.suppress(OSError):
                s.bind(("127.0.0.1", port))
                picked.append(port)
        while len(picked) < count:  # no slice, or all of it taken: the kernel picks
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            picked.append(int(s.getsockname()[1]))
    return picked


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16384))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return "\n".join(data.splitlines()[-lines:])


def _one_process(pid: int) -> bool:
    """A pid naming one process other than init: ``kill`` reads 0 as this process group and
    -1 as every process it may signal, and a negative pid as a whole group."""
    return isinstance(pid, int) and not isinstance(pid, bool) and 1 < pid <= MAX_PID


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    if not _one_process(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def pid_matches(pid: int, exe: str) -> bool:
    """True if ``pid`` is alive and runs ``exe`` (guards against pid reuse); never for a pid
    that names no single process."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return True  # no /proc: trust the pid
    return any(a.decode("utf-8", "replace") == exe for a in argv[:3])


def stop_pid(pid: int, exe: str | None = None, *, timeout: float = 10.0) -> None:
    """SIGTERM then, after ``timeout``, SIGKILL one process; return once it is gone. A pid that
    names no single process (0, negative, init) is never signalled."""
    if not _one_process(pid) or (exe is not None and not pid_matches(pid, exe)):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5.0
        time.sleep(0.05)


def _pdeathsig_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` setting PR_SET_PDEATHSIG=SIGKILL, or None where unsupported.

    The signal fires when the *thread* that forked exits, so it is only used when
    starting from the main thread.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)

    return preexec


@dataclass
class ManagedProcess:
    """One background process: its name, argv, pid and log file."""

    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    pid: int = 0

    @classmethod
    def spawn(
        cls,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        *,
        die_with_parent: bool = False,
    ) -> ManagedProcess:
        """Start ``argv`` in its own session, output appended to ``log_path``.

        ``die_with_parent`` (Linux, main thread only) has the kernel SIGKILL the
        child if this process dies without stopping it (a killed test run).
        """
        log_path.parent.mkdir(parents=True, exist_ok=True)
        preexec = _pdeathsig_preexec() if die_with_parent else None
        with log_path.open("ab") as log:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=dict(env) if env is not None else None,
                preexec_fn=preexec,
            )
        return cls(name=name, argv=list(argv), log_path=log_path, popen=popen, pid=popen.pid)

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_matches(self.pid, self.argv[0])

    def check(self) -> None:
        if not self.alive():
            code = self.popen.returncode if self.popen is not None else None
            raise ProcessCrashed(
                f"{self.name} (pid {self.pid}) exited with code {code}; "
                f"last lines of {self.log_path}:\n{log_tail(self.log_path)}"
            )

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen is not None:
            if self.popen.poll() is None:
                self.popen.terminate()
                try:
                    self.popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.popen.kill()
                    self.popen.wait(10)
            return
        stop_pid(self.pid, self.argv[0], timeout=timeout)

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "exe": self.argv[0], "log": str(self.log_path)}


# -- keys, kubeconfig -------------------------------------------------------------------------


def write_rsa_key(path: Path) -> None:
    """Write an RSA private key in PEM (service-account signing key)."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError:  # pragma: no cover - fallback when cryptography is absent
        if shutil.which("openssl") is None:
            raise ControlPlaneError(
                "need the `cryptography` package or `openssl` to make the service-account key"
            ) from None
        subprocess.run(["openssl", "genrsa", "-out", str(path), "2048"], check=True, capture_output=True)
        return
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    path.chmod(0o600)


def kubeconfig_dict(server: str, token: str, ca_file: Path | None, name: str = "pysched") -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority"] = str(ca_file)
    else:
        cluster["insecure-skip-tls-verify"] = True
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        "current-context": name,
        "preferences": {},
    }


# -- custom resources ------------------------------------------------------------------------


def install_crds(api: Any, paths: Iterable[Path], *, timeout: float = 60.0) -> list[str]:
    """Create the CustomResourceDefinitions in ``paths`` (one YAML document each; one already there
    is kept) and wait until each is Established, so its resources can be created at once."""
    from pysched.testing.kube import KubeAPIError  # as api(): the kubernetes client only when used

    names: list[str] = []
    for path in paths:
        crd = load_yaml(path)
        try:
            api.post(CRD_API, crd)
        except KubeAPIError as err:
            if err.status != 409:  # 409: installed earlier on this plane
                raise
        names.append(crd["metadata"]["name"])
    deadline = time.monotonic() + timeout
    for name in names:
        while not any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (api.get(f"{CRD_API}/{name}").get("status") or {}).get("conditions") or []
        ):
            if time.monotonic() >= deadline:
                raise ControlPlaneError(f"CRD {name} not Established after {timeout:.0f}s")
            time.sleep(0.1)
    return names


# -- fake nodes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSpec:
    """Allocatable of one fake node (Kubernetes quantities as strings)."""

    cpu: str = "8"
    memory: str = "32Gi"
    pods: str = "110"
    gpu: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def resources(self) -> dict[str, str]:
        res = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        if self.gpu is not None and self.gpu not in ("", "0"):
            res["nvidia.com/gpu"] = self.gpu
        return res


def create_fake_node(api: Any, name: str, spec: NodeSpec) -> dict[str, Any]:
    """Create one Ready fake node: the Node, its taints cleared, ``nodes/status``, then its Lease.

    The ``TaintNodesByCondition`` admission plugin adds ``node.kubernetes.io/not-ready``
    on create; without a node-lifecycle controller nothing removes it, so we do (with one, it
    would once it read the Ready condition). The Lease in ``kube-node-lease`` is what a kubelet
    creates and renews; :class:`~pysched.testing.heartbeat.NodeHeartbeat` renews it for every node
    labelled ``FAKE_NODE_LABEL=true`` (a ``spec.labels`` value other than ``true`` opts out).
    """
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        # As a kubelet does: else the node lifecycle controller adds them, one more node update.
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "type": "fake",
        FAKE_NODE_LABEL: "true",
        **dict(spec.labels),
    }
    node = api.post(
        "/api/v1/nodes",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}},
    )
    api.patch(
        f"/api/v1/nodes/{name}",
        {"spec": {"taints": None}},
        content_type=MERGE_PATCH,
    )
    now = format_rfc3339(time.time())
    res = spec.resources()
    status = {
        "status": {
            "capacity": res,
            "allocatable": res,
            "phase": "Running",
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "pysched fake node",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                },
                *(
                    {
                        "type": t,
                        "status": "False",
                        "reason": f"KubeletHas{r}",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                    for t, r in (
                        ("MemoryPressure", "SufficientMemory"),
                        ("DiskPressure", "NoDiskPressure"),
                        ("PIDPressure", "SufficientPID"),
                    )
                ),
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": K8S_VERSION,
                "kubeProxyVersion": "",
                "containerRuntimeVersion": "pysched-emulator://0",
                "kernelVersion": "",
                "osImage": "pysched fake node",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        }
    }
    result: dict[str, Any] = api.patch(f"/api/v1/nodes/{name}/status", status, content_type=MERGE_PATCH)
    create_node_lease(api, name, node["metadata"]["uid"])
    return result


def create_fake_nodes(
    api: Any,
    count: int,
    spec: NodeSpec | None = None,
    *,
    prefix: str = "fake-node-",
    workers: int = 8,
) -> list[str]:
    """Create ``count`` Ready fake nodes named ``{prefix}{i}``; return their names."""
    spec = spec or NodeSpec()
    width = max(3, len(str(count - 1)))
    names = [f"{prefix}{i:0{width}d}" for i in range(count)]
    with ThreadPoolExecutor(max_workers=max(1, min(workers, count))) as pool:
        list(pool.map(lambda n: create_fake_node(api, n, spec), names))
    return names


# -- the control plane ----------------------------------------------------------------------


class LocalControlPlane:
    """etcd + kube-apiserver + kube-controller-manager on 127.0.0.1 with free ports and an admin
    kubeconfig.

    The controller manager (``controller_manager=True``, the default) runs every default
    controller (Job, ReplicaSet, Deployment, garbage collector, namespace, PV binder, node
    lifecycle, ...), so a Job makes pods and a PVC binds. Its node lifecycle controller would
    taint fake nodes that no kubelet heartbeats, so the plane then also runs a
    :class:`~pysched.testing.heartbeat.NodeHeartbeat` thread renewing the Lease of every node
    labelled ``FAKE_NODE_LABEL=true``, with a grace period of ``node_monitor_grace_period``
    seconds (:data:`NODE_MONITOR_GRACE_S`).

    Use as a context manager, or call :meth:`start` / :meth:`stop`. Every process
    started is stopped by pid on :meth:`stop` and, as a fallback, at interpreter
    exit. :meth:`detach` hands the processes over (``dev-cluster up``), the heartbeat
    as a process of its own.
    """

    def __init__(
        self,
        workdir: Path | str | None = None,
        *,
        bin_dir: Path | str | None = None,
        etcd_port: int | None = None,
        apiserver_port: int | None = None,
        extra_apiserver_args: Sequence[str] = (),
        controller_manager: bool = True,
        node_monitor_grace_period: float = NODE_MONITOR_GRACE_S,
        extra_controller_manager_args: Sequence[str] = (),
        heartbeat_interval: float = HEARTBEAT_INTERVAL_S,
        perf: bool = False,
        start_timeout: float = 120.0,
        die_with_parent: bool = True,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="pysched-cp-"))
        self._bin_dir_arg = bin_dir
        self.bin_dir: Path | None = None
        self.etcd_port = etcd_port
        self.apiserver_port = apiserver_port
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.controller_manager = controller_manager
        self.node_monitor_grace_period = node_monitor_grace_period
        self.extra_controller_manager_args = list(extra_controller_manager_args)
        self.heartbeat_interval = heartbeat_interval
        self.controller_manager_port: int | None = None
        self.perf = perf
        self.start_timeout = start_timeout
        self.die_with_parent = die_with_parent
        self.token = secrets.token_hex(16)
        self.controller_manager_token = secrets.token_hex(16)
        self.processes: list[ManagedProcess] = []
        self.heartbeat: NodeHeartbeat | None = None
        self._atexit_registered = False
        self._api: Any = None

    # paths
    @property
    def kubeconfig_path(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def controller_manager_kubeconfig_path(self) -> Path:
        return self.workdir / "kube-controller-manager.kubeconfig"

    @property
    def cert_dir(self) -> Path:
        return self.workdir / "certs"

    @property
    def ca_file(self) -> Path:
        return self.cert_dir / "apiserver.crt"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    @property
    def required_binaries(self) -> tuple[str, ...]:
        return REQUIRED_BINARIES if self.controller_manager else ("etcd", "kube-apiserver")

    def binary(self, name: str) -> Path:
        if self.bin_dir is None:
            self.bin_dir = find_bin_dir(self._bin_dir_arg, need=self.required_binaries)
        path = self.bin_dir / name
        if not os.access(path, os.X_OK):
            raise BinariesNotFound(f"{path} is missing; {BUILD_HINT}")
        return path

    # lifecycle
    def __enter__(self) -> LocalControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalControlPlane:
        self.bin_dir = find_bin_dir(self._bin_dir_arg, need=self.required_binaries)
        self.workdir.mkdir(parents=True, exist_ok=True)
        for port in (self.etcd_port, self.apiserver_port):
            if port is not None and not port_is_free(port):
                raise PortInUse(f"port {port} on 127.0.0.1 is already in use")
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        try:
            self._start_etcd()
            self._start_apiserver()
            self._write_kubeconfig()
            install_crds(self.api(), sorted(REPO_CRDS.glob("*.yaml")))
            if self.controller_manager:
                self._start_controller_manager()
                self.heartbeat = NodeHeartbeat(
                    self.api(),
                    FAKE_NODE_SELECTOR,
                    interval=self.heartbeat_interval,
                    max_period=self.node_monitor_grace_period / 3,  # a renewal may be missed twice
                ).start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_etcd(self) -> None:
        if self.etcd_port is None:
            self.etcd_port = free_port()
        data_dir = self.workdir / "etcd-data"
        url = f"http://127.0.0.1:{self.etcd_port}"
        argv = [
            str(self.binary("etcd")),
            f"--data-dir={data_dir}",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            "--listen-peer-urls=http://127.0.0.1:0",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]
        proc = ManagedProcess.spawn("etcd", argv, self.workdir / "etcd.log", die_with_parent=self.die_with_parent)
        self.processes.append(proc)
        self._wait_http(proc, f"{url}/health", None, lambda body: '"health":"true"' in body)

    def _start_apiserver(self) -> None:
        if self.apiserver_port is None:
            self.apiserver_port = free_port()
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        sa_key = self.workdir / "sa.key"
        if not sa_key.exists():
            write_rsa_key(sa_key)
        token_file = self.workdir / "tokens.csv"
        token_file.write_text(
            f'{self.token},pysched-admin,pysched-admin,"system:masters"\n'
            # the user the built-in RBAC binds to system:kube-controller-manager
            f"{self.controller_manager_token},system:kube-controller-manager,system:kube-controller-manager\n"
        )
        token_file.chmod(0o600)
        argv = [
            str(self.binary("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",
            f"--cert-dir={self.cert_dir}",
            f"--token-auth-file={token_file}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_key}",
            f"--service-account-signing-key-file={sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--disable-admission-plugins=ServiceAccount",
            f"--feature-gates={FEATURE_GATES}",
            f"--runtime-config={SCHEDULING_API}=true",
        ]
        if self.perf:
            argv += [
                "--max-requests-inflight=0",
                "--max-mutating-requests-inflight=0",
                "--enable-priority-and-fairness=false",
            ]
        argv += self.extra_apiserver_args
        proc = ManagedProcess.spawn(
            "kube-apiserver",
            argv,
            self.workdir / "kube-apiserver.log",
            die_with_parent=self.die_with_parent,
        )
        self.processes.append(proc)
        self._wait_http(proc, f"{self.server}/readyz", self.token, lambda body: body.strip() == "ok")

    def _start_controller_manager(self) -> None:
        """kube-controller-manager with every default controller, each on its own service account's
        credentials (as kubeadm runs it), no leader election; wait for its /healthz."""
        self.controller_manager_port = free_port()
        ca = self.ca_file if self.ca_file.exists() else None
        kubeconfig = kubeconfig_dict(self.server, self.controller_manager_token, ca, name="kube-controller-manager")
        self.controller_manager_kubeconfig_path.write_text(json.dumps(kubeconfig, indent=2) + "\n")
        self.controller_manager_kubeconfig_path.chmod(0o600)
        grace = f"{self.node_monitor_grace_period:g}s"
        argv = [
            str(self.binary("kube-controller-manager")),
            f"--kubeconfig={self.controller_manager_kubeconfig_path}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.controller_manager_port}",
            f"--cert-dir={self.workdir / 'kube-controller-manager-certs'}",
            "--leader-elect=false",
            # every default controller but the TTL one: it only tunes kubelets' secret and
            # configmap caches (there are none) and rewrites every node each time the node count
            # crosses 100, 500, 1,000 or 2,000
            "--controllers=*,-ttl-controller",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={self.workdir / 'sa.key'}",
            f"--node-monitor-grace-period={grace}",
            f"--feature-gates={FEATURE_GATES}",
        ]
        if ca is not None:
            argv.append(f"--root-ca-file={ca}")
        argv += self.extra_controller_manager_args
        proc = self.spawn("kube-controller-manager", argv)
        url = f"https://127.0.0.1:{self.controller_manager_port}/healthz"
        self._wait_http(proc, url, None, lambda body: body.strip() == "ok")

    def _wait_http(
        self,
        proc: ManagedProcess,
        url: str,
        token: str | None,
        ok: Any,
    ) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + self.start_timeout
        last = ""
        while True:
            self._check_one(proc)
            req = urllib.request.Request(url)
            if token:
                req.add_header("Authorization", f"Bearer {token}")
            try:
                with urllib.request.urlopen(req, timeout=5, context=ctx) as resp:
                    body = resp.read().decode("utf-8", "replace")
                    if resp.status == 200 and ok(body):
                        return
                    last = f"HTTP {resp.status}: {body[:200]}"
            except urllib.error.HTTPError as err:
                last = f"HTTP {err.code}: {err.read()[:300]!r}"
            except (OSError, ValueError) as err:
                last = str(err)
            if time.monotonic() >= deadline:
                raise ControlPlaneError(
                    f"{proc.name} not ready at {url} after {self.start_timeout:.0f}s ({last}); "
                    f"last lines of {proc.log_path}:\n{log_tail(proc.log_path)}"
                )
            time.sleep(0.2)

    def _check_one(self, proc: ManagedProcess) -> None:
        if proc.alive():
            return
        tail = log_tail(proc.log_path)
        if ADDRESS_IN_USE in tail:
            raise PortInUse(f"{proc.name}: address already in use; last lines of {proc.log_path}:\n{tail}")
        proc.check()

    def stop_apiserver(self) -> None:
        """Kill kube-apiserver alone, etcd keeping the data: an API outage for fault tests that
        starts now (a graceful stop would keep serving open watches for seconds)."""
        proc = next(p for p in self.processes if p.name == "kube-apiserver")
        proc.stop(timeout=0.0)
        self.processes.remove(proc)

    def start_apiserver(self) -> None:
        """Start kube-apiserver again after `stop_apiserver`: same port, certificates, token and data."""
        self._start_apiserver()

    def _write_kubeconfig(self) -> None:
        ca = self.ca_file if self.ca_file.exists() else None
        self.kubeconfig_path.write_text(json.dumps(kubeconfig_dict(self.server, self.token, ca), indent=2) + "\n")
        self.kubeconfig_path.chmod(0o600)

    def check(self) -> None:
        """Raise :class:`ProcessCrashed` (with the log tail) if a process died."""
        for proc in self.processes:
            self._check_one(proc)

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> ManagedProcess:
        """Start another background process (kube-scheduler, emulator) owned by this plane."""
        proc = ManagedProcess.spawn(name, argv, self.workdir / f"{name}.log", env, die_with_parent=self.die_with_parent)
        self.processes.append(proc)
        return proc

    def spawn_python(self, name: str, module: str, args: Sequence[str]) -> ManagedProcess:
        """Start ``python -m module args`` from this interpreter, with this pysched importable."""
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        return self.spawn(name, [sys.executable, "-m", module, *args], env=env)

    def start_kube_scheduler(self, *, wait: float = 60.0, qps: float = 50, burst: int = 100) -> ManagedProcess:
        """Start the stock kube-scheduler with leader election off (client `qps` and `burst`); wait for /healthz."""
        port = free_port()
        config_path = self.workdir / "kube-scheduler-config.yaml"
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig_path), "qps": qps, "burst": burst},
            "leaderElection": {"leaderElect": False},
        }
        config_path.write_text(json.dumps(config, indent=2) + "\n")
        argv = [
            str(self.binary("kube-scheduler")),
            f"--config={config_path}",
            f"--authentication-kubeconfig={self.kubeconfig_path}",
            f"--authorization-kubeconfig={self.kubeconfig_path}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / 'kube-scheduler-certs'}",
            f"--feature-gates={FEATURE_GATES}",
        ]
        proc = self.spawn("kube-scheduler", argv)
        try:
            self.wait_ready(proc, f"https://127.0.0.1:{port}/healthz", token=self.token, timeout=wait)
        except BaseException:  # forgotten, or every later health check would report it
            proc.stop()
            self.processes.remove(proc)
            raise
        return proc

    def wait_ready(self, proc: ManagedProcess, url: str, *, token: str | None = None, timeout: float = 60.0) -> None:
        """Wait until ``url`` (a health endpoint of ``proc``, TLS unverified) answers 200 ``ok``."""
        saved, self.start_timeout = self.start_timeout, timeout
        try:
            self._wait_http(proc, url, token, lambda b: b.strip() == "ok")
        finally:
            self.start_timeout = saved

    def stop(self) -> None:
        """Stop the heartbeat, then every process started, newest first, by pid."""
        errors: list[BaseException] = []
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None
        while self.processes:
            proc = self.processes.pop()
            try:
                proc.stop()
            except BaseException as err:  # keep stopping the others
                errors.append(err)
        if self._api is not None:
            self._api.close()
            self._api = None
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False
        if self._own_workdir and os.environ.get("PYSCHED_KEEP_CONTROL_PLANE_DIR") is None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if errors:
            raise errors[0]

    def detach(self) -> list[dict[str, Any]]:
        """Stop owning the processes (they keep running); return their records. The heartbeat
        thread is handed over as a process (``python -m pysched.testing.heartbeat``) first."""
        if self.heartbeat is not None:
            beat, self.heartbeat = self.heartbeat, None
            beat.stop()
            self.spawn_python(
                "node-heartbeat",
                "pysched.testing.heartbeat",
                [
                    f"--kubeconfig={self.kubeconfig_path}",
                    f"--selector={beat.selector}",
                    f"--interval={beat.interval!r}",
                    f"--max-rate={beat.max_rate!r}",
                    f"--max-period={beat.max_period!r}",
                ],
            )
        records = [p.record() for p in self.processes]
        self.processes = []
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False
        if self._api is not None:
            self._api.close()
            self._api = None
        return records

    # clients
    def api(self) -> Any:
        """A shared :class:`pysched.testing.kube.KubeAPI` for this plane."""
        if self._api is None:
            from pysched.testing.kube import KubeAPI

            self._api = KubeAPI(self.server, self.token, ca_file=self.ca_file if self.ca_file.exists() else None)
        return self._api

    def kubernetes_client(self) -> Any:
        """A typed ``kubernetes.client.ApiClient`` configured from the admin kubeconfig."""
        from kubernetes import config

        k8s_config: Any = config
        return k8s_config.new_client_from_config(config_file=str(self.kubeconfig_path))

    def create_nodes(self, count: int, spec: NodeSpec | None = None, *, prefix: str = "fake-node-") -> list[str]:
        return create_fake_nodes(self.api(), count, spec, prefix=prefix)
