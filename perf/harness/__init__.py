"""The live and simulated throughput harness, in the spirit of kube-scheduler's scheduler_perf:
declarative workloads (perf/workloads/*.yaml), the same pods bound by pysched, by the stock
kube-scheduler and by a binder with no scheduling logic (the API's own ceiling), round by round."""
