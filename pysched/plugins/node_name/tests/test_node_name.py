from pysched.api.builders import make_node, make_pod
from pysched.framework.cycle_state import CycleState
from pysched.framework.nodetable import NodeTable
from pysched.plugins.node_name import REASON, NodeName


def test_only_the_named_node_fits() -> None:
    table = NodeTable()
    for name in ("a", "b", "c"):
        table.add(make_node(name))
    plugin = NodeName()
    assert list(plugin.node_mask(make_pod("free"), table)) == [True, True, True]
    result = plugin.filter_batch(CycleState(), make_pod("pinned", node_name="b"), table)
    assert list(result.feasible) == [False, True, False]
    assert result.unresolvable and list(result.reasons[REASON]) == [True, False, True]
    assert not plugin.node_mask(make_pod("ghost", node_name="zzz"), table).any()
