#!/usr/bin/env bash
# Build the test control plane (etcd, kube-apiserver, kube-scheduler, kubectl)
# from Go modules into a cache folder outside the clone.
#
#   bash hack/build-control-plane.sh          # build (or reuse) and print the bin dir
#
# The cache folder is keyed by the Kubernetes, etcd and Go versions:
#   ${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}/control-plane/k8s-vK_etcd-vE_goG/bin
# A `.complete` marker is written last; without it the folder is rebuilt, so an
# interrupted build is never mistaken for a finished one. The last line on
# stdout is always the bin dir. Progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CP_MOD="$HERE/controlplane"
ETCD_MOD="$HERE/etcd"

# Versions come from the wrapper modules' go.mod, so they cannot drift.
K8S_VERSION="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$CP_MOD/go.mod")"
ETCD_VERSION="$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$ETCD_MOD/go.mod")"
if [[ -z "$K8S_VERSION" || -z "$ETCD_VERSION" ]]; then
    echo "build-control-plane: cannot read versions from $CP_MOD/go.mod or $ETCD_MOD/go.mod" >&2
    exit 2
fi
if ! command -v go >/dev/null 2>&1; then
    echo "build-control-plane: 'go' not found on PATH (Go >= 1.26 is needed)" >&2
    exit 2
fi
export GOTOOLCHAIN=local
GO_VERSION="$(go env GOVERSION)"          # e.g. go1.26.8
GO_VERSION="${GO_VERSION#go}"

K8S_MINOR="${K8S_VERSION#v}"; K8S_MINOR="${K8S_MINOR#*.}"; K8S_MINOR="${K8S_MINOR%%.*}"
K8S_MAJOR="${K8S_VERSION#v}"; K8S_MAJOR="${K8S_MAJOR%%.*}"

CACHE_ROOT="${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}"
OUT="$CACHE_ROOT/control-plane/k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_go${GO_VERSION}"
BIN="$OUT/bin"
MARKER="$OUT/.complete"

if [[ -f "$MARKER" ]]; then
    echo "build-control-plane: cached, skipping build ($OUT)" >&2
    echo "$BIN"
    exit 0
fi

# Parallelism: default 2 packages at once (2-core CI box); override with GO_BUILD_P.
PAR="${GO_BUILD_P:-2}"
NICE=(nice -n "${BUILD_NICE:-10}")

export CGO_ENABLED=0
# Read-only module mode with the committed go.sum; no VCS stamping.
export GOFLAGS="-mod=readonly -buildvcs=false"

# One build at a time per cache folder (a second caller waits, then reuses).
mkdir -p "$(dirname "$OUT")"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$OUT.lock"
    flock 9
    if [[ -f "$MARKER" ]]; then
        echo "build-control-plane: built by another process ($OUT)" >&2
        echo "$BIN"
        exit 0
    fi
fi

rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp/bin"
start=$(date +%s)

BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
VPKG="k8s.io/component-base/version"
K8S_LDFLAGS="-s -w \
 -X $VPKG.gitVersion=$K8S_VERSION \
 -X $VPKG.gitMajor=$K8S_MAJOR \
 -X $VPKG.gitMinor=$K8S_MINOR \
 -X $VPKG.gitTreeState=clean \
 -X $VPKG.gitCommit=0000000000000000000000000000000000000000 \
 -X $VPKG.buildDate=$BUILD_DATE \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=$K8S_MAJOR \
 -X k8s.io/client-go/pkg/version.gitMinor=$K8S_MINOR \
 -X k8s.io/client-go/pkg/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.buildDate=$BUILD_DATE"

echo "build-control-plane: building etcd $ETCD_VERSION (go $GO_VERSION, -p $PAR)" >&2
(cd "$ETCD_MOD" && "${NICE[@]}" go build -p "$PAR" -trimpath -ldflags "-s -w" \
    -o "$OUT.tmp/bin/etcd" go.etcd.io/etcd/server/v3)

echo "build-control-plane: building kube-apiserver, kube-scheduler, kubectl $K8S_VERSION" >&2
(cd "$CP_MOD" && "${NICE[@]}" go build -p "$PAR" -trimpath -ldflags "$K8S_LDFLAGS" \
    -o "$OUT.tmp/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl)

for b in etcd kube-apiserver kube-scheduler kubectl; do
    if [[ ! -x "$OUT.tmp/bin/$b" ]]; then
        echo "build-control-plane: $b was not produced" >&2
        exit 1
    fi
done

# Publish atomically: move the finished tree into place, then write the marker.
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
{
    echo "kubernetes=$K8S_VERSION"
    echo "etcd=$ETCD_VERSION"
    echo "go=$GO_VERSION"
    echo "built=$BUILD_DATE"
    echo "seconds=$(( $(date +%s) - start ))"
} > "$MARKER.tmp"
mv "$MARKER.tmp" "$MARKER"
echo "build-control-plane: done in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
