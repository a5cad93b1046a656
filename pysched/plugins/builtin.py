"""Built-in profiles shipped with the package."""

from __future__ import annotations

from importlib import resources

from pysched.api.inputs import parse_yaml
from pysched.framework.config import SchedulerConfig, parse_config
from pysched.framework.registry import Registry

SOURCE = "<built-in profiles>"


def builtin_config(registry: Registry) -> SchedulerConfig:
    """Every built-in profile, each validated on its own.

    They are alternative policies (the simulator runs one at a time) and do not share a queueSort
    plugin; a process running several profiles together must pick ones that do, as a profile file
    must (`parse_config` checks it).
    """
    data = parse_yaml(resources.files(__package__).joinpath("builtin.yaml").read_text(), SOURCE)
    profiles = tuple(
        parse_config({"profiles": [raw]}, f"{SOURCE} profiles[{i}]", registry).profiles[0]
        for i, raw in enumerate(data["profiles"])
    )
    return SchedulerConfig(profiles, SOURCE)
