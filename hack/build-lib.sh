# Shared by hack/build-*.sh (sourced, not run). The caller sets NAME (for messages), calls
# require_go (sets GO_VERSION), sets OUT (the cache folder) and BINARIES (what it builds), then:
#   reuse_if_complete; build_env; build_lock; build_begin; <go build into $OUT.tmp/bin>; build_publish KEY=VALUE...
# A `.complete` marker is written last and lists the binaries built (`binaries=...`); without it,
# or when it lacks one of BINARIES, the folder is rebuilt, so neither an interrupted build nor a
# build from an older script is mistaken for a finished one. The last line on stdout is the bin dir.

# The local Go (no toolchain download), its version without the "go" prefix in GO_VERSION.
require_go() {
    if ! command -v go >/dev/null 2>&1; then
        echo "$NAME: 'go' not found on PATH (Go >= 1.26 is needed)" >&2
        exit 2
    fi
    export GOTOOLCHAIN=local
    GO_VERSION="$(go env GOVERSION)"          # e.g. go1.26.8
    GO_VERSION="${GO_VERSION#go}"
}

# True when the marker exists, names every binary in BINARIES and each is in place.
build_complete() {
    BIN="$OUT/bin"
    MARKER="$OUT/.complete"
    [[ -f "$MARKER" ]] || return 1
    local listed b
    listed=" $(awk -F= '$1 == "binaries" {print $2}' "$MARKER") "
    for b in "${BINARIES[@]}"; do
        [[ "$listed" == *" $b "* && -x "$BIN/$b" ]] || return 1
    done
}

reuse_if_complete() {
    if build_complete; then
        echo "$NAME: ${1:-cached, skipping build} ($OUT)" >&2
        echo "$BIN"
        exit 0
    fi
}

# Parallelism: default 2 packages at once (2-core CI box); override with GO_BUILD_P.
# Static binaries, read-only module mode with the committed go.sum, no VCS stamping.
build_env() {
    PAR="${GO_BUILD_P:-2}"
    NICE=(nice -n "${BUILD_NICE:-10}")
    export CGO_ENABLED=0
    export GOFLAGS="-mod=readonly -buildvcs=false"
}

# One build at a time per cache folder (a second caller waits, then reuses).
build_lock() {
    mkdir -p "$(dirname "$OUT")"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$OUT.lock"
        flock 9
        reuse_if_complete "built by another process"
    fi
}

build_begin() {
    rm -rf "$OUT.tmp"
    mkdir -p "$OUT.tmp/bin"
    BUILD_START=$(date +%s)
    BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}

# Check every binary was produced, move the finished tree into place (two renames, so a process
# starting from the previous build meanwhile finds its binaries), then write the marker: the
# arguments (KEY=VALUE lines), then binaries=, built= and seconds=.
build_publish() {
    local b line
    for b in "${BINARIES[@]}"; do
        if [[ ! -x "$OUT.tmp/bin/$b" ]]; then
            echo "$NAME: $b was not produced" >&2
            exit 1
        fi
    done
    rm -rf "$OUT.old"
    if [[ -e "$OUT" ]]; then mv "$OUT" "$OUT.old"; fi
    mv "$OUT.tmp" "$OUT"
    rm -rf "$OUT.old"
    {
        for line in "$@"; do echo "$line"; done
        echo "binaries=${BINARIES[*]}"
        echo "built=$BUILD_DATE"
        echo "seconds=$(( $(date +%s) - BUILD_START ))"
    } > "$MARKER.tmp"
    mv "$MARKER.tmp" "$MARKER"
    echo "$NAME: done in $(( $(date +%s) - BUILD_START ))s" >&2
    echo "$BIN"
}

# The version a wrapper module requires of MODULE (its go.mod's `require MODULE vX`), so that a
# build cannot drift from the module it pins: `pinned_version DIR MODULE`; exits 2 when absent.
pinned_version() {
    local version
    version="$(awk -v m="$2" '$1 == "require" && $2 == m {print $3}' "$1/go.mod")"
    if [[ -z "$version" ]]; then
        echo "$NAME: cannot read the $2 version from $1/go.mod" >&2
        exit 2
    fi
    echo "$version"
}
