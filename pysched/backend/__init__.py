"""Cluster backends: `simulated` (in memory, virtual clock) and `live` (kube-apiserver)."""
