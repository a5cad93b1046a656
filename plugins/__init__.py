"""In-tree plugins, installed as `pysched.plugins` (one folder each)."""

from __future__ import annotations

from pysched.framework.registry import Registry


def default_registry() -> Registry:
    """Every in-tree plugin, by NAME."""
    from pysched.plugins import (
        autoscale,
        balanced_allocation,
        deadline_laxity,
        default_binder,
        edf,
        least_allocated,
        most_allocated,
        node_affinity,
        node_name,
        node_resources_fit,
        node_unschedulable,
        priority_sort,
        seed,
        taint_toleration,
        urgency_placement,
    )

    return Registry(
        m.SPEC
        for m in (
            priority_sort,
            node_resources_fit,
            node_name,
            node_unschedulable,
            taint_toleration,
            node_affinity,
            least_allocated,
            most_allocated,
            balanced_allocation,
            urgency_placement,
            default_binder,
            edf,
            seed,
            deadline_laxity,
            autoscale,
        )
    )
