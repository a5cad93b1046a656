"""A learned policy as deployed: a small network applied to each job's feature row, evaluated
with numpy and numba alone. Two kinds (`PolicyKind`):

- a queue policy (`QUEUE`) scores each waiting job (`pysched.deadline.features`): a softmax over a
  window's scores is the policy's distribution, its arg-max the pick;
- an allocation policy (`ALLOCATION`) gives each running job one logit per answer
  (`pysched.deadline.allocation.ACTIONS`): its arg-max is the answer.

The same network reads every row, so a policy does not depend on the order of the jobs or their
number. Weights travel as a JSON text file (its kind's format): the feature schema and names it was trained on, the
largest window it supports, the layers (`weight` as [out][in], `bias` as [out]), optionally the
range each of a pod's own features took in the training workloads (`trained_on`, e.g. `{"gpus":
[0, 0]}`: trained on CPU jobs only), and a SHA-256 over the rest, so that a file of another
schema, a truncated or edited one, or one holding a NaN is refused with one line when it is
loaded, never mid-run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import stat
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pysched.api.inputs import InputError, path_text, read_text
from pysched.api.limits import clip
from pysched.compiled import compiled
from pysched.deadline import allocation, features


@dataclass(frozen=True, slots=True)
class PolicyKind:
    format: str
    schema: int
    features: tuple[str, ...]
    outputs: int  # per row: a score (queue), or one logit per answer (allocation)
    name: str


QUEUE = PolicyKind("pysched.io/queue-policy", features.SCHEMA, features.FEATURES, 1, "queue policy")
ALLOCATION = PolicyKind(
    "pysched.io/allocation-policy", allocation.SCHEMA, allocation.FEATURES, len(allocation.ACTIONS), "allocation policy"
)
ACTIVATIONS = ("tanh", "relu")
MAX_WEIGHTS_BYTES = 1024 * 1024  # the shipped policy is about 6 kB
MAX_LAYERS = 8
MAX_UNITS = 256
MAX_WINDOW = 256
MAX_VALUE = 1e6  # a weight, bias or range end; trained values stay within tens
MAX_INT_DIGITS = 20
TOP_KEYS = ("format", "schema", "features", "window", "activation", "layers", "meta", "trained_on", "sha256")
LAYER_KEYS = ("weight", "bias")
RANGE_SLACK = 1e-6  # a training range is written to 7 significant digits


class PolicyFileError(ValueError):
    """A weights file that cannot be used; the message is one line naming the file."""


@compiled()
def _logits(
    rows: np.ndarray, flat: np.ndarray, dims: np.ndarray, relu: bool, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Every row's outputs into `out` (n, outputs). `flat` holds each layer's weight transposed
    ([in][out], so the inner loop runs over independent outputs and vectorises) then its bias;
    `dims`: inputs, then each layer's outputs."""
    width = 0
    for d in dims:
        width = max(width, d)
    a = np.empty(width)
    b = np.empty(width)
    layers = dims.shape[0] - 1
    for r in range(rows.shape[0]):
        for i in range(dims[0]):
            a[i] = rows[r, i]
        offset = 0
        for layer in range(layers):
            din, dout = dims[layer], dims[layer + 1]
            bias = offset + din * dout
            for o in range(dout):
                b[o] = flat[bias + o]
            for i in range(din):
                x = a[i]
                base = offset + i * dout
                for o in range(dout):
                    b[o] += flat[base + o] * x
            for o in range(dout):
                a[o] = b[o] if layer == layers - 1 else (max(b[o], 0.0) if relu else math.tanh(b[o]))
            offset = bias + dout
        for o in range(dims[layers]):
            out[r, o] = a[o]


@compiled()
def _forward(
    rows: np.ndarray, flat: np.ndarray, dims: np.ndarray, relu: bool, allowed: np.ndarray, scores: np.ndarray
) -> int:  # pragma: no cover - compiled
    """Score every row (a network of one output) into `scores`; the first best allowed row (-1:
    none)."""
    _logits(rows, flat, dims, relu, scores.reshape((scores.shape[0], 1)))
    best, chosen = -np.inf, -1
    for r in range(rows.shape[0]):
        if allowed[r] and scores[r] > best:
            best, chosen = scores[r], r
    return chosen


@compiled(inline="always")
def _row_within(row: np.ndarray, bounds: np.ndarray) -> bool:  # pragma: no cover - compiled
    """Whether `row` holds, in each column `bounds[k, 0]`, a value within `bounds[k, 1]` to
    `bounds[k, 2]` (give or take RANGE_SLACK)."""
    for k in range(bounds.shape[0]):
        value = row[int(bounds[k, 0])]
        if value < bounds[k, 1] - RANGE_SLACK or value > bounds[k, 2] + RANGE_SLACK:
            return False
    return True


@compiled(inline="always")
def _keep_known(
    fixed: np.ndarray, index: np.ndarray, bounds: np.ndarray, allowed: np.ndarray, n: int
) -> int:  # pragma: no cover - compiled
    """Rows outside the training ranges `bounds` are not scored. When the first allowed row is one,
    it keeps its place and is the pick: returned as -2 - its row. Otherwise such rows are no longer
    allowed, and the count of allowed rows is returned."""
    count = 0
    for r in range(n):
        if not allowed[r]:
            continue
        if not _row_within(fixed[index[r]], bounds):
            if count == 0:
                return -2 - r
            allowed[r] = False
            continue
        count += 1
    return count


@compiled(uses=(features,))
def _pick_window(
    fixed: np.ndarray, index: np.ndarray, now: float, free_cpu: float, free_gpu: float, cpu_room: float,
    gpu_room: float, flat: np.ndarray, dims: np.ndarray, relu: bool, out: np.ndarray, allowed: np.ndarray,
    scores: np.ndarray, bounds: np.ndarray,
) -> int:  # fmt: skip  # pragma: no cover - compiled
    """A queue policy's pick in one call: the window's rows (`features.fill_window`), then the best
    allowed row; with one row allowed or none, the first allowed (0: none) without the network.
    Rows outside the training ranges `bounds` are not scored (`_keep_known`)."""
    n = index.shape[0]
    count = features.fill_window(fixed, index, now, free_cpu, free_gpu, cpu_room, gpu_room, out, allowed)
    if bounds.shape[0] > 0:
        count = _keep_known(fixed, index, bounds, allowed, n)
        if count < -1:
            return -2 - count
    if count <= 1:
        for r in range(n):
            if allowed[r]:
                return r
        return 0
    return max(0, _forward(out[:n], flat, dims, relu, allowed[:n], scores[:n]))


@compiled(inline="always")
def _two_hidden_row(
    rows: np.ndarray, r: int, flat: np.ndarray, h1: np.ndarray, h2: np.ndarray, d0: int, d1: int, d2: int,
    d3: int, relu: bool, out: np.ndarray,
) -> None:  # fmt: skip  # pragma: no cover - compiled
    """Row r's outputs into out[r] through a network of two hidden layers, `_logits`' layout. Inlined
    where the sizes are constants, so the compiler unrolls and vectorises its loops."""
    w2 = d0 * d1 + d1
    w3 = w2 + d1 * d2 + d2
    for o in range(d1):
        h1[o] = flat[d0 * d1 + o]
    for i in range(d0):
        x = rows[r, i]
        for o in range(d1):
            h1[o] += flat[i * d1 + o] * x
    for o in range(d2):
        h2[o] = flat[w2 + d1 * d2 + o]
    for i in range(d1):
        x = max(h1[i], 0.0) if relu else math.tanh(h1[i])
        for o in range(d2):
            h2[o] += flat[w2 + i * d2 + o] * x
    for o in range(d3):
        out[r, o] = flat[w3 + d2 * d3 + o]
    for i in range(d2):
        x = max(h2[i], 0.0) if relu else math.tanh(h2[i])
        for o in range(d3):
            out[r, o] += flat[w3 + i * d3 + o] * x


@functools.lru_cache(maxsize=16)
def _two_hidden(d0: int, d1: int, d2: int, d3: int, relu: bool) -> tuple[Any, Any]:
    """`_logits` and `_pick_window` compiled for one shape of network with two hidden layers (every
    network `pysched learn train` makes): with the sizes constants of the compiled code they take
    about half the time. Compiled once per shape, cached on disk as the others."""

    @compiled()
    def logits(
        rows: np.ndarray, flat: np.ndarray, dims: np.ndarray, relu_: bool, out: np.ndarray
    ) -> None:  # pragma: no cover - compiled
        h1 = np.empty(d1)
        h2 = np.empty(d2)
        for r in range(rows.shape[0]):
            _two_hidden_row(rows, r, flat, h1, h2, d0, d1, d2, d3, relu, out)

    @compiled(uses=(features,))
    def pick_window(
        fixed: np.ndarray, index: np.ndarray, now: float, free_cpu: float, free_gpu: float, cpu_room: float,
        gpu_room: float, flat: np.ndarray, dims: np.ndarray, relu_: bool, out: np.ndarray, allowed: np.ndarray,
        scores: np.ndarray, bounds: np.ndarray,
    ) -> int:  # fmt: skip  # pragma: no cover - compiled
        n = index.shape[0]
        count = features.fill_window(fixed, index, now, free_cpu, free_gpu, cpu_room, gpu_room, out, allowed)
        if bounds.shape[0] > 0:
            count = _keep_known(fixed, index, bounds, allowed, n)
            if count < -1:
                return -2 - count
        h1 = np.empty(d1)
        h2 = np.empty(d2)
        best, chosen = -np.inf, -1
        first = -1
        table = scores.reshape((scores.shape[0], 1))
        for r in range(n):
            if not allowed[r]:
                continue
            if first < 0:
                first = r
            if count > 1:  # only allowed rows are scored: the others cannot be picked
                _two_hidden_row(out, r, flat, h1, h2, d0, d1, d2, d3, relu, table)
                if scores[r] > best:
                    best, chosen = scores[r], r
        if count <= 1:
            return max(0, first)
        return max(0, chosen)

    return logits, pick_window


def _kernels(dims: np.ndarray, relu: bool) -> tuple[Any, Any]:
    """The compiled `logits` and `pick_window` for a network of these sizes."""
    if dims.shape[0] == 4:
        return _two_hidden(int(dims[0]), int(dims[1]), int(dims[2]), int(dims[3]), relu)
    return _logits, _pick_window


@dataclass(slots=True)
class WindowBuffers:
    """What `Scorer.pick_window` writes, allocated once for the largest window."""

    rows: np.ndarray  # (window, WIDTH) float32: the feature rows of the last pick
    allowed: np.ndarray  # (window,) bool
    scores: np.ndarray  # (window,) float64

    @classmethod
    def of(cls, window: int) -> WindowBuffers:
        return cls(np.empty((window, features.WIDTH), np.float32), np.empty(window, np.bool_), np.empty(window))


@dataclass(frozen=True, slots=True)
class Scorer:
    layers: tuple[tuple[np.ndarray, np.ndarray], ...]  # (weight [out, in], bias [out]), float64
    activation: str
    window: int  # the largest window the policy was trained for
    meta: dict[str, str]  # how it was made (command, seed)
    # (feature, column, low, high): a feature a pod fixes and the range it took in training.
    trained_on: tuple[tuple[str, int, float, float], ...] = ()
    flat: np.ndarray = field(init=False, repr=False)  # the layers in `_forward`'s layout
    dims: np.ndarray = field(init=False, repr=False)
    relu: bool = field(init=False, repr=False)
    kernels: tuple[Any, Any] = field(init=False, repr=False)  # compiled logits and pick_window
    bounds: np.ndarray = field(init=False, repr=False)  # `trained_on` as rows of (column, low, high)

    def __post_init__(self) -> None:
        object.__setattr__(self, "relu", self.activation == "relu")
        flat = np.concatenate([np.concatenate([w.T.ravel(), b]) for w, b in self.layers])
        dims = np.array([self.layers[0][0].shape[1], *(w.shape[0] for w, _ in self.layers)], np.int64)
        object.__setattr__(self, "flat", np.ascontiguousarray(flat, np.float64))
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "kernels", _kernels(dims, self.relu))
        bounds = np.array([(column, low, high) for _, column, low, high in self.trained_on], np.float64)
        object.__setattr__(self, "bounds", bounds.reshape((len(self.trained_on), 3)))

    def ranges(self) -> dict[str, tuple[float, float]]:
        """`trained_on` by feature name, as `dump_policy` takes it."""
        return {name: (low, high) for name, _, low, high in self.trained_on}

    def scores(self, features: np.ndarray) -> np.ndarray:
        """One score per row of a (n, WIDTH) matrix; higher goes first."""
        out = np.empty(features.shape[0])
        allowed = np.ones(features.shape[0], np.bool_)
        _forward(features, self.flat, self.dims, self.relu, allowed, out)
        return out

    def logits(self, rows: np.ndarray) -> np.ndarray:
        """Every row's outputs, (n, outputs)."""
        out = np.empty((rows.shape[0], int(self.dims[-1])))
        self.kernels[0](rows, self.flat, self.dims, self.relu, out)
        return out

    def answers(self, rows: np.ndarray) -> np.ndarray:
        """An allocation policy's answer per row: the index of its largest logit (ties: the first)."""
        return np.argmax(self.logits(rows), axis=1).astype(np.int64) if rows.shape[0] else np.zeros(0, np.int64)

    def pick(self, features: np.ndarray, allowed: np.ndarray | None = None) -> int:
        """The highest-scoring row among the `allowed` ones (all when None); ties: the first;
        0 when none is allowed."""
        n = features.shape[0]
        mask = np.ones(n, np.bool_) if allowed is None else allowed
        chosen = _forward(features, self.flat, self.dims, self.relu, mask, np.empty(n))
        return max(0, int(chosen))

    def pick_window(
        self,
        fixed: np.ndarray,
        index: np.ndarray,
        now: float,
        cluster: features.ClusterView,
        room: tuple[float, float],
        buffers: WindowBuffers,
    ) -> int:
        """`pick` on the feature rows `features.window_rows` would build from `fixed[index]`, in
        one compiled call: the first allowed row when fewer than two are allowed (0: none). A row
        outside the training ranges (`trained_on`) is not scored: it keeps its place in the
        window's order, and is the pick when it is the first allowed; the network picks among the
        others."""
        chosen = self.kernels[1](
            fixed, index, now, cluster.free_cpu, cluster.free_gpu, room[0], room[1], self.flat, self.dims,
            self.relu, buffers.rows, buffers.allowed, buffers.scores, self.bounds,
        )  # fmt: skip
        return int(chosen)


def body_digest(body: dict[str, Any]) -> str:
    """SHA-256 of the file's content without its checksum, in one canonical spelling."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def dump_policy(
    layers: Sequence[tuple[np.ndarray, np.ndarray]],
    activation: str,
    window: int,
    meta: dict[str, str],
    kind: PolicyKind = QUEUE,
    trained_on: Mapping[str, tuple[float, float]] | None = None,
) -> str:
    """The weights file's text (rounded to 7 significant digits: the file stays small and the
    network's outputs move by less than 1e-5); `trained_on`: feature name -> (low, high)."""
    body: dict[str, Any] = {
        "format": kind.format,
        "schema": kind.schema,
        "features": list(kind.features),
        "window": window,
        "activation": activation,
        "layers": [
            {
                "weight": [[float(f"{v:.7g}") for v in row] for row in np.asarray(w, dtype=np.float64)],
                "bias": [float(f"{v:.7g}") for v in np.asarray(b, dtype=np.float64)],
            }
            for w, b in layers
        ],
        "meta": {str(k): str(v) for k, v in meta.items()},
    }
    if trained_on:
        body["trained_on"] = {name: [float(f"{v:.7g}") for v in pair] for name, pair in sorted(trained_on.items())}
    body["sha256"] = body_digest(body)
    return json.dumps(body, indent=None, separators=(",", ":")) + "\n"


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def _matrix(value: Any, rows: int | None, where: str) -> np.ndarray:
    if not isinstance(value, list) or not value or len(value) > MAX_UNITS:
        raise ValueError(f"{where}: a list of 1 to {MAX_UNITS} rows")
    if rows is not None and len(value) != rows:
        raise ValueError(f"{where}: {len(value)} rows where {rows} were expected")
    width = len(value[0]) if isinstance(value[0], list) else None
    return np.array([_vector(row, width, where) for row in value], dtype=np.float64)


def _vector(value: Any, length: int | None, where: str) -> np.ndarray:
    if not isinstance(value, list) or not value or len(value) > MAX_UNITS:
        raise ValueError(f"{where}: a list of 1 to {MAX_UNITS} numbers")
    if length is not None and len(value) != length:
        raise ValueError(f"{where}: {len(value)} values where {length} were expected")
    # Compared, not converted: an integer of 400 digits is refused, not an OverflowError.
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and -MAX_VALUE <= v <= MAX_VALUE for v in value):
        raise ValueError(f"{where}: holds a value that is not a number from {-MAX_VALUE:g} to {MAX_VALUE:g}")
    return np.array(value, dtype=np.float64)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for key, value in pairs:
        if key in body:
            raise ValueError(f"the key {clip(key)} appears twice in one object")
        body[key] = value
    return body


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{clip(text)} is beyond a float's range")
    return value


def _extra_keys(found: Mapping[str, Any], known: Collection[str], where: str) -> None:
    extra = sorted(set(found) - set(known))
    if extra:
        raise ValueError(f"{where}unknown key {clip(extra[0])} (known: {', '.join(sorted(known))})")


def parse_policy(text: str, kind: PolicyKind = QUEUE) -> Scorer:
    """The network a weights file of `kind` describes; ValueError (one line) for anything else."""
    try:
        return _parse_policy(text, kind)
    except RecursionError:  # nesting the parser took and the checksum's encoder did not
        raise ValueError("nested too deeply for a weights file") from None


def _parse_policy(text: str, kind: PolicyKind) -> Scorer:
    try:
        body = json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON (truncated?): {err.msg} at line {err.lineno}") from None
    if not isinstance(body, dict) or body.get("format") != kind.format:
        found = body.get("format") if isinstance(body, dict) else None
        other = f" (it is a {clip(str(found))} file)" if isinstance(found, str) else ""
        raise ValueError(f"not a {kind.format} file{other}")
    schema = body.get("schema")
    if type(schema) is not int or schema != kind.schema:  # `true` and `1.0` equal 1 in Python
        raise ValueError(
            f"made for feature schema {json.dumps(schema) if isinstance(schema, bool) else clip(schema)}; "
            f"this pysched reads schema {kind.schema} "
            f"({len(kind.features)} features)"
        )
    if body.get("features") != list(kind.features):
        raise ValueError(f"features: schema {kind.schema} reads {', '.join(kind.features)}, in that order")
    _extra_keys(body, TOP_KEYS, "")
    digest = body.pop("sha256", None)
    if digest != body_digest(body):
        raise ValueError("its sha256 does not match its content (edited or damaged)")
    window = body.get("window")
    if not isinstance(window, int) or isinstance(window, bool) or not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"window: an integer from 1 to {MAX_WINDOW}")
    activation = body.get("activation")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: one of {', '.join(ACTIVATIONS)}")
    raw_layers = body.get("layers")
    if not isinstance(raw_layers, list) or not 1 <= len(raw_layers) <= MAX_LAYERS:
        raise ValueError(f"layers: a list of 1 to {MAX_LAYERS} layers")
    layers = []
    inputs = len(kind.features)
    for i, layer in enumerate(raw_layers):
        if not isinstance(layer, dict):
            raise ValueError(f"layers[{i}]: an object with weight and bias")
        _extra_keys(layer, LAYER_KEYS, f"layers[{i}]: ")
        weight = _matrix(layer.get("weight"), None, f"layers[{i}].weight")
        if weight.shape[1] != inputs:
            raise ValueError(f"layers[{i}].weight: {weight.shape[1]} inputs where {inputs} were expected")
        bias = _vector(layer.get("bias"), weight.shape[0], f"layers[{i}].bias")
        layers.append((weight, bias))
        inputs = weight.shape[0]
    if inputs != kind.outputs:
        raise ValueError(f"the last layer gives {inputs} outputs where the {kind.name} needs {kind.outputs}")
    meta = body.get("meta", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise ValueError("meta: an object of strings")
    trained_on = _ranges(body.get("trained_on", {}), kind)
    return Scorer(tuple(layers), activation, window, {str(k): v for k, v in meta.items()}, trained_on)


def _ranges(value: Any, kind: PolicyKind) -> tuple[tuple[str, int, float, float], ...]:
    """`trained_on`: {feature: [low, high]} over features a pod fixes, as (name, column, low, high)."""
    known = [name for name in features.POD_FEATURES if name in kind.features]
    if kind is not QUEUE and value != {}:  # only a queue policy's pods are checked against them
        raise ValueError(f"trained_on: the {kind.name} reads no training ranges")
    if not isinstance(value, dict):
        raise ValueError(f"trained_on: an object of [low, high] by feature ({', '.join(known)})")
    ranges = []
    for name, pair in sorted(value.items()):
        if name not in known:
            raise ValueError(f"trained_on: {clip(str(name))} is not one of {', '.join(known)}")
        low, high = _vector(pair, 2, f"trained_on.{name}")
        if low > high:
            raise ValueError(f"trained_on.{name}: its low end {low:g} is above its high end {high:g}")
        ranges.append((name, kind.features.index(name), float(low), float(high)))
    return tuple(ranges)


def load_policy(path: str | Path, kind: PolicyKind = QUEUE) -> Scorer:
    """Read and check a weights file; PolicyFileError names the file and the problem."""
    try:
        return parse_policy(read_text(path, limit=MAX_WEIGHTS_BYTES), kind)
    except InputError as err:
        raise PolicyFileError(str(err)) from None
    except ValueError as err:
        raise PolicyFileError(f"{path_text(path)}: {err}") from None


@functools.lru_cache(maxsize=8)
def _cached(path: str, kind: PolicyKind, stamp: tuple[int, ...]) -> Scorer:
    return load_policy(path, kind)


def policy_at(path: str, kind: PolicyKind = QUEUE) -> Scorer:
    """`load_policy`, read once per version of the file (profiles name the same file many times);
    a FIFO or device once per process: reading it changes its times, and a second read would
    wait for a writer that has gone."""
    try:
        found = os.stat(path)
    except OSError as err:
        raise PolicyFileError(f"{path_text(path)}: cannot read: {err.strerror or err}") from None
    except ValueError:  # a NUL byte in the name
        raise PolicyFileError(f"{path_text(path)}: not a file name (it holds a NUL byte)") from None
    if not stat.S_ISREG(found.st_mode):
        return _cached(path, kind, (found.st_dev, found.st_ino))
    return _cached(path, kind, (found.st_dev, found.st_ino, found.st_mtime_ns, found.st_ctime_ns, found.st_size))
