"""A wheel ships only regular packages: a folder of modules without __init__.py works from the
source tree but is silently left out of `pip install .`."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_folder_with_modules_is_a_package() -> None:
    missing = [
        str(folder.relative_to(ROOT))
        for top in ("pysched",)
        for folder in (ROOT / top).rglob("*")
        if folder.is_dir()
        and "__pycache__" not in folder.parts
        and any(folder.glob("*.py"))
        and not (folder / "__init__.py").exists()
    ]
    assert missing == []
