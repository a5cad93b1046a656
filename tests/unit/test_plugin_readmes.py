"""Every plugin README's profile snippet loads: a whole profile file as it is, a `plugins:` fragment
inside a profile that adds only what it leaves out (a queue sort, a binder)."""

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from pysched.deadline.scorer import ALLOCATION, dump_policy
from pysched.framework.config import parse_config
from pysched.plugins import default_registry
from pysched.plugins.learned_queue_sort import BUILTIN_PATH

PLUGINS = Path(__file__).resolve().parents[2] / "pysched" / "plugins"
SNIPPET = re.compile(r"```yaml\n(.*?)```", re.DOTALL)
SNIPPETS = [
    (readme, text) for readme in sorted(PLUGINS.glob("*/README.md")) for text in SNIPPET.findall(readme.read_text())
]


def _profile_file(document: dict[str, Any]) -> dict[str, Any]:
    if "profiles" in document:
        return document
    plugins = dict(document.get("plugins") or {})
    plugins.setdefault("queueSort", [{"name": "PrioritySort"}])
    plugins.setdefault("bind", [{"name": "DefaultBinder"}])
    profile = {"schedulerName": "snippet", "plugins": plugins, "pluginConfig": document.get("pluginConfig") or []}
    return {"profiles": [profile]}


def test_every_plugin_readme_has_a_snippet() -> None:
    assert {readme.parent.name for readme, _ in SNIPPETS} == {
        p.name for p in PLUGINS.iterdir() if (p / "README.md").is_file()
    }


@pytest.mark.parametrize(
    ("readme", "text"), SNIPPETS, ids=[f"{r.parent.name}-{i}" for i, (r, _) in enumerate(SNIPPETS)]
)
def test_a_readme_snippet_loads_as_a_profile(readme: Path, text: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    width = len(ALLOCATION.features)
    layers = [
        (rng.normal(size=(8, width)), rng.normal(size=8)),
        (rng.normal(size=(ALLOCATION.outputs, 8)), np.zeros(3)),
    ]
    allocation = tmp_path / "allocation.json"
    allocation.write_text(dump_policy(layers, "tanh", 16, {}, kind=ALLOCATION))
    # The snippets name files of a deployment; here the shipped policy and a small allocation one.
    text = text.replace("/etc/pysched/policy.json", str(BUILTIN_PATH)).replace(
        "/etc/pysched/allocation.json", str(allocation)
    )
    config = parse_config(_profile_file(yaml.safe_load(text)), str(readme), default_registry())
    assert config.profiles
