"""The helm fixture takes the build hack/build-helm.sh makes: the version it looks for is the one
the wrapper module pins, and without a build it says how to make one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pysched.testing.controlplane import BinariesNotFound
from pysched.testing.helm import HELM_BIN_ENV, HELM_VERSION, find_helm

ROOT = Path(__file__).resolve().parents[3]


def test_the_version_looked_for_is_the_one_the_wrapper_module_pins() -> None:
    pinned = re.search(r"^require helm\.sh/helm/v4 (v\S+)$", (ROOT / "hack" / "helm" / "go.mod").read_text(), re.M)
    assert pinned is not None and pinned.group(1) == HELM_VERSION


def test_no_build_names_the_build_script_and_a_build_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(HELM_BIN_ENV, raising=False)
    with pytest.raises(BinariesNotFound, match=r"no complete helm v\S+ build .*hack/build-helm\.sh"):
        find_helm()
    out = tmp_path / "helm" / f"helm-{HELM_VERSION}_go1.26.8"
    (out / "bin").mkdir(parents=True)
    (out / "bin" / "helm").write_text("#!/bin/sh\n")
    (out / "bin" / "helm").chmod(0o755)
    (out / ".complete").write_text(f"helm={HELM_VERSION}\nbinaries=helm\n")
    assert find_helm() == out / "bin" / "helm"
