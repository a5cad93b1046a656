"""numba compilation shared by every compiled function of the package (the scheduler's kernel,
the learned queue policy's scorer): one set of options and one cache folder keyed by version (a
kernel that calls another module's compiled functions: a subfolder named after that module's source)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypeVar, cast

import numba

from pysched import __version__, cache_dir

NUMBA_CACHE_ENV = "PYSCHED_NUMBA_CACHE"  # "0": compile at every start, cache nothing


_NUMBA_CONFIG: Any = numba.config  # its CACHE_DIR is not in numba's type stubs


def cache_folder() -> Path | None:
    """Where compiled kernels are cached: `NUMBA_CACHE_DIR` when the user sets it, else a folder
    of pysched's cache keyed by version, never beside the installed package (a read-only
    install, and a leftover `__pycache__` that would make `pysched` a namespace package). None
    when caching is off or the folder is not writable (numba would then fall back to the package's
    own folder): the kernels are compiled at start-up."""
    if os.environ.get(NUMBA_CACHE_ENV, "1") == "0":
        return None
    chosen = _NUMBA_CONFIG.CACHE_DIR
    folder = Path(chosen) if chosen else cache_dir() / "numba" / f"pysched-{__version__}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None


CACHE_FOLDER = cache_folder()

# Kernels take whole arrays and loop inside: a compiled helper called per row would pay array
# reference counting on every call. error_model="numpy" drops Python's zero-division checks;
# every division here is guarded by an explicit test.
F = TypeVar("F", bound=Callable[..., object])


def compiled(*, inline: Literal["never", "always"] = "never", uses: Sequence[ModuleType] = ()) -> Callable[[F], F]:
    """Compile with the settings every kernel here shares, cached in `CACHE_FOLDER`. `uses`: the
    other modules whose compiled functions this one calls. numba's cache checks only the source of
    the function's own module, so such a function is cached in a folder named after theirs: an
    edit there compiles it again instead of loading a kernel built from the old code."""

    def compile_(function: F) -> F:
        def jit(cache: bool) -> F:
            options = numba.njit(cache=cache, nogil=True, boundscheck=False, error_model="numpy", inline=inline)
            return cast(F, options(function))

        folder = CACHE_FOLDER if CACHE_FOLDER is None or not uses else _folder_for(CACHE_FOLDER, uses)
        if folder is None:
            return jit(cache=False)
        # numba fixes a function's cache folder when it is decorated: point it at ours for this
        # decoration only, so that nobody else's cached functions move.
        saved = _NUMBA_CONFIG.CACHE_DIR
        _NUMBA_CONFIG.CACHE_DIR = str(folder)
        try:
            return jit(cache=True)
        finally:
            _NUMBA_CONFIG.CACHE_DIR = saved

    return compile_


def _folder_for(root: Path, modules: Sequence[ModuleType]) -> Path | None:
    """A folder of `root` named after the sources of `modules` (None: one cannot be read or made)."""
    digest = hashlib.sha256()
    try:
        for module in modules:
            digest.update(Path(module.__file__ or "").read_bytes())
        folder = root / f"uses-{digest.hexdigest()[:16]}"
        folder.mkdir(exist_ok=True)
    except OSError:
        return None
    return folder
