#!/usr/bin/env bash
# Build the JobSet controller manager (sigs.k8s.io/jobset) from its Go module into a cache
# folder outside the clone; hack/build-control-plane.sh runs it first.
#
#   bash hack/build-jobset.sh          # build (or reuse) and print the bin dir
#
# The cache folder is keyed by the JobSet and Go versions:
#   ${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}/jobset/jobset-vJ_goG/{bin,crds}
# crds/ holds the module's own CRDs, which the test fixtures install. Marker, locking and
# output as build-control-plane.sh (hack/build-lib.sh).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MOD="$HERE/jobset"
NAME=build-jobset
# shellcheck source=build-lib.sh
source "$HERE/build-lib.sh"

JOBSET_VERSION="$(pinned_version "$MOD" sigs.k8s.io/jobset)"
require_go

CACHE_ROOT="${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}"
OUT="$CACHE_ROOT/jobset/jobset-${JOBSET_VERSION}_go${GO_VERSION}"
BINARIES=(jobset-manager)

reuse_if_complete
build_env
build_lock
build_begin

echo "$NAME: building jobset-manager $JOBSET_VERSION (go $GO_VERSION, -p $PAR)" >&2
(cd "$MOD" && "${NICE[@]}" go build -p "$PAR" -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION" \
    -o "$OUT.tmp/bin/jobset-manager" sigs.k8s.io/jobset)

# The CRDs of the version built, from the module's source in the module cache.
CRD_DIR="$(cd "$MOD" && go list -m -f '{{.Dir}}' sigs.k8s.io/jobset)/config/components/crd/bases"
mkdir -p "$OUT.tmp/crds"
cp "$CRD_DIR"/*.yaml "$OUT.tmp/crds/"
chmod -R u+w "$OUT.tmp/crds"  # the module cache is read-only

build_publish "jobset=$JOBSET_VERSION" "go=$GO_VERSION"
