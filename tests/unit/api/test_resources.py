from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pytest

from pysched.api.resources import (
    QuantityError,
    format_resource,
    parse_quantity,
    pod_nonzero_requests,
    pod_requests,
    to_scheduler_units,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        ("2Gi", Decimal(2 * 1024**3)),
        ("1e3", Decimal(1000)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("100n", Decimal("1e-7")),
        ("3Ki", Decimal(3072)),
        ("+2", Decimal(2)),
        (".5", Decimal("0.5")),
        ("1E2", Decimal(100)),
    ],
)
def test_every_kubernetes_quantity_form(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi", "1Gib", "--1", "1ee3"])
def test_malformed_quantities_are_rejected_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(QuantityError, match="Kubernetes quantity"):
        parse_quantity(text)


def test_cpu_rounds_up_to_millicores_like_milli_value() -> None:
    assert to_scheduler_units("cpu", "1.5") == 1500
    assert to_scheduler_units("cpu", "100u") == 1  # 0.1 millicore rounds up
    assert to_scheduler_units("memory", "1.5Ki") == 1536
    assert to_scheduler_units("memory", "100m") == 1


def _pod(spec: Mapping[str, Any], status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": spec, "status": status or {}}


def _c(name: str, cpu: str | None = None, memory: str | None = None, **extra: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return {"name": name, "resources": {"requests": requests}, **extra}


def test_containers_sum_and_init_containers_take_the_max() -> None:
    spec = {"containers": [_c("a", "1", "1Gi"), _c("b", "500m", "1Gi")], "initContainers": [_c("i", "3", "512Mi")]}
    assert pod_requests(_pod(spec)) == {"cpu": 3000, "memory": 2 * 1024**3}


def test_sidecars_add_to_containers_and_to_later_init_containers() -> None:
    spec = {
        "containers": [_c("main", "1")],
        "initContainers": [_c("sidecar", "500m", restartPolicy="Always"), _c("setup", "2")],
    }
    # regular: 1 + 0.5 sidecar = 1.5; init peak: sidecar 0.5 + setup 2 = 2.5
    assert pod_requests(_pod(spec))["cpu"] == 2500


def test_overhead_is_added_and_pod_level_resources_win() -> None:
    spec = {"containers": [_c("main", "1", "1Gi")], "overhead": {"cpu": "250m"}}
    assert pod_requests(_pod(spec))["cpu"] == 1250
    spec_pod_level = {"containers": [_c("main", "1", "1Gi")], "resources": {"requests": {"cpu": "4"}}}
    assert pod_requests(_pod(spec_pod_level)) == {"cpu": 4000, "memory": 1024**3}


def test_extended_resources_are_counted() -> None:
    spec = {"containers": [{"name": "m", "resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "1"}}}]}
    assert pod_requests(_pod(spec)) == {"cpu": 1000, "nvidia.com/gpu": 2}


def test_resize_in_progress_counts_the_largest_of_desired_allocated_and_actual() -> None:
    spec = {"containers": [_c("main", "1")]}
    status = {
        "containerStatuses": [
            {"name": "main", "allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "2"}}}
        ]
    }
    assert pod_requests(_pod(spec, status))["cpu"] == 3000
    spec_up = {"containers": [_c("main", "6")]}
    assert pod_requests(_pod(spec_up, status))["cpu"] == 6000


def test_infeasible_resize_does_not_count_the_desired_size() -> None:
    spec = {"containers": [_c("main", "64")]}
    status = {
        "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
        "containerStatuses": [
            {"name": "main", "allocatedResources": {"cpu": "2"}, "resources": {"requests": {"cpu": "2"}}}
        ],
    }
    assert pod_requests(_pod(spec, status))["cpu"] == 2000


def test_a_sidecar_or_the_pod_level_resources_shrinking_count_their_old_size_until_actuated() -> None:
    """As kube-scheduler v1.36: a sidecar is resized in place like a container, and pod-level
    resources too (InPlacePodLevelResourcesVerticalScaling, beta and on): while the kubelet has
    not shrunk them, the node still gives them their old size."""
    sidecar = {"containers": [_c("main", "1")], "initContainers": [_c("proxy", "1", restartPolicy="Always")]}
    running = {"name": "proxy", "allocatedResources": {"cpu": "2"}, "resources": {"requests": {"cpu": "2"}}}
    assert pod_requests(_pod(sidecar, {"initContainerStatuses": [running]}))["cpu"] == 3000
    assert pod_requests(_pod(sidecar))["cpu"] == 2000  # no status yet: as desired
    pod_level = {"containers": [_c("main", "1")], "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
    status = {"resources": {"requests": {"cpu": "3", "memory": "1Gi"}}, "allocatedResources": {"cpu": "3"}}
    assert pod_requests(_pod(pod_level, status)) == {"cpu": 3000, "memory": 1024**3}
    infeasible = {**status, "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]}
    grown = {"containers": [_c("main", "1")], "resources": {"requests": {"cpu": "64", "memory": "1Gi"}}}
    assert pod_requests(_pod(grown, infeasible))["cpu"] == 3000  # refused for good: not the 64 asked
    # The pod's own status counts its overhead, which is added once.
    with_overhead = {**pod_level, "overhead": {"cpu": "1"}}
    settled = {"resources": {"requests": {"cpu": "3", "memory": "1Gi"}}, "allocatedResources": {"cpu": "3"}}
    assert pod_requests(_pod(with_overhead, settled))["cpu"] == 3000  # 2 + 1, not 3 + 1


def test_scoring_stand_ins_fill_each_container_that_leaves_cpu_or_memory_out() -> None:
    """kube's NonMissingContainerRequests: 100m and 200Mi per container that omits the name, none
    for one that asks for 0; None where that is what the pod's totals give anyway."""
    mi = 1024**2

    def nonzero(spec: dict[str, Any]) -> tuple[int, int] | None:
        return pod_nonzero_requests(_pod(spec), pod_requests(_pod(spec)))

    assert nonzero({"containers": [_c(f"c{i}") for i in range(4)]}) == (400, 800 * mi)
    assert nonzero({"containers": [_c("c", "1"), _c("d", memory="1Gi")]}) == (1100, 1024 * mi + 200 * mi)
    zero = {"name": "z", "resources": {"requests": {"cpu": "0", "memory": "0"}}}
    assert nonzero({"containers": [zero]}) == (0, 0)
    assert nonzero({"containers": [_c("c")]}) is None  # one container: the pod's stand-ins are its own
    assert nonzero({"containers": [_c("c", "1", "1Gi")]}) is None
    with_init = {"containers": [_c("c", "1", "1Gi")], "initContainers": [_c("i", memory="2Gi")]}
    assert nonzero(with_init) is None  # the init container's 100m stand-in is below the 1 CPU running after it


def test_format_resource_round_trips_common_values() -> None:
    assert format_resource("cpu", 1500) == "1500m"
    assert format_resource("cpu", 2000) == "2"
    assert format_resource("memory", 2 * 1024**3) == "2Gi"
