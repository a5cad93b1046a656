#!/usr/bin/env bash
# Build the test control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl) from Go modules into a cache folder outside the clone.
#
#   bash hack/build-control-plane.sh          # build (or reuse) and print the bin dir
#
# The cache folder is keyed by the Kubernetes, etcd and Go versions:
#   ${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}/control-plane/k8s-vK_etcd-vE_goG/bin
# A `.complete` marker is written last and lists the binaries built
# (`binaries=etcd kube-apiserver ...`); without it, or when it lacks one of
# BINARIES below, the folder is rebuilt, so neither an interrupted build nor a
# build from an older script is mistaken for a finished one. The last line on
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

# Every binary this script builds: etcd from its module, the rest from one `go build`.
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
BINARIES=(etcd "${K8S_CMDS[@]}")

# True when the marker exists, names every binary in BINARIES and each is in place.
complete() {
    [[ -f "$MARKER" ]] || return 1
    local listed b
    listed=" $(awk -F= '$1 == "binaries" {print $2}' "$MARKER") "
    for b in "${BINARIES[@]}"; do
        [[ "$listed" == *" $b "* && -x "$BIN/$b" ]] || return 1
    done
}

if complete; then
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
    if complete; then
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

echo "build-control-plane: building ${K8S_CMDS[*]} $K8S_VERSION" >&2
(cd "$CP_MOD" && "${NICE[@]}" go build -p "$PAR" -trimpath -ldflags "$K8S_LDFLAGS" \
    -o "$OUT.tmp/bin/" \
    "${K8S_CMDS[@]/#/k8s.io/kubernetes/cmd/}")

for b in "${BINARIES[@]}"; do
    if [[ ! -x "$OUT.tmp/bin/$b" ]]; then
        echo "build-control-plane: $b was not produced" >&2
        exit 1
    fi
done

# Publish: move the finished tree into place (two renames, so a plane starting from the
# previous build meanwhile finds its binaries), then write the marker.
rm -rf "$OUT.old"
if [[ -e "$OUT" ]]; then mv "$OUT" "$OUT.old"; fi
mv "$OUT.tmp" "$OUT"
rm -rf "$OUT.old"
{
    echo "kubernetes=$K8S_VERSION"
    echo "etcd=$ETCD_VERSION"
    echo "go=$GO_VERSION"
    echo "binaries=${BINARIES[*]}"
    echo "built=$BUILD_DATE"
    echo "seconds=$(( $(date +%s) - start ))"
} > "$MARKER.tmp"
mv "$MARKER.tmp" "$MARKER"
echo "build-control-plane: done in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
