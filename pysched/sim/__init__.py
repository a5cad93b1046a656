"""Trace-driven simulation: the real scheduler against the simulated cluster on virtual time."""
