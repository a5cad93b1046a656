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
