"""pysched: a deadline-aware scheduler and in-place autoscaler for training jobs on Kubernetes."""

__version__ = "0.1.0"
