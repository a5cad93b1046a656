"""The optional extras: what a plain `pip install pysched` runs, and what says which extra it needs.

Each command runs in a fresh interpreter where the extras' packages cannot be imported, as in an
install without them (`sys.modules[name] = None` makes every import of `name` fail)."""

import json
import subprocess
import sys
from pathlib import Path

EXTRAS = ("matplotlib", "kubernetes", "torch", "stable_baselines3", "sb3_contrib")  # [plot], [dev], [learn]

WITHOUT_EXTRAS = f"""
import sys
for name in {EXTRAS!r}:
    sys.modules[name] = None
from pysched.cmd.cli import main
code = main(sys.argv[1:])
leaked = sorted(name for name in sys.modules if name.split(".")[0] in {EXTRAS!r} and sys.modules[name] is not None)
assert not leaked, leaked
sys.exit(code)
"""


def _without_extras(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, *args], capture_output=True, text=True, timeout=300)


def test_simulate_and_status_need_no_extra(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = _without_extras("simulate", "--policy", "default", "--policy", "learned", "--json", str(out))
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["policies"]["default"]["jobs"] > 0
    assert json.loads(out.read_text())["policies"]["learned"]["deadline_met"] > 0  # numpy inference only
    # status reaches for the API with the asyncio client only: an unreachable one is exit 2, not an ImportError
    kubeconfig = tmp_path / "kubeconfig.json"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    result = _without_extras("status", "--kubeconfig", str(kubeconfig))
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_plots_and_the_dev_cluster_name_their_extra_in_one_line(tmp_path: Path) -> None:
    result = _without_extras("simulate", "--policy", "default", "--plot", str(tmp_path / "charts"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "pysched: error: --plot needs matplotlib, in the plot extra: pip install 'pysched[plot]'"
    ]
    assert not (tmp_path / "charts").exists()  # refused before the run

    for command in ("up", "down"):
        result = _without_extras("dev-cluster", command, "--dir", str(tmp_path / "dev"))
        assert result.returncode == 2
        [line] = result.stderr.strip().splitlines()
        assert line.endswith("dev-cluster needs the kubernetes client, in the dev extra: pip install 'pysched[dev]'")


def test_run_and_bench_load_without_the_training_stack() -> None:
    code = (
        "import sys\n"
        "for name in ('torch', 'stable_baselines3', 'sb3_contrib'): sys.modules[name] = None\n"
        "import pysched.cmd.run, pysched.cmd.bench, pysched.learn, pysched.learn.ordering, pysched.learn.evaluate\n"
        "from pysched.cmd.cli import build_parser\n"
        "build_parser()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_training_names_its_extra_in_one_line(tmp_path: Path) -> None:
    result = _without_extras("learn", "train", "--steps", "10", "--out", str(tmp_path / "p.json"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "pysched learn: error: pysched learn train needs sb3-contrib and torch, in the learn extra: "
        "pip install 'pysched[learn]'"
    ]
    assert not (tmp_path / "p.json").exists()
