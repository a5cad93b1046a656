"""The A100 throughput tables the built-in catalogue reads (see README.md here); data only."""
