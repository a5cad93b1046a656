"""The tools the tests and the perf harness run (helm, KWOK) are taken from the builds their
hack/build-*.sh scripts make: the version looked for is the one the wrapper module pins, and
without a build the error says how to make one."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pysched.testing.controlplane import BinariesNotFound
from pysched.testing.helm import HELM_BIN_ENV, HELM_VERSION, find_helm
from pysched.testing.kwok import KWOK_BIN_ENV, KWOK_VERSION, find_kwok

ROOT = Path(__file__).resolve().parents[3]

# (tool, its Go module, the version looked for, the env override, the finder, what it returns of bin/)
TOOLS: list[tuple[str, str, str, str, Callable[[], Path], Callable[[Path], Path]]] = [
    ("helm", "helm.sh/helm/v4", HELM_VERSION, HELM_BIN_ENV, find_helm, lambda bin_dir: bin_dir / "helm"),
    ("kwok", "sigs.k8s.io/kwok", KWOK_VERSION, KWOK_BIN_ENV, find_kwok, lambda bin_dir: bin_dir),
]


@pytest.mark.parametrize(("tool", "module", "version"), [t[:3] for t in TOOLS])
def test_the_version_looked_for_is_the_one_the_wrapper_module_pins(tool: str, module: str, version: str) -> None:
    go_mod = (ROOT / "hack" / tool / "go.mod").read_text()
    pinned = re.search(rf"^require {re.escape(module)} (v\S+)$", go_mod, re.M)
    assert pinned is not None and pinned.group(1) == version


@pytest.mark.parametrize(("tool", "module", "version", "env", "find", "found"), TOOLS)
def test_no_build_names_the_build_script_and_a_build_is_found(
    tool: str,
    module: str,
    version: str,
    env: str,
    find: Callable[[], Path],
    found: Callable[[Path], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(BinariesNotFound, match=rf"no complete \w+ v\S+ build .*hack/build-{tool}\.sh"):
        find()
    out = tmp_path / tool / f"{tool}-{version}_go1.26.8"
    (out / "bin").mkdir(parents=True)
    (out / "bin" / tool).write_text("#!/bin/sh\n")
    (out / "bin" / tool).chmod(0o755)
    (out / ".complete").write_text(f"{tool}={version}\nbinaries={tool}\n")
    if tool == "kwok":  # KWOK runs only with its stages beside it
        with pytest.raises(BinariesNotFound, match=r"has kwok but not its stages\.yaml"):
            find()
        (out / "bin" / "stages.yaml").write_text("kind: Stage\n")
    assert find() == found(out / "bin")
