"""The `pysched` command and what only the command needs (run, dev-cluster, bench, ops server, metrics)."""
