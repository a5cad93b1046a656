"""The node table forgets the label values and taint sets of nodes that are gone."""

import numpy as np
import pytest

from pysched.api.builders import make_pod, node_dict
from pysched.api.ids import NodeName
from pysched.api.objects import node_from_dict
from pysched.framework import nodetable
from pysched.framework.masks import affinity_mask, tolerated_mask
from pysched.framework.nodetable import NodeTable

HOSTNAME = "kubernetes.io/hostname"


def _churned(monkeypatch: pytest.MonkeyPatch, nodes: int) -> NodeTable:
    """Two nodes that stay, and `nodes` that come and go one at a time, each with its own
    hostname and a cluster autoscaler's timestamped taint, as a scaled-down node has."""
    monkeypatch.setattr(nodetable, "MIN_COMPACT_AT", 64, raising=False)
    table = NodeTable()
    table.add(node_from_dict(node_dict("stay-a", labels={"zone": "b"}, taints=[{"key": "x", "effect": "NoSchedule"}])))
    table.add(node_from_dict(node_dict("stay-b", labels={"zone": "a"})))
    for i in range(nodes):
        taint = {"key": "ToBeDeletedByClusterAutoscaler", "value": str(1_767_225_600 + i), "effect": "NoSchedule"}
        table.add(node_from_dict(node_dict(f"gone-{i}", labels={"zone": f"z{i}"}, taints=[taint])))
        table.remove(NodeName(f"gone-{i}"))
    table.add(node_from_dict(node_dict("last", labels={"zone": "a"})))
    return table


def test_what_no_node_holds_any_more_is_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    table = _churned(monkeypatch, 1000)
    assert len(table.label_values[HOSTNAME]) <= 2 * 64 + 1
    assert len(table.taint_sets) <= 2 * 64 + 1
    assert len(table.label_values["zone"]) <= 2 * 64 + 1


def test_masks_read_the_same_after_the_values_are_renumbered(monkeypatch: pytest.MonkeyPatch) -> None:
    table = _churned(monkeypatch, 1000)
    rows = {name: table.row[NodeName(name)] for name in ("stay-a", "stay-b", "last")}
    present = table.present[: table.size]

    def hits(mask: np.ndarray) -> set[str]:
        return {name for name, row in rows.items() if mask[row] and present[row]}

    assert hits(affinity_mask(make_pod("p", node_selector={HOSTNAME: "stay-a"}), table)) == {"stay-a"}
    assert hits(affinity_mask(make_pod("p", node_selector={"zone": "a"}), table)) == {"stay-b", "last"}
    assert hits(affinity_mask(make_pod("p", node_selector={"zone": "z3"}), table)) == set()
    assert hits(tolerated_mask(make_pod("p"), table)) == {"stay-b", "last"}
    # Values keep their order: "b" was interned before "a", and still sorts first.
    zone = table.label_values["zone"]
    assert zone["b"] < zone["a"]
