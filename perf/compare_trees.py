"""Side by side: `pysched bench` from several source trees (checkouts of other commits), one
interpreter for all, rounds alternating (A B C A B C) so that the machine's drift hits each
alike; medians and the median of the per-round ratios against the first tree.

    git worktree add /tmp/lay 0e2e3fb
    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install /tmp/lay   # the dependencies, not editable
    /tmp/venv/bin/python perf/compare_trees.py --tree old=installed --tree head=. \\
        --tree head-unsettled=.:unsettled --rounds 10

A tree is NAME=PATH, run through PYTHONPATH (PATH and PATH/progress), or NAME=installed: the
tree installed in the interpreter (trees before the layout kept their plugins outside the
package, so they run only installed). `:unsettled` runs a tree with `settle=False` where its
bench has the option. Each round is a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# One bench in a fresh process: whichever module the tree keeps its bench in.
ENTRY = """
import asyncio, inspect, json, sys
try:
    from pysched.cmd.bench import run_bench
except ImportError:
    from pysched.bench import run_bench
options = {"settle": False} if sys.argv[3] == "unsettled" else {}
if "settle" not in inspect.signature(run_bench).parameters:
    options = {}
r = asyncio.run(run_bench(int(sys.argv[1]), int(sys.argv[2]), **options))
print(json.dumps({"pods_per_second": r.pods_per_second, "p50_ms": r.p50_ms, "scheduled": r.scheduled}))
"""


def _tree(text: str) -> tuple[str, Path | None, str]:
    name, _, rest = text.partition("=")
    path, _, mode = rest.partition(":")
    if not name or not path or mode not in ("", "unsettled") or not (path == "installed" or Path(path).is_dir()):
        raise argparse.ArgumentTypeError(f"expected NAME=PATH[:unsettled] or NAME=installed, got {text!r}")
    return name, None if path == "installed" else Path(path).resolve(), mode


def _one(python: str, path: Path | None, mode: str, nodes: int, pods: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (path, path / "progress") if p.is_dir())
    done = subprocess.run(
        [python, "-c", ENTRY, str(nodes), str(pods), mode or "settled"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd="/",  # no tree on the path by accident
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _failed(name: str, err: subprocess.CalledProcessError) -> int:
    tail = (err.stderr or "").strip().splitlines()[-1:] or ["no output"]
    print(f"compare_trees: error: the bench of {name} failed: {tail[0]}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--tree", type=_tree, action="append", required=True, help="NAME=PATH[:unsettled] or NAME=installed"
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--python", default=sys.executable, help="the one interpreter (default: this one)")
    args = parser.parse_args(argv)
    names = [name for name, _, _ in args.tree]
    if len(set(names)) != len(names) or not 1 <= args.rounds <= 1000:
        parser.error("tree names must differ; --rounds 1 to 1000")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for n in range(args.rounds):
        for name, path, mode in args.tree:
            try:
                runs[name].append(_one(args.python, path, mode, args.nodes, args.pods))
            except subprocess.CalledProcessError as err:
                return _failed(name, err)
            print(f"round {n + 1} {name}: {runs[name][-1]['pods_per_second']:.0f} pods/s", file=sys.stderr)
    first = args.tree[0][0]
    print("| tree | pods/s (median) | p50 cycle (median) | / " + first + " (median of pair ratios, range) |")
    print("|---|---|---|---|")
    for name, rounds in runs.items():
        rates = [r["pods_per_second"] for r in rounds]
        ratios = [a / b for a, b in zip(rates, (r["pods_per_second"] for r in runs[first]), strict=True)]
        versus = "" if name == first else f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        p50 = statistics.median(r["p50_ms"] for r in rounds)
        print(f"| {name} | {statistics.median(rates):,.0f} | {p50:.4f} ms | {versus} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
