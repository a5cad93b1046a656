"""pysched-progress installed alone into an empty virtualenv (no third-party package at all)
writes a pod's progress on the real apiserver from a kubeconfig, and says in one line, without a
traceback, when it cannot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pysched.testing import KubeAPI, LocalControlPlane
from pysched.testing.helpers import make_pod

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
import pysched_progress as progress
third_party = sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "yaml", "numpy", "urllib3", "pysched"))
assert not third_party, third_party
print(progress.report(7, total=7), progress.report(8), progress.flush())
"""


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("light") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # Built as pip builds any project (setuptools from the package index, as `make install` has it);
    # installed into the venv with nothing else.
    wheels = tmp_path_factory.mktemp("wheels")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels),
         str(ROOT / "progress")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("pysched_progress-*.whl")
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)
    names = {line.split("==")[0].lower() for line in listed.stdout.split()}
    assert names - {"pip", "setuptools"} == {"pysched-progress"}, names
    return python


def _run(python: Path, control_plane: LocalControlPlane, namespace: str, pod: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "PYTHON"))}
    env.update(KUBECONFIG=str(control_plane.kubeconfig_path), POD_NAME=pod, POD_NAMESPACE=namespace)
    return subprocess.run([str(python), "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60)


def test_the_light_client_writes_progress_from_a_kubeconfig(
    light_venv: Path, control_plane: LocalControlPlane, kube: KubeAPI, namespace: str
) -> None:
    kube.create_pod(namespace, make_pod("train"))
    done = _run(light_venv, control_plane, namespace, "train")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "True"]  # the total at once; 8 rate-limited, then flushed
    value = kube.get_pod(namespace, "train")["metadata"]["annotations"]["pysched.io/progress"]
    assert value.startswith("8@") and value.endswith("Z")


def test_a_write_the_apiserver_refuses_is_one_warning_line_and_training_goes_on(
    light_venv: Path, control_plane: LocalControlPlane, namespace: str
) -> None:
    done = _run(light_venv, control_plane, namespace, "no-such-pod")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False"]  # 7's write started, then refused; so is 8's
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "could not write pysched.io/progress=7@" in lines[0] and "HTTP 404" in lines[0], lines
    assert "Traceback" not in done.stderr
