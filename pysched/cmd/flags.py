"""Checks of a command's flags before it starts work: numbers finite and in range, outputs writable.

Each returns the problem as one line for `errors.bad_input`, or None, so that a run of minutes
never ends in a traceback about its last step.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pysched.api.inputs import out_of_range
from pysched.api.labels import dns_name
from pysched.api.limits import MAX_SEED, clip

# `pysched run`'s ranges
MAX_QPS = 100_000  # --qps, --burst and the event ones: far above what one API server takes
MAX_BINDS_IN_FLIGHT = 10_000  # one task each
MAX_LEASE_SECONDS = 3_600.0  # past an hour a dead leader would hold scheduling up that long
MIN_RETRY_PERIOD_S = 0.01  # a Lease update at most 100 times a second
_SEED = re.compile(r"[0-9]{1,10}")  # ASCII digits only: int() would also take ' 7', '1_0' and other scripts' digits


def parse_seed(text: str) -> int:
    """The argparse type of every `--seed`: a whole number from 0 to MAX_SEED (argparse then
    refuses anything else in one line, exit 2). Outside that range `simulate` and `bench` took a
    seed silently and `learn train` ended in a numpy traceback."""
    if _SEED.fullmatch(text) is None or int(text) > MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to {MAX_SEED}, got {clip(text)}")
    return int(text)


def empty_problem(flag: str, value: str | None, what: str = "a value") -> str | None:
    """`--flag: WHAT is needed` when the flag was given as ''. A flag left out is None; '' read as
    "not given" would quietly take the default (the built-in profiles, $KUBECONFIG, the current
    folder) in place of what was asked for."""
    return f"{flag}: {what} is needed" if value == "" else None


def number_problem(flag: str, value: float, low: float, high: float, *, above: bool = False) -> str | None:
    """`--flag: must be ...` when `value` is not finite and within [low, high] (`above`: > low)."""
    problem = out_of_range(value, low, high, above=above)
    return None if problem is None else f"{flag}: {problem}"


def extra_problem(what: str, module: str, package: str, extra: str) -> str | None:
    """`WHAT needs PACKAGE, in the EXTRA extra: pip install ...` when `module` cannot be imported:
    asked before a command starts, so a missing optional dependency never fails a run midway."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        return f"{what} needs {package}, in the {extra} extra: pip install 'pysched[{extra}]'"
    return None


def not_a_file(path: str) -> str | None:
    """Why `path` is not a regular file to read (None when it is): missing, a folder, or another
    kind (a FIFO, a device)."""
    found = Path(path)
    if found.is_file():
        return None
    if not found.exists():
        return "no such file"
    return "is a folder, not a file" if found.is_dir() else "is not a regular file"


def first_problem(*problems: str | None) -> str | None:
    return next((p for p in problems if p is not None), None)


def output_file(path: str) -> Path:
    """`path` with its missing parent folders made: what `output_problem` accepted is writable."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def write_output(path: str, text: str) -> None:
    """`text` into `path`; an OSError names the path (a write to a full disk does not)."""
    try:
        output_file(path).write_text(text, encoding="utf-8")  # traces are UTF-8 whatever the locale
    except OSError as err:
        raise OSError(err.errno, err.strerror, path) from None


def write_problem(err: OSError) -> str:
    """An output that could not be written after all (checked writable at the start)."""
    return f"cannot write {err.filename or 'an output'}: {err.strerror or err}"


def output_problem(flag: str, path: str, *, folder: bool = False) -> str | None:
    """Why `path` cannot be written, as a file or (`folder`) as a folder to write files in; None
    when it can. Missing parent folders are fine when they can be created, as the writers create
    them (`output_file`). Checked by creating and removing a probe, so nothing is left behind."""
    if not path:
        return f"{flag}: a {'folder' if folder else 'file'} name is needed"
    target = Path(path)
    try:
        dead = _dead_link(target)
        if dead is not None:  # the writer would fail on it after the run
            where = path if dead == target else f"{path}: {dead}"
            return f"{flag}: {where} is a symbolic link to nothing (its target is missing, or a loop)"
        if target.exists():
            if target.is_dir() != folder:
                return f"{flag}: {path} is {'not ' if folder else ''}a folder"
            if folder:
                tempfile.TemporaryFile(dir=target).close()
            else:  # append without blocking (a FIFO), so nothing is truncated before the run
                os.close(os.open(target, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
            return None
        parent = next((p for p in target.parents if p.exists()), Path("."))
        if not parent.is_dir():
            return f"{flag}: {path}: {parent} is not a folder"
        if parent == target.parent and not folder:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL))  # the file itself, then gone
            with contextlib.suppress(OSError):
                target.unlink()
        else:
            os.rmdir(tempfile.mkdtemp(dir=parent))  # the folders that will be created can be
    except OSError as err:
        return f"{flag}: cannot write {path}: {err.strerror or err}"
    return None


def clash_problem(outputs: Sequence[tuple[str, str | None]], inputs: Sequence[tuple[str, str | None]]) -> str | None:
    """`--flag: ...` when an output would overwrite an input or another output, or would be
    written inside another output's file, or when a path goes round a loop of symbolic links: each
    (flag, path) named, None where a flag is not given."""
    given: list[tuple[str, Path]] = []
    read: list[tuple[str, Path]] = []
    for paths, into in ((outputs, given), (inputs, read)):
        for flag, path in paths:
            if path:
                resolved = _resolved(flag, path)
                if isinstance(resolved, str):
                    return resolved
                into.append((flag, resolved))
    for i, (flag, target) in enumerate(given):
        for other, source in read:
            if _same_file(target, source):
                return f"{flag}: it is the file {other} reads; the run would overwrite it"
        for other, written in given[:i]:
            if _same_file(target, written):
                return f"{flag}: {other} writes the same file"
            if written in target.parents or target in written.parents:
                return f"{flag}: {other} writes a file where this one needs a folder, or the other way round"
    return None


def _same_file(one: Path, other: Path) -> bool:
    """One path, or two names (hard links) of one existing file."""
    if one == other:
        return True
    try:
        return os.path.samefile(one, other)
    except OSError:  # one of them does not exist yet: names differ, so files do
        return False


def _dead_link(target: Path) -> Path | None:
    """The first of `target` and its missing parent folders that is a symbolic link leading
    nowhere (to a missing path, or round a loop), or None. `exists` follows links, `is_symlink`
    does not."""
    for path in (target, *target.parents):
        if path.exists():
            return None
        if path.is_symlink():
            return path
    return None


def _resolved(flag: str, path: str) -> Path | str:
    """`path` with its symbolic links followed, or the problem as one line naming `flag`."""
    try:
        return Path(path).resolve()
    except RuntimeError:  # a loop of symbolic links (OSError from Python 3.13)
        return f"{flag}: {path}: a loop of symbolic links"
    except OSError as err:
        return f"{flag}: {path}: {err.strerror or err}"
    except ValueError:
        return f"{flag}: {path!r} is not a file name (it holds a NUL byte)"


def dns_problem(flag: str, name: str, *, subdomain: bool = False) -> str | None:
    """`--flag: ...` unless `name` is what the API takes as a namespace (a DNS-1123 label, 63
    characters) or, with `subdomain`, an object name (dot-separated labels, 253 characters): a
    request built from it would otherwise go to another path, or be refused after start-up."""
    if dns_name(name, subdomain=subdomain):
        return None
    limit, what = (
        (253, "lowercase letters, digits, '-' and '.'") if subdomain else (63, "lowercase letters, digits and '-'")
    )
    return f"{flag}: {clip(name)} is not a Kubernetes name (1 to {limit} {what}, starting and ending alphanumeric)"
