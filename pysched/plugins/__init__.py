"""The in-tree plugins, one folder each (the NodeResources family shares one), and their registry."""

from __future__ import annotations

from pysched.framework.registry import Registry


def default_registry() -> Registry:
    """Every in-tree plugin, by NAME."""
    from pysched.plugins import (
        autoscale,
        deadline_laxity,
        default_binder,
        earliest_deadline,
        node_affinity,
        node_name,
        node_resources,
        node_unschedulable,
        pod_topology_spread,
        priority_sort,
        seed_restart,
        taint_toleration,
        urgency_placement,
    )

    return Registry(
        (
            priority_sort.SPEC,
            *node_resources.SPECS,
            node_name.SPEC,
            node_unschedulable.SPEC,
            taint_toleration.SPEC,
            node_affinity.SPEC,
            pod_topology_spread.SPEC,
            urgency_placement.SPEC,
            default_binder.SPEC,
            earliest_deadline.SPEC,
            seed_restart.SPEC,
            deadline_laxity.SPEC,
            autoscale.SPEC,
        )
    )
