"""Control-plane parts that need no binaries running: which cached build `find_bin_dir` takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pysched.testing.controlplane import ALL_BINARIES, K8S_VERSION, BinariesNotFound, find_bin_dir

# -- find_bin_dir and the build's marker -----------------------------------------------------------


def fake_build(root: Path, binaries: tuple[str, ...], listed: tuple[str, ...] | None) -> Path:
    out = root / "control-plane" / f"k8s-{K8S_VERSION}_etcd-v3.6.16_go1.26.8"
    (out / "bin").mkdir(parents=True)
    for name in binaries:
        path = out / "bin" / name
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    lines = [f"kubernetes={K8S_VERSION}"] + ([f"binaries={' '.join(listed)}"] if listed is not None else [])
    (out / ".complete").write_text("\n".join(lines) + "\n")
    return out / "bin"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYSCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PYSCHED_CONTROL_PLANE_BIN", raising=False)
    return tmp_path


def test_a_build_listing_every_binary_is_found(cache: Path) -> None:
    bin_dir = fake_build(cache, ALL_BINARIES, ALL_BINARIES)
    assert find_bin_dir(need=ALL_BINARIES) == bin_dir


def test_a_build_from_before_the_controller_manager_is_missing_it(cache: Path) -> None:
    old = ("etcd", "kube-apiserver", "kube-scheduler", "kubectl")
    bin_dir = fake_build(cache, old, None)  # the marker of the older script had no binaries= line
    with pytest.raises(BinariesNotFound, match="kube-controller-manager; build them"):
        find_bin_dir(need=ALL_BINARIES)
    assert find_bin_dir(need=("etcd", "kube-apiserver")) == bin_dir


def test_a_binary_the_marker_does_not_list_is_missing(cache: Path) -> None:
    listed = tuple(b for b in ALL_BINARIES if b != "kube-controller-manager")
    fake_build(cache, ALL_BINARIES, listed)  # a stray file the build did not make
    with pytest.raises(BinariesNotFound, match="kube-controller-manager"):
        find_bin_dir(need=ALL_BINARIES)
