//go:build tools

// Package tools pins the commands that hack/build-control-plane.sh builds.
// The build tag keeps this file out of every build; it only exists so that
// `go mod tidy` records the dependencies of these main packages.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
