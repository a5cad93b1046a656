"""The live backend: a real kube-apiserver through kubernetes-asyncio."""
