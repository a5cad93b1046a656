"""Built-in profiles shipped with the package."""

from __future__ import annotations

from importlib import resources

import yaml

from pysched.framework.config import SchedulerConfig, parse_config
from pysched.framework.registry import Registry


def builtin_config(registry: Registry) -> SchedulerConfig:
    text = resources.files(__package__).joinpath("builtin.yaml").read_text()
    return parse_config(yaml.safe_load(text), "<built-in profiles>", registry)
