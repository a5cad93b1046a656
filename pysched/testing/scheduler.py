"""`pysched run` as a child process of a test control plane, observed through its endpoints: plain
HTTP on loopback for the tests' polling, and the secure port (HTTPS, delegated auth) beside it."""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pysched.api.jobs import JOB_LABEL, MIN_MEMBERS
from pysched.api.resources import pod_requests
from pysched.testing.controlplane import (
    ADDRESS_IN_USE,
    LocalControlPlane,
    ManagedProcess,
    NodeSpec,
    create_fake_nodes,
    free_ports,
    log_tail,
)
from pysched.testing.helpers import make_pod
from pysched.testing.kube import KubeAPI

TEST_LABEL = "pysched.io/test"


def pod_for(name: str, scheduler: str, namespace: str, cpu: str, memory: str = "64Mi") -> dict[str, Any]:
    pod = make_pod(name, cpu=cpu, memory=memory, cpu_limit=None, memory_limit=None, scheduler=scheduler)
    pod["spec"]["nodeSelector"] = {TEST_LABEL: namespace}
    return pod


def gang_member(name: str, scheduler: str, namespace: str, job: str, minimum: int, cpu: str = "1") -> dict[str, Any]:
    """A `pod_for` pod in the gang `job` (`pysched.io/job`) that binds only with `minimum` members."""
    pod = pod_for(name, scheduler, namespace, cpu)
    pod["metadata"].setdefault("labels", {})[JOB_LABEL] = job
    pod["metadata"].setdefault("annotations", {})[MIN_MEMBERS] = str(minimum)
    return pod


@contextlib.contextmanager
def namespace_nodes(
    kube: KubeAPI, namespace: str, count: int, *, cpu: str = "8", memory: str = "32Gi", gpu: str | None = None
) -> Iterator[list[str]]:
    """Fake nodes labelled for `namespace` (the pods of `pod_for` select them), deleted afterwards:
    on the shared control plane each test schedules onto its own nodes only."""
    spec = NodeSpec(cpu=cpu, memory=memory, gpu=gpu, labels={TEST_LABEL: namespace})
    names = create_fake_nodes(kube, count, spec, prefix=f"{namespace}-n")
    try:
        yield names
    finally:
        for name in names:
            kube.delete(f"/api/v1/nodes/{name}")


def create_pods(kube: KubeAPI, namespace: str, pods: list[dict[str, Any]]) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda p: kube.create_pod(namespace, p), pods))


def list_pods(kube: KubeAPI, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.get(f"/api/v1/namespaces/{namespace}/pods").get("items", [])
    return items


def events(kube: KubeAPI, namespace: str, reason: str) -> list[dict[str, Any]]:
    items = kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events").get("items", [])
    return [e for e in items if e.get("reason") == reason]


def overcommitted(kube: KubeAPI, pods: list[dict[str, Any]]) -> list[str]:
    """Nodes whose bound pods request more than the node's allocatable, described."""
    problems: list[str] = []
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node:
            for name, value in pod_requests(pod).items():
                used.setdefault(node, {}).setdefault(name, 0)
                used[node][name] += value
            used[node]["pods"] = used[node].get("pods", 0) + 1
    for node, requests in used.items():
        allocatable = pod_requests({"spec": {"containers": [{"resources": {"requests": _alloc(kube, node)}}]}})
        for name, value in requests.items():
            if value > allocatable.get(name, 0):
                problems.append(f"{node} overcommitted on {name}: {value} > {allocatable.get(name, 0)}")
    return problems


def _alloc(kube: KubeAPI, node: str) -> dict[str, str]:
    found: dict[str, str] = kube.get(f"/api/v1/nodes/{node}")["status"]["allocatable"]
    return found


def builtin_profile(name: str, scheduler_name: str) -> dict[str, Any]:
    """A built-in profile's plugins (`pysched/plugins/builtin.yaml`) under another schedulerName."""
    from pysched.plugins import builtin

    raw = yaml.safe_load((Path(builtin.__file__).parent / "builtin.yaml").read_text())
    (profile,) = [p for p in raw["profiles"] if p["schedulerName"] == name]
    profile["schedulerName"] = scheduler_name
    found: dict[str, Any] = profile
    return found


def write_profile(path: Path, scheduler_name: str, builtin: str = "default") -> Path:
    """A built-in profile (`default`: kube-scheduler's default plugin set) under `scheduler_name`."""
    path.write_text(yaml.safe_dump({"profiles": [builtin_profile(builtin, scheduler_name)]}))
    return path


def pysched_profile(path: Path, name: str, **autoscale: float) -> Path:
    """The built-in `pysched` profile under `name`, reconciling every second (or with the
    Autoscale args given, for jobs on a fast emulator)."""
    profile = builtin_profile("pysched", name)
    for entry in profile["pluginConfig"]:
        if entry["name"] == "Autoscale":
            entry["args"] = {**entry["args"], "intervalSeconds": 1, "priorStepSeconds": 0.2, **autoscale}
    path.write_text(yaml.safe_dump({"profiles": [profile]}))
    return path


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text to {"name{labels}": value} (labels as printed)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


@dataclass
class SchedulerProcess:
    process: ManagedProcess
    port: int  # plain HTTP (--insecure-bind-address)
    plane: LocalControlPlane
    secure_port: int = 0  # HTTPS (--secure-port), with its self-signed certificate

    def _forget(self) -> None:
        """Gone on purpose: the plane's health check must not report it as crashed."""
        if self.process in self.plane.processes:
            self.plane.processes.remove(self.process)

    def get(self, path: str) -> tuple[int, str]:
        return _get(urllib.request.Request(f"http://127.0.0.1:{self.port}{path}"))

    def get_secure(self, path: str, token: str | None = None) -> tuple[int, str]:
        """GET over HTTPS on the secure port, with `Authorization: Bearer token` when given. The
        certificate is the process's self-signed one, so it is not verified."""
        request = urllib.request.Request(f"https://127.0.0.1:{self.secure_port}{path}")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        unverified = ssl.create_default_context()
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE
        return _get(request, unverified)

    def ready(self) -> bool:
        return self.get("/readyz")[0] == 200

    def metrics(self) -> dict[str, float]:
        status, text = self.get("/metrics")
        return parse_metrics(text) if status == 200 else {}

    def metric(self, name: str) -> float:
        return self.metrics().get(name, 0.0)

    def binds(self) -> float:
        """Bind calls this process made, whatever their result."""
        return sum(v for k, v in self.metrics().items() if k.startswith("pysched_bind_calls_total"))

    def is_leader(self) -> bool:
        return any(v == 1.0 for k, v in self.metrics().items() if k.startswith("leader_election_master_status{"))

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.process.alive():
                raise RuntimeError(f"pysched exited; log:\n{log_tail(self.process.log_path, 40)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"pysched not ready after {timeout}s; log:\n{log_tail(self.process.log_path, 40)}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no clean-up at all, as when a node dies."""
        if self.process.alive():
            os.kill(self.process.pid, signal.SIGKILL)
            if self.process.popen is not None:
                self.process.popen.wait(10)
        self._forget()

    def stop(self) -> int | None:
        self.process.stop(timeout=15)
        self._forget()
        return self.process.popen.returncode if self.process.popen is not None else None

    def log(self, lines: int = 40) -> str:
        return log_tail(self.process.log_path, lines)


def _get(request: urllib.request.Request, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError as err:
        return 0, str(err)


PORT_ATTEMPTS = 3  # starts of `pysched run` whose port another process took first


def start_scheduler(
    plane: LocalControlPlane,
    name: str,
    *,
    config: Path | None = None,
    kubeconfig: Path | None = None,
    leader_elect: bool = False,
    lease_namespace: str = "default",
    lease_name: str = "pysched",
    args: Sequence[str] = (),
    wait: bool = True,
) -> SchedulerProcess:
    """Start `pysched run` on ``plane``. With ``wait``, return once it is ready: a port another
    process took between the pick and the bind is picked again (up to ``PORT_ATTEMPTS`` times), and
    a process that never becomes ready is stopped and forgotten before the error is raised, so the
    plane's health check does not fail every later test with it."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        port, secure_port = free_ports(2)
        argv = [
            sys.executable,
            "-m",
            "pysched.cmd.run",
            f"--kubeconfig={kubeconfig or plane.kubeconfig_path}",
            f"--insecure-bind-address=127.0.0.1:{port}",
            "--bind-address=127.0.0.1",
            f"--secure-port={secure_port}",
            "--log-format=json",
            f"--identity={name}",
        ]
        if config is not None:
            argv.append(f"--config={config}")
        if leader_elect:
            argv += ["--leader-elect", f"--lease-namespace={lease_namespace}", f"--lease-name={lease_name}"]
        else:
            argv.append("--no-leader-elect")
        argv += list(args)
        log_start = _size(plane.workdir / f"{name}.log")
        proc = SchedulerProcess(plane.spawn(name, argv, env=dict(os.environ)), port, plane, secure_port)
        if not wait:
            return proc
        try:
            proc.wait_ready()
            return proc
        except RuntimeError:
            proc.stop()
            if attempt < PORT_ATTEMPTS and ADDRESS_IN_USE in _read_from(proc.process.log_path, log_start):
                continue
            raise
        except BaseException:
            proc.stop()
            raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    """What a process appended to its log after ``offset``: the log of an earlier attempt stays."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""
