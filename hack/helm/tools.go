//go:build tools

// Pins the helm CLI module so that `go mod tidy` keeps it; see hack/build-helm.sh.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
