//go:build tools

// Pins the KWOK module so that `go mod tidy` keeps it; see hack/build-kwok.sh.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
