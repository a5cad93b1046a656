"""numba compilation shared by every compiled function of the package (the scheduler's kernel,
the learned queue policy's scorer): one set of options and one cache folder keyed by version."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
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


def compiled(*, inline: Literal["never", "always"] = "never") -> Callable[[F], F]:
    """Compile with the settings every kernel here shares, cached in `CACHE_FOLDER`."""

    def compile_(function: F) -> F:
        def jit(cache: bool) -> F:
            options = numba.njit(cache=cache, nogil=True, boundscheck=False, error_model="numpy", inline=inline)
            return cast(F, options(function))

        if CACHE_FOLDER is None:
            return jit(cache=False)
        # numba fixes a function's cache folder when it is decorated: point it at ours for this
        # decoration only, so that nobody else's cached functions move.
        saved = _NUMBA_CONFIG.CACHE_DIR
        _NUMBA_CONFIG.CACHE_DIR = str(CACHE_FOLDER)
        try:
            return jit(cache=True)
        finally:
            _NUMBA_CONFIG.CACHE_DIR = saved

    return compile_
