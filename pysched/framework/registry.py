"""Registry of plugin factories: name -> how to build the plugin from its typed args."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

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


def _accepts(value: object, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(value, arg) for arg in typing.get_args(hint))
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is tuple:
        return isinstance(value, list | tuple)
    if origin in (dict, Mapping):
        return isinstance(value, dict)
    if hint is type(None):
        return value is None
    return isinstance(value, origin or hint)


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
            raise ArgsError(key, f"expected {getattr(hints[f.name], '__name__', hints[f.name])}, got {value!r}")
        values[f.name] = tuple(value) if isinstance(value, list) else value
    if raw:
        known = ", ".join(camel_case(f.name) for f in dataclasses.fields(args_type)) or "none"  # type: ignore[arg-type]
        raise ArgsError(next(iter(raw)), f"unknown argument (accepted: {known})")
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


__all__ = ["ArgsError", "NoArgs", "PluginSpec", "Registry", "parse_args"]
