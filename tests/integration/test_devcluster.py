"""``pysched dev-cluster up|down`` as a user runs it: separate processes, real binaries."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pysched.testing import KubeAPI, KubeAPIError, wait_for
from pysched.testing.controlplane import pid_alive
from pysched.testing.heartbeat import lease_path
from pysched.testing.helpers import make_pod
from pysched.testing.jobset import JOBSET_API, JOBSET_BIN_ENV, JOBSET_BINARY, first_job_depends_on

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def dev_cluster(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), full_env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "pysched.cmd.devcluster", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        stdin=subprocess.DEVNULL,
    )


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line mentions ``text`` (a dev-cluster dir), ignoring zombies."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmdline and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "dev"
    yield d
    if (d / "pids.json").exists():  # a failed test must not leave a cluster behind
        dev_cluster("down", "--dir", str(d))


def test_up_scheduler_emulator_down(cluster_dir: Path, control_plane_bin_dir: str) -> None:
    up = dev_cluster(
        "up",
        "--dir",
        str(cluster_dir),
        "--nodes",
        "5",
        "--node-cpu",
        "4",
        "--node-memory",
        "16Gi",
        "--node-gpu",
        "2",
        "--kube-scheduler",
        "--emulate",
        "--emulate-time-scale",
        "100",
    )
    assert up.returncode == 0, up.stderr
    state = json.loads((cluster_dir / "pids.json").read_text())
    pids = [int(p["pid"]) for p in state["processes"]]
    names = {p["name"] for p in state["processes"]}
    plane = {"etcd", "kube-apiserver", "kube-controller-manager", "node-heartbeat", JOBSET_BINARY}
    assert names == plane | {"kube-scheduler", "emulator"}
    assert all(pid_alive(pid) for pid in pids)

    with KubeAPI.from_kubeconfig(cluster_dir / "kubeconfig") as api:
        assert api.get("/version")["gitVersion"] == "v1.36.3"
        # The JobSet controller's validating webhook is called (by URL) on the dev cluster too.
        with pytest.raises(KubeAPIError, match=r"vjobset\.kb\.io"):
            api.post(f"/apis/{JOBSET_API}/namespaces/default/jobsets", first_job_depends_on("bad"))
        nodes = api.get("/api/v1/nodes")["items"]
        assert len(nodes) == 5
        for node in nodes:
            assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
            assert node["status"]["allocatable"]["cpu"] == "4"
            ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
            assert ready["status"] == "True"
        # The heartbeat outlives `up` as a process of its own: the Leases are renewed (every 10 s).
        lease = lease_path(nodes[0]["metadata"]["name"])
        created = api.get(lease)["spec"]["renewTime"]
        wait_for(lambda: api.get(lease)["spec"]["renewTime"], lambda t: t != created, timeout=30, what="Lease renewed")

        api.create_pod("default", make_pod("hello", scheduler="default-scheduler"))
        pod = wait_for(
            lambda: api.get_pod("default", "hello"),
            lambda p: p.get("status", {}).get("phase") == "Running",
            timeout=60,
            what="pod bound by kube-scheduler and run by the emulator",
        )
        assert pod["spec"]["nodeName"].startswith("fake-node-")

        # A training job on the workload model: 100 steps of 0.6 s = 60 emulated s, 0.6 s at 100x.
        job = {
            "pysched.io/emulate-model": "lstm",
            "pysched.io/total-steps": "100",
            "pysched.io/emulate-truth": "t1=0.6,f=0.02,p_max=16",
        }
        api.create_pod(
            "default", make_pod("train", cpu="1", cpu_limit=None, scheduler="default-scheduler", annotations=job)
        )
        wait_for(
            lambda: api.get_pod("default", "train"),
            lambda p: p.get("status", {}).get("phase") == "Succeeded",
            timeout=60,
            what="training job run to completion by the emulator",
        )

    if (kubectl := Path(control_plane_bin_dir) / "kubectl").exists():
        out = subprocess.run(
            [
                str(kubectl),
                "--kubeconfig",
                str(cluster_dir / "kubeconfig"),
                "get",
                "nodes",
                "-o",
                "name",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.split()
        assert len(out) == 5

    busy = dev_cluster("up", "--dir", str(cluster_dir), "--nodes", "1")
    assert busy.returncode == 2
    assert len(busy.stderr.strip().splitlines()) == 1
    assert "busy" in busy.stderr

    down = dev_cluster("down", "--dir", str(cluster_dir))
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(pid) for pid in pids)
    assert processes_mentioning(str(cluster_dir)) == []
    assert not (cluster_dir / "pids.json").exists()


def test_missing_binaries(cluster_dir: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYSCHED_CONTROL_PLANE_BIN"] = str(tmp_path / "nowhere")
    res = dev_cluster("up", "--dir", str(cluster_dir), env=env)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing" in lines[0]
    assert processes_mentioning(str(cluster_dir)) == []


def test_missing_jobset_binary(cluster_dir: Path, tmp_path: Path, control_plane_bin_dir: str) -> None:
    env = dict(os.environ)
    env[JOBSET_BIN_ENV] = str(tmp_path / "nowhere")
    res = dev_cluster("up", "--dir", str(cluster_dir), env=env)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and JOBSET_BINARY in lines[0] and "hack/build-jobset.sh" in lines[0]
    assert processes_mentioning(str(cluster_dir)) == []
    assert not (cluster_dir / "pids.json").exists()


def test_port_clash(cluster_dir: Path, control_plane_bin_dir: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        res = dev_cluster("up", "--dir", str(cluster_dir), "--apiserver-port", str(port))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(port) in lines[0]
    assert processes_mentioning(str(cluster_dir)) == []
    assert not (cluster_dir / "pids.json").exists()
