"""Where compiled kernels are cached: pysched's cache folder, never beside the installed package."""

import os
import subprocess
import sys
from pathlib import Path

import pysched.scheduler

PACKAGE = Path(pysched.scheduler.__file__).parent

COMPILE = "from pysched.scheduler import kernel, selection; selection.warm_up(); print(kernel.CACHE_FOLDER)"


def _compile(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYSCHED_CACHE_DIR")}
    result = subprocess.run(
        [sys.executable, "-c", COMPILE], env={**clean, **env}, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _beside_the_package() -> dict[Path, int]:
    """numba's cache files inside the package, with their modification times (a rewrite counts)."""
    return {path: path.stat().st_mtime_ns for pattern in ("*.nbi", "*.nbc") for path in PACKAGE.rglob(pattern)}


def test_kernels_are_cached_under_the_cache_folder_keyed_by_version(tmp_path: Path) -> None:
    before = _beside_the_package()
    folder = Path(_compile(PYSCHED_CACHE_DIR=str(tmp_path)))
    assert folder == tmp_path / "numba" / f"pysched-{pysched.__version__}"
    assert list(folder.rglob("kernel.score_rows-*.nbi"))  # the index numba reads on the next start
    assert _beside_the_package() == before  # nothing new inside the package


def test_numba_cache_dir_wins_and_nothing_writable_means_no_cache(tmp_path: Path) -> None:
    chosen = tmp_path / "numba-here"
    assert Path(_compile(NUMBA_CACHE_DIR=str(chosen), PYSCHED_CACHE_DIR=str(tmp_path / "unused"))) == chosen
    assert list(chosen.rglob("*.nbi")) and not (tmp_path / "unused").exists()
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    before = _beside_the_package()
    assert _compile(PYSCHED_CACHE_DIR=str(blocked / "cache")) == "None"  # compiled, cached nowhere
    assert _compile(NUMBA_CACHE_DIR=str(blocked / "numba")) == "None"  # not numba's fallback either
    assert _compile(PYSCHED_NUMBA_CACHE="0", PYSCHED_CACHE_DIR=str(tmp_path / "off")) == "None"
    assert not (tmp_path / "off").exists()
    assert _beside_the_package() == before


def test_a_kernel_that_calls_another_module_s_is_cached_under_that_module_s_source(tmp_path: Path) -> None:
    from types import ModuleType

    from pysched.compiled import _folder_for

    source = tmp_path / "other.py"
    source.write_text("X = 1\n")
    other = ModuleType("other")
    other.__file__ = str(source)
    first = _folder_for(tmp_path / "root", [other])
    assert first is None  # the root does not exist: cached nowhere rather than somewhere else
    (tmp_path / "root").mkdir()
    first = _folder_for(tmp_path / "root", [other])
    assert first is not None and first.is_dir() and first.parent == tmp_path / "root"
    assert _folder_for(tmp_path / "root", [other]) == first  # the same source, the same folder
    source.write_text("X = 2\n")  # an edit there: the kernel is compiled again, in a new folder
    assert _folder_for(tmp_path / "root", [other]) not in (first, None)
    # The scorer's fused pick is such a kernel: its index lands in a uses-* folder.
    warm = (
        "import numpy as np; from pysched.deadline import scorer, features as F;"
        "from pysched.plugins.learned_queue_sort import queue_policy; s = queue_policy('builtin');"
        "s.pick_window(np.zeros((2, F.STATIC_WIDTH)), np.arange(2), 0.0, F.ClusterView(0.5, 0.0), (1e9, 1e9),"
        " scorer.WindowBuffers.of(2))"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYSCHED_CACHE_DIR")}
    done = subprocess.run(
        [sys.executable, "-c", warm], env={**clean, "PYSCHED_CACHE_DIR": str(tmp_path / "c")}, timeout=300
    )
    assert done.returncode == 0
    found = list((tmp_path / "c").rglob("*pick_window*.nbi"))
    assert found and all(any(p.name.startswith("uses-") for p in path.parents) for path in found)
