"""pytest fixtures for tests against the real control plane.

Register with ``pytest_plugins = ["pysched.testing.pytest_plugin"]`` in the root
conftest, or import the fixtures into a conftest:

* ``control_plane`` (session; under pytest-xdist one per worker): a started :class:`LocalControlPlane`;
* ``kube`` (session): its :class:`KubeAPI`;
* ``jobset`` (session): the JobSet controller and its webhooks, started on ``control_plane``;
* ``helm`` (session): the helm binary (hack/build-helm.sh);
* ``kwok_bin_dir`` (session): KWOK and its stages (hack/build-kwok.sh);
* ``namespace`` (function): a fresh namespace; afterwards its pods are
  force-deleted (grace period 0: with no kubelet nothing else finishes them)
  and the namespace is deleted.

When the binaries (the control plane's, or for ``jobset`` its manager, for ``helm`` helm, for
``kwok_bin_dir`` KWOK) are missing the tests are skipped, except under CI (``CI`` set) or with
``PYSCHED_REQUIRE_CONTROL_PLANE=1``, where they fail.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from pysched.testing.controlplane import BinariesNotFound, LocalControlPlane, ManagedProcess, find_bin_dir
from pysched.testing.emulator import KubeletEmulator
from pysched.testing.helm import find_helm
from pysched.testing.jobset import find_jobset_bin_dir, start_jobset
from pysched.testing.kube import KubeAPI, KubeAPIError
from pysched.testing.kwok import find_kwok


def _require() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("PYSCHED_REQUIRE_CONTROL_PLANE") == "1"


def _unavailable(err: BinariesNotFound) -> NoReturn:
    if _require():
        pytest.fail(str(err))
    pytest.skip(str(err))


@pytest.fixture(scope="session")
def control_plane_bin_dir() -> str:
    try:
        return str(find_bin_dir())
    except BinariesNotFound as err:
        _unavailable(err)


@pytest.fixture(scope="session")
def control_plane(control_plane_bin_dir: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    workdir = tmp_path_factory.mktemp("control-plane")
    with LocalControlPlane(workdir, bin_dir=control_plane_bin_dir) as plane:
        yield plane


@pytest.fixture(scope="session")
def kube(control_plane: LocalControlPlane) -> KubeAPI:
    api: KubeAPI = control_plane.api()
    return api


@pytest.fixture(scope="session")
def jobset(control_plane: LocalControlPlane) -> ManagedProcess:
    """The JobSet manager on the shared plane for the rest of the session (stopped with it)."""
    try:
        bin_dir = find_jobset_bin_dir()
    except BinariesNotFound as err:
        _unavailable(err)
    return start_jobset(control_plane, bin_dir)


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary (hack/build-helm.sh), for the chart check."""
    try:
        return find_helm()
    except BinariesNotFound as err:
        _unavailable(err)


@pytest.fixture(scope="session")
def kwok_bin_dir() -> Path:
    """KWOK and its stages (hack/build-kwok.sh), for the perf harness's KWOK tier."""
    try:
        return find_kwok()
    except BinariesNotFound as err:
        _unavailable(err)


@pytest.fixture
def namespace(kube: KubeAPI, control_plane: LocalControlPlane) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.post(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    try:
        yield name
    finally:
        control_plane.check()
        pods = kube.get(f"/api/v1/namespaces/{name}/pods").get("items", [])
        for pod in pods:
            kube.force_delete_pod(name, pod["metadata"]["name"])
        with contextlib.suppress(KubeAPIError):
            kube.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def emulator(kube: KubeAPI, request: pytest.FixtureRequest) -> Iterator[KubeletEmulator]:
    """A running kubelet emulator for the fake nodes, stopped after the test; a module or test
    marked `@pytest.mark.emulator(time_scale=..., progress_interval=...)` gets those settings."""
    marker = request.node.get_closest_marker("emulator")
    emu = KubeletEmulator(kube, **(marker.kwargs if marker is not None else {})).start()
    emu.wait_synced()
    try:
        yield emu
    finally:
        emu.stop()
