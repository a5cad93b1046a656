"""The engine: the scheduler loop, the profile runtime, the kernel, the cache and the queue."""
