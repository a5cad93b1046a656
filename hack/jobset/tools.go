//go:build tools

// Package tools pins the JobSet controller manager (the root package of
// sigs.k8s.io/jobset is its main) built by hack/build-jobset.sh.
package tools

import (
	_ "sigs.k8s.io/jobset"
)
