"""The model catalogue: named training models and the hidden truth each simulated job draws.

Built-ins live in `catalogue.yaml` beside this module; a user catalogue (same shape) adds or
replaces models. Reading a catalogue is I/O (bounded, `api.inputs`): problems raise CatalogueError
with the file and key.
"""

from __future__ import annotations

import csv
import functools
import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pysched.api.inputs import InputError, brief, key_text, load_yaml, parse_yaml, read_text, whole_number
from pysched.api.limits import MAX_STEPS, clip
from pysched.workload.speed import Amdahl, Throughput

MAX_STEP_SECONDS = 86_400.0  # a model's t1, seconds per step on one CPU
MAX_MODEL_NUMBER = 2**31  # a batch size, a p_max, a GPU count in a table
_KEYS = {"cpu": ("kind", "steps", "batch_size", "t1", "f", "p_max"), "gpu": ("kind", "table", "steps")}


class CatalogueError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class CpuModel:
    name: str
    steps: int
    batch_size: int
    t1: float
    f: float
    p_max: int

    def truth(self, rng: random.Random, batch_size: int | None = None) -> Amdahl:
        """One job's own truth around the model (the per-job draws of docs/architecture.md, "Simulation")."""
        t1 = self.t1 * rng.uniform(0.75, 1.25)
        f = min(self.f * rng.uniform(0.5, 1.5), 1.0)
        p_max = max(1, round(self.p_max * rng.uniform(0.5, 1.5)))
        return Amdahl.from_t1(t1, f, p_max)

    @property
    def mean(self) -> Amdahl:
        return Amdahl.from_t1(self.t1, self.f, self.p_max)


@dataclass(frozen=True, slots=True)
class GpuModel:
    name: str
    steps: int
    tables: Mapping[int, Throughput]  # global batch size -> table

    @property
    def default_batch(self) -> int:
        return min(self.tables)

    def truth(self, rng: random.Random, batch_size: int | None = None) -> Throughput:
        """The measured table of the batch size (the smallest measured one when not given).

        Raises KeyError for a batch size that was not measured."""
        return self.tables[self.default_batch if batch_size is None else batch_size]


Model = CpuModel | GpuModel


@dataclass(frozen=True, slots=True)
class Catalogue:
    models: Mapping[str, Model]

    def get(self, name: str) -> Model | None:
        return self.models.get(name)

    def names(self, kind: type[CpuModel] | type[GpuModel] | None = None) -> list[str]:
        return sorted(n for n, m in self.models.items() if kind is None or isinstance(m, kind))

    def merged(self, other: Catalogue) -> Catalogue:
        return Catalogue({**self.models, **other.models})


def read_table(text: str, where: str) -> dict[int, Throughput]:
    """An A100-style CSV: `global_batch_size,1,2,4,...`; empty or zero cells are not offered."""
    try:
        rows = list(csv.reader(text.splitlines()))
    except csv.Error as err:
        raise CatalogueError(f"{where}: not a throughput table: {err}") from None
    if len(rows) < 2:
        raise CatalogueError(f"{where}: a header and at least one row are required")
    try:
        counts = _gpu_counts(rows[0][1:])
        tables: dict[int, Throughput] = {}
        lines: dict[int, int] = {}  # batch size -> its line
        for line, row in enumerate(rows[1:], start=2):
            if not row:
                continue
            if len(row) > len(rows[0]):  # a short row's missing cells are counts not offered
                raise ValueError(f"line {line} has {len(row)} cells, more than the header's {len(rows[0])}")
            batch = _table_int(row[0])
            if batch in lines:  # the later would silently replace the earlier
                raise ValueError(f"line {line}: batch size {batch} repeats line {lines[batch]}")
            lines[batch] = line
            points = [(g, _rate(v)) for g, v in zip(counts, row[1:], strict=False) if v.strip() and _rate(v) > 0]
            tables[batch] = Throughput(tuple(g for g, _ in points), tuple(r for _, r in points))
    except ValueError as err:
        raise CatalogueError(f"{where}: not a throughput table: {brief(err)}") from None
    if not tables:  # blank lines only under the header
        raise CatalogueError(f"{where}: a header and at least one row are required")
    return tables


def _gpu_counts(header: list[str]) -> list[int]:
    """The header's GPU counts, which must ascend: rates are read between neighbouring counts."""
    counts = [_table_int(c) for c in header]
    if any(a >= b for a, b in itertools.pairwise(counts)):
        raise ValueError(f"the header's GPU counts must ascend, each once, got {clip(', '.join(header))}")
    return counts


def _table_int(text: str) -> int:
    value = whole_number(text, MAX_MODEL_NUMBER)
    if not value:
        raise ValueError(f"{clip(text)} is not an integer from 1 to {MAX_MODEL_NUMBER}")
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1e9:  # iterations a second; NaN and inf are out
        raise ValueError(f"{clip(text)} is not a rate from 0 to 1e9")
    return value


def _number(raw: Mapping[str, Any], key: str, where: str, kind: type[int] | type[float], maximum: float) -> Any:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= maximum:
        raise CatalogueError(f"{where}.{key}: must be a number above 0 and at most {maximum:g}, got {clip(value)}")
    if kind is int and value != int(value):
        raise CatalogueError(f"{where}.{key}: must be an integer, got {clip(value)}")
    return kind(value)


def parse_catalogue(data: Any, source: str, read: Any) -> Catalogue:
    """`read(path)` returns the text of a table file named relative to the catalogue."""
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise CatalogueError(f"{source}: models: a mapping of model name to model is required")
    if (unknown := _unknown_key(data, ("models",))) is not None:  # a misspelt key would be dropped silently
        raise CatalogueError(f"{source}: {unknown}: unknown key (accepted: models)")
    models: dict[str, Model] = {}
    for name, raw in data["models"].items():
        if not isinstance(name, str) or not 0 < len(name) <= 253:
            raise CatalogueError(
                f"{source}: models: a model name must be a string of 1 to 253 characters, got {clip(name)}"
            )
        where = f"{source}: models.{name}"
        if not isinstance(raw, dict):
            raise CatalogueError(f"{where}: must be a mapping")
        kind = raw.get("kind")
        if not isinstance(kind, str) or kind not in _KEYS:
            raise CatalogueError(f"{where}.kind: must be cpu or gpu, got {clip(kind)}")
        if (unknown := _unknown_key(raw, _KEYS[kind])) is not None:
            raise CatalogueError(f"{where}.{unknown}: unknown key (accepted for kind {kind}: {', '.join(_KEYS[kind])})")
        if kind == "cpu":
            models[name] = CpuModel(
                name,
                _number(raw, "steps", where, int, MAX_STEPS),
                _number(raw, "batch_size", where, int, MAX_MODEL_NUMBER) if "batch_size" in raw else 0,
                _number(raw, "t1", where, float, MAX_STEP_SECONDS),
                _number(raw, "f", where, float, 1.0),  # the serial fraction
                _number(raw, "p_max", where, int, MAX_MODEL_NUMBER),
            )
        else:
            table = raw.get("table")
            if not isinstance(table, str):
                raise CatalogueError(f"{where}.table: a CSV file of iterations/s by batch size and GPU count")
            try:
                text = read(table)
            except InputError as err:
                raise CatalogueError(f"{where}.table: {err}") from None
            tables = read_table(text, f"{where}.table")
            steps = _number(raw, "steps", where, int, MAX_STEPS) if "steps" in raw else 10_000
            models[name] = GpuModel(name, steps, tables)
    return Catalogue(models)


def _unknown_key(raw: Mapping[Any, Any], accepted: tuple[str, ...]) -> str | None:
    """The first of `raw`'s keys not accepted, as a field path writes it; None when all are."""
    return min((key_text(key) for key in raw if key not in accepted), default=None)


@functools.cache
def builtin_catalogue() -> Catalogue:
    """Read once per process (a learning environment starts an episode every few hundred
    decisions); its models and tables are immutable, so every caller may share it."""
    root = resources.files(__package__)
    data = parse_yaml(root.joinpath("catalogue.yaml").read_text(), "<built-in catalogue>")
    models = parse_catalogue(data, "<built-in catalogue>", lambda p: root.joinpath(p).read_text()).models
    return Catalogue(MappingProxyType({n: _frozen(m) for n, m in models.items()}))


def _frozen(model: Model) -> Model:
    if isinstance(model, GpuModel):
        return GpuModel(model.name, model.steps, MappingProxyType(dict(model.tables)))
    return model


def load_catalogue(path: str | Path) -> Catalogue:
    """A user catalogue merged over the built-ins."""
    file = Path(path)
    try:
        data = load_yaml(file)
    except InputError as err:
        raise CatalogueError(str(err)) from None
    return builtin_catalogue().merged(parse_catalogue(data, str(path), lambda p: read_text(file.parent / str(p))))
