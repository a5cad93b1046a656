"""The package as it is shipped: regular packages only, every plugin folder registered and
documented, and a wheel that carries the package's data but not the plugin tests."""

import importlib
import pkgutil
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import pysched.plugins
from pysched.plugins import default_registry

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "pysched" / "plugins"


def test_every_folder_with_modules_is_a_package() -> None:
    """A folder of modules without __init__.py works from the source tree but is silently left
    out of `pip install .`."""
    missing = [
        str(folder.relative_to(ROOT))
        for folder in (ROOT / "pysched").rglob("*")
        if folder.is_dir()
        and "__pycache__" not in folder.parts
        and any(folder.glob("*.py"))
        and not (folder / "__init__.py").exists()
    ]
    assert missing == []
    assert not (ROOT / "plugins").exists()  # plugins live in pysched/plugins only


def test_every_plugin_folder_is_registered_documented_and_tested() -> None:
    folders = [m.name for m in pkgutil.iter_modules(pysched.plugins.__path__) if m.ispkg]
    assert len(folders) >= 12
    registered: set[str] = set()
    for name in folders:
        module = importlib.import_module(f"pysched.plugins.{name}")
        specs = getattr(module, "SPECS", None) or (module.SPEC,)
        registered |= {spec.name for spec in specs}
        assert (PLUGINS / name / "README.md").is_file(), name
        assert list((PLUGINS / name / "tests").glob("test_*.py")), name
        if len(specs) == 1:  # a folder of one plugin is named after it
            assert name.replace("_", "") == specs[0].name.lower(), (name, specs[0].name)
    assert registered == set(default_registry().names())


@pytest.mark.skipif(sys.platform != "linux", reason="builds the wheel with pip")
def test_the_wheel_builds_without_warnings_and_ships_data_and_readmes_but_no_plugin_tests(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: building in the clone would leave build/ and egg-info there
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "pysched", source / "pysched", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(tmp_path),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # What `pip install .` shows a newcomer: a warning of the build backend (setuptools' on a data
    # folder it takes for an undeclared package, or on a deprecated licence table) prints as a
    # block of "!!" banners.
    printed = built.stdout + built.stderr
    assert not re.search(r"\w+Warning: ", printed), printed
    (wheel,) = tmp_path.glob("pysched-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if "/tests/" in n or Path(n).name.startswith("test_")]
    for needed in (
        "pysched/py.typed",
        "pysched/plugins/builtin.yaml",
        "pysched/plugins/autoscale/README.md",
        "pysched/plugins/node_resources/README.md",
        "pysched/workload/catalogue.yaml",
        "pysched/workload/data/resnet50.csv",
        "pysched/plugins/node_resources/reference.py",
        "pysched/plugins/learned_queue_sort/policy.json",
        "pysched/learn/ordering.py",
    ):
        assert needed in names, needed
    assert not [n for n in names if "__pycache__" in n or n.endswith((".nbi", ".nbc"))]
