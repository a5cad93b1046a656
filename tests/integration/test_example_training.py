"""The shipped example training job: its Job manifest is what the apiserver accepts and pysched
reads, and its script, run as a local process for a pod of the real apiserver, reports progress
to the end and follows a CPU resize (the kubelet's cgroup rewrite, here in a folder of its own)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from pysched.api.annotations import parse_progress
from pysched.api.objects import pod_from_dict
from pysched.testing import KubeAPI, LocalControlPlane
from pysched.testing.helpers import fake_node

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "manifests" / "examples" / "training"


def _weight(cpus: float) -> str:
    """cgroup v2 cpu.weight as the kubelet writes it for a CPU request."""
    shares = int(cpus * 1024)
    return str(1 + (shares - 2) * 9999 // 262142)


def test_the_example_job_is_valid_and_says_what_pysched_reads(kube: KubeAPI, namespace: str) -> None:
    job = yaml.safe_load((EXAMPLE / "job.yaml").read_text())
    kube.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", job, dryRun="All")  # 201 or an error
    template = job["spec"]["template"]
    pod = pod_from_dict({**template, "metadata": {"name": "p", "namespace": namespace, **template["metadata"]}})
    (container,) = template["spec"]["containers"]
    steps = container["args"][container["args"].index("--steps") + 1]
    assert pod.annotations["pysched.io/total-steps"] == steps
    assert pod.scheduler_name == "pysched" and template["spec"]["serviceAccountName"] == "pysched-training"
    assert "cpu" not in container["resources"]["limits"]  # a request-only resize: cpu.weight follows it
    env = {e["name"]: e["valueFrom"] for e in container["env"]}
    assert env.keys() == {"POD_NAME", "POD_NAMESPACE", "PYSCHED_CPU_REQUEST"}
    # the request at start, which tells the helper which formula the runtime wrote cpu.weight by
    request = {"containerName": container["name"], "resource": "requests.cpu", "divisor": "1m"}
    assert env["PYSCHED_CPU_REQUEST"] == {"resourceFieldRef": request}


def test_the_example_script_reports_progress_and_follows_a_resize(
    control_plane: LocalControlPlane, kube: KubeAPI, namespace: str, tmp_path: Path
) -> None:
    job: dict[str, Any] = yaml.safe_load((EXAMPLE / "job.yaml").read_text())
    template = job["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", **template, "metadata": {"name": "train", **template["metadata"]}}
    pod["spec"].pop("serviceAccountName")  # the test namespace has only the default one
    kube.create_pod(namespace, pod)
    kube.bind_pod(namespace, "train", fake_node(kube, f"{namespace}-n0"))
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "cpu.max").write_text("max 100000\n")  # no CPU limit
    (cgroup / "cpu.weight").write_text(_weight(2) + "\n")

    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env.update(
        KUBECONFIG=str(control_plane.kubeconfig_path),
        POD_NAME="train",
        POD_NAMESPACE=namespace,
        PYTHONPATH=str(ROOT / "progress"),
    )
    command = [sys.executable, str(EXAMPLE / "train.py"), "--steps", "3000", "--check-every", "100"]
    script = subprocess.Popen(
        [*command, "--framework", "numpy", "--cgroup-root", str(cgroup)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert script.stdout is not None
    lines = [script.stdout.readline()]
    assert lines[0] == "training 3000 steps on 2 threads\n", lines
    # The kubelet resizes the request in place: 2 -> 4 CPUs, seen at a later check.
    (cgroup / "cpu.weight").write_text(_weight(4) + "\n")
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(script.stderr.read() if script.stderr else ""))
    reader.start()
    lines += script.stdout.readlines()
    assert script.wait(timeout=300) == 0
    reader.join()
    assert any(line.endswith("CPUs changed, 2 -> 4 threads\n") for line in lines), lines
    assert lines[-1].startswith("done: 3000 steps"), lines
    assert not err[0], err  # every write went through
    written = kube.get_pod(namespace, "train")["metadata"]["annotations"]["pysched.io/progress"]
    parsed = parse_progress(written)
    assert parsed is not None and parsed[0] == 3000
