#!/usr/bin/env bash
# mypy over the package as it is installed: `plugins/` is the `pysched.plugins` package
# (setup.py's package-dir mapping), which mypy cannot map by itself. A tree of symlinks in
# build/typecheck gives it the installed layout; tests are checked against the same tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tree="$root/build/typecheck"
rm -rf "$tree"
mkdir -p "$tree/pysched"
for entry in "$root"/pysched/*; do
  ln -s "$entry" "$tree/pysched/"
done
ln -s "$root/plugins" "$tree/pysched/plugins"
ln -s "$root/tests" "$tree/tests"
cd "$tree"
exec "${MYPY:-mypy}" --config-file "$root/pyproject.toml" --cache-dir "$root/build/mypy-cache" pysched tests "$@"
