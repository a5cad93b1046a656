"""What a pod and a node are: ids, quantities and requests, PodInfo/NodeInfo, the pysched.io/* contract."""
