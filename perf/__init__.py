"""pysched's benchmarks: `python -m perf run WORKLOAD` (the harness in perf/harness/) and the scripts
beside it (see perf/README.md)."""
