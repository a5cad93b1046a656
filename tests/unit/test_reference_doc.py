"""docs/reference.md names every `pysched.io/` key the code uses, so the reference stays whole."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEY = re.compile(r"pysched\.io/[a-z0-9-]+")
CONDITIONS = {"pysched.io/Deadline", "pysched.io/State"}  # capitalised: not caught by KEY


def test_every_pysched_key_in_the_code_is_in_the_reference() -> None:
    used: set[str] = set()
    for folder in ("pysched", "progress/pysched_progress"):
        for path in (ROOT / folder).rglob("*.py"):
            if "tests" not in path.parts:
                used |= set(KEY.findall(path.read_text(encoding="utf-8")))
    documented = set(KEY.findall((ROOT / "docs" / "reference.md").read_text(encoding="utf-8")))
    assert len(used) >= 20, sorted(used)
    assert used <= documented, sorted(used - documented)
    assert documented <= used, sorted(documented - used)  # nothing documented that is gone
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in reference for name in CONDITIONS)
