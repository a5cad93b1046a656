from pysched.api.builders import make_node, make_pod
from pysched.framework.cycle_state import CycleState
from pysched.framework.nodetable import NodeTable
from pysched.plugins.node_unschedulable import NodeUnschedulable


def test_cordoned_nodes_take_only_pods_tolerating_the_unschedulable_taint() -> None:
    table = NodeTable()
    table.add(make_node("ok"))
    table.add(make_node("cordoned", unschedulable=True))
    plugin = NodeUnschedulable()
    result = plugin.filter_batch(CycleState(), make_pod("p"), table)
    assert list(result.feasible) == [True, False]
    assert result.unresolvable and list(result.reasons["node(s) were unschedulable"]) == [False, True]
    tolerant = make_pod(
        "t", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    )
    assert list(plugin.node_mask(tolerant, table)) == [True, True]


def test_uncordon_is_seen_after_a_node_update() -> None:
    table = NodeTable()
    table.add(make_node("n", unschedulable=True))
    before = table.generation
    table.update(make_node("n"))
    assert table.generation > before
    assert list(NodeUnschedulable().node_mask(make_pod("p"), table)) == [True]
