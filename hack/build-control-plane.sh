#!/usr/bin/env bash
# Build the test control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl) from Go modules into a cache folder outside the clone.
#
#   bash hack/build-control-plane.sh          # build (or reuse) and print the bin dir
#
# The cache folder is keyed by the Kubernetes, etcd and Go versions:
#   ${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}/control-plane/k8s-vK_etcd-vE_goG/bin
# It first runs hack/build-jobset.sh (the JobSet controller, a cache folder of its own).
# A `.complete` marker is written last and lists the binaries built
# (`binaries=etcd kube-apiserver ...`); without it, or when it lacks one of
# BINARIES below, the folder is rebuilt, so neither an interrupted build nor a
# build from an older script is mistaken for a finished one (hack/build-lib.sh). The
# last line on stdout is always the bin dir. Progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CP_MOD="$HERE/controlplane"
ETCD_MOD="$HERE/etcd"
NAME=build-control-plane
# shellcheck source=build-lib.sh
source "$HERE/build-lib.sh"

# Versions come from the wrapper modules' go.mod, so they cannot drift.
K8S_VERSION="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$CP_MOD/go.mod")"
ETCD_VERSION="$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$ETCD_MOD/go.mod")"
if [[ -z "$K8S_VERSION" || -z "$ETCD_VERSION" ]]; then
    echo "$NAME: cannot read versions from $CP_MOD/go.mod or $ETCD_MOD/go.mod" >&2
    exit 2
fi
require_go

K8S_MINOR="${K8S_VERSION#v}"; K8S_MINOR="${K8S_MINOR#*.}"; K8S_MINOR="${K8S_MINOR%%.*}"
K8S_MAJOR="${K8S_VERSION#v}"; K8S_MAJOR="${K8S_MAJOR%%.*}"

# The JobSet controller, helm and KWOK first (their own modules and cache folders); their bin dirs go
# to stderr so that this script's last stdout line stays the control plane's.
bash "$HERE/build-jobset.sh" >&2
bash "$HERE/build-helm.sh" >&2
bash "$HERE/build-kwok.sh" >&2

CACHE_ROOT="${PYSCHED_CACHE_DIR:-$HOME/.cache/pysched}"
OUT="$CACHE_ROOT/control-plane/k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_go${GO_VERSION}"

# Every binary this script builds: etcd from its module, the rest from one `go build`.
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
BINARIES=(etcd "${K8S_CMDS[@]}")

reuse_if_complete
build_env
build_lock
build_begin

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

build_publish "kubernetes=$K8S_VERSION" "etcd=$ETCD_VERSION" "go=$GO_VERSION"
