"""The in-tree plugins, one folder each (the NodeResources family shares one), and their registry."""

from __future__ import annotations

from pysched.framework.registry import Registry


def default_registry() -> Registry:
    """Every in-tree plugin, by NAME."""
    from pysched.plugins import (
        autoscale,
        coscheduling,
        deadline_laxity,
        default_binder,
        default_preemption,
        earliest_deadline,
        elastic_scale,
        image_locality,
        inter_pod_affinity,
        learned_queue_sort,
        node_affinity,
        node_declared_features,
        node_name,
        node_ports,
        node_resources,
        node_unschedulable,
        node_volume_limits,
        pod_topology_spread,
        priority_sort,
        scheduling_gates,
        seed_restart,
        taint_toleration,
        unsupported_fields,
        urgency_placement,
        volume_binding,
        volume_restrictions,
        volume_zone,
    )

    return Registry(
        (
            priority_sort.SPEC,
            scheduling_gates.SPEC,
            coscheduling.SPEC,
            unsupported_fields.SPEC,
            *node_resources.SPECS,
            node_name.SPEC,
            node_unschedulable.SPEC,
            taint_toleration.SPEC,
            node_affinity.SPEC,
            node_ports.SPEC,
            node_declared_features.SPEC,
            image_locality.SPEC,
            inter_pod_affinity.SPEC,
            pod_topology_spread.SPEC,
            urgency_placement.SPEC,
            default_binder.SPEC,
            default_preemption.SPEC,
            earliest_deadline.SPEC,
            seed_restart.SPEC,
            deadline_laxity.SPEC,
            learned_queue_sort.SPEC,
            *autoscale.SPECS,
            elastic_scale.SPEC,
            volume_binding.SPEC,
            volume_zone.SPEC,
            volume_restrictions.SPEC,
            node_volume_limits.SPEC,
        )
    )
