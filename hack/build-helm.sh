#!/usr/bin/env bash
# Build the helm CLI (helm.sh/helm/v4) from its Go module into a cache folder outside the clone,
# for the chart check of the test command (helm lint and helm template; the rendered objects are
# applied with --dry-run=server). hack/build-control-plane.sh runs it first.
#
#   bash hack/build-helm.sh          # build (or reuse) and print the bin dir
#
# The cache folder is keyed by the helm and Go versions:
#   ${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}/helm/helm-vH_goG/bin
# Marker, locking and output as build-control-plane.sh (hack/build-lib.sh).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MOD="$HERE/helm"
NAME=build-helm
# shellcheck source=build-lib.sh
source "$HERE/build-lib.sh"

HELM_VERSION="$(pinned_version "$MOD" helm.sh/helm/v4)"
require_go

CACHE_ROOT="${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}"
OUT="$CACHE_ROOT/helm/helm-${HELM_VERSION}_go${GO_VERSION}"
BINARIES=(helm)

reuse_if_complete
build_env
build_lock
build_begin

echo "$NAME: building helm $HELM_VERSION (go $GO_VERSION, -p $PAR)" >&2
(cd "$MOD" && "${NICE[@]}" go build -p "$PAR" -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    -o "$OUT.tmp/bin/helm" helm.sh/helm/v4/cmd/helm)

build_publish "helm=$HELM_VERSION" "go=$GO_VERSION"
