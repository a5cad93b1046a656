"""Registry of plugin factories: name -> how to build the plugin from its typed args."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pysched.api.inputs import out_of_range
from pysched.api.limits import clip
from pysched.framework.interfaces import Handle, Plugin

A = TypeVar("A")


class ArgsError(ValueError):
    """Plugin args that do not fit the plugin's args type: names the field and what is accepted."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def camel_case(name: str) -> str:
    """An args field's name as profiles write it: `interval_seconds` -> `intervalSeconds`."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


_INT64 = 2**63
MAX_ARGS_SECONDS = 366 * 86_400.0  # the longest duration an arg may name (a cooldown, a restart cost)


def check_range(args: object, name: str, low: float, high: float, *, above: bool = False, below: bool = False) -> None:
    """ArgsError (camelCase key, the accepted range) unless `low <= args.name <= high`; `above`
    and `below` make the bounds strict. NaN is never in range."""
    problem = out_of_range(getattr(args, name), low, high, above=above, below=below)
    if problem is not None:
        raise ArgsError(camel_case(name), problem)


def _accepts(value: object, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(value, arg) for arg in typing.get_args(hint))
    # Numbers are finite and fit an int64 whatever the field: YAML reads `.inf`, `.nan` and
    # 400-digit integers, and no arg means any of them.
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < _INT64
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) < _INT64
    if origin is tuple:
        return isinstance(value, list | tuple)
    if origin in (dict, Mapping):
        return isinstance(value, dict)
    if hint is type(None):
        return value is None
    return isinstance(value, origin or hint)


def _describe(hint: Any) -> str:
    """A field's type in a profile's words: `a map or nothing`, not `dict[str, typing.Any] | None`."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    words = {dict: "a map", Mapping: "a map", tuple: "a list", str: "a string", bool: "true or false"}
    if hint is type(None):
        return "nothing"
    return words.get(origin or hint, getattr(hint, "__name__", str(hint)))


def parse_args(args_type: type[A], raw: Mapping[str, Any] | None) -> A:
    """Build a frozen args dataclass from camelCase YAML keys; unknown keys and wrong types fail.

    The dataclass may define `validate(self) -> None` raising ArgsError for range checks.
    """
    raw = dict(raw or {})
    hints = typing.get_type_hints(args_type)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(args_type):  # type: ignore[arg-type]
        key = camel_case(f.name)
        if key not in raw:
            continue
        value = raw.pop(key)
        if not _accepts(value, hints[f.name]):
            wanted = _describe(hints[f.name])
            if isinstance(value, int | float) and not isinstance(value, bool) and _accepts(1, hints[f.name]):
                wanted = f"a finite {wanted} below 2**63 in size"
            raise ArgsError(key, f"expected {wanted}, got {clip(value)}")
        values[f.name] = tuple(value) if isinstance(value, list) else value
    if raw:
        known = ", ".join(camel_case(f.name) for f in dataclasses.fields(args_type)) or "none"  # type: ignore[arg-type]
        first = next(iter(raw))
        raise ArgsError(
            first if isinstance(first, str) and len(first) <= 40 else clip(first),
            f"unknown argument (accepted: {known})",
        )
    parsed = args_type(**values)
    validate = getattr(parsed, "validate", None)
    if validate is not None:
        validate()
    return parsed


@dataclass(frozen=True, slots=True)
class NoArgs:
    pass


POINT_METHODS: dict[str, str] = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "sort_key",
    "preFilter": "pre_filter",
    "filter": "filter_batch",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score_batch",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
    "reconcile": "reconcile",
}


@dataclass(frozen=True, slots=True)
class PluginSpec(Generic[A]):
    """How to build one plugin: its name, typed args, factory and class (for point checks)."""

    name: str
    args_type: type[A]
    factory: Callable[[A, Handle], Plugin]
    plugin_class: type

    def points(self) -> frozenset[str]:
        return frozenset(p for p, method in POINT_METHODS.items() if callable(getattr(self.plugin_class, method, None)))

    def build(self, raw_args: Mapping[str, Any] | None, handle: Handle) -> Plugin:
        return self.factory(parse_args(self.args_type, raw_args), handle)


class Registry:
    def __init__(self, specs: Iterable[PluginSpec[Any]] = ()) -> None:
        self._specs: dict[str, PluginSpec[Any]] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: PluginSpec[Any]) -> None:
        if spec.name in self._specs:
            raise ValueError(f"plugin {spec.name} registered twice")
        self._specs[spec.name] = spec

    def get(self, name: str) -> PluginSpec[Any] | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def __contains__(self, name: str) -> bool:
        return name in self._specs


__all__ = ["MAX_ARGS_SECONDS", "ArgsError", "NoArgs", "PluginSpec", "Registry", "check_range", "parse_args"]
