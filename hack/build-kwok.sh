#!/usr/bin/env bash
# Build KWOK (sigs.k8s.io/kwok: fake kubelets that keep nodes Ready and play pods' lifecycles)
# from its Go module into a cache folder outside the clone, for the perf harness's KWOK tier
# (`python -m perf run WORKLOAD --kwok`). hack/build-control-plane.sh runs it first.
#
#   bash hack/build-kwok.sh          # build (or reuse) and print the bin dir
#
# The cache folder is keyed by the KWOK and Go versions:
#   ${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}/kwok/kwok-vK_goG/bin
# Beside the binary, bin/stages.yaml: KWOK's own "fast" stage set (node initialize, node
# heartbeat with lease, pod ready, complete and delete) as its module ships it; run standalone,
# KWOK needs its stages given. Marker, locking and output as build-control-plane.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MOD="$HERE/kwok"
NAME=build-kwok
# shellcheck source=build-lib.sh
source "$HERE/build-lib.sh"

KWOK_VERSION="$(pinned_version "$MOD" sigs.k8s.io/kwok)"
require_go

CACHE_ROOT="${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}"
OUT="$CACHE_ROOT/kwok/kwok-${KWOK_VERSION}_go${GO_VERSION}"
BINARIES=(kwok)

reuse_if_complete
build_env
build_lock
build_begin

echo "$NAME: building kwok $KWOK_VERSION (go $GO_VERSION, -p $PAR)" >&2
(cd "$MOD" && "${NICE[@]}" go build -p "$PAR" -trimpath \
    -ldflags "-s -w" \
    -o "$OUT.tmp/bin/kwok" sigs.k8s.io/kwok/cmd/kwok)

SRC="$(cd "$MOD" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
STAGE="$SRC/kustomize/stage"
for f in "$STAGE/node/fast/node-initialize.yaml" "$STAGE/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
         "$STAGE"/pod/fast/pod-*.yaml; do
    [[ -f "$f" ]] || { echo "$NAME: $f not in the module" >&2; exit 1; }
    printf -- '---\n'
    cat "$f"
done > "$OUT.tmp/bin/stages.yaml"

build_publish "kwok=$KWOK_VERSION" "go=$GO_VERSION"
