"""Built-in profiles shipped with the package."""

from __future__ import annotations

from importlib import resources
from typing import Any

from pysched.api.inputs import parse_yaml
from pysched.framework.config import SchedulerConfig, parse_config
from pysched.framework.registry import Registry

SOURCE = "<built-in profiles>"


def builtin_profiles() -> list[dict[str, Any]]:
    """The built-in profiles as written (anchors expanded), for callers that derive a variant."""
    data = parse_yaml(resources.files(__package__).joinpath("builtin.yaml").read_text(), SOURCE)
    profiles: list[dict[str, Any]] = data["profiles"]
    return profiles


def builtin_config(registry: Registry) -> SchedulerConfig:
    """Every built-in profile, each validated on its own.

    They are alternative policies (the simulator runs one at a time) and do not share a queueSort
    plugin; a process running several profiles together must pick ones that do, as a profile file
    must (`parse_config` checks it).
    """
    profiles = tuple(
        parse_config({"profiles": [raw]}, f"{SOURCE} profiles[{i}]", registry).profiles[0]
        for i, raw in enumerate(builtin_profiles())
    )
    return SchedulerConfig(profiles, SOURCE)
