//go:build tools

// Package tools pins the etcd command (the root package of
// go.etcd.io/etcd/server/v3 is etcd's main) built by hack/build-control-plane.sh.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
