"""The NodeResources family: NodeResourcesFit, LeastAllocated, MostAllocated, BalancedAllocation."""

from __future__ import annotations

from pysched.plugins.node_resources import balanced_allocation, fit, least_allocated, most_allocated

SPECS = (fit.SPEC, least_allocated.SPEC, most_allocated.SPEC, balanced_allocation.SPEC)
