import numpy as np

from pysched.api.builders import make_node, make_pod
from pysched.api.features import EVERY_POD, NO_FEATURES
from pysched.api.objects import PodInfo, Taint, Toleration
from pysched.framework.cycle_state import CycleState
from pysched.framework.nodetable import NodeTable
from pysched.framework.status import Code
from pysched.plugins.taint_toleration import TaintToleration


def _table() -> NodeTable:
    table = NodeTable()
    table.add(make_node("plain"))
    table.add(make_node("gpu", taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]))
    table.add(make_node("drain", taints=[{"key": "maint", "value": "", "effect": "NoExecute"}]))
    table.add(make_node("soft", taints=[{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]))
    return table


def test_toleration_semantics_match_kubernetes() -> None:
    taint = Taint("gpu", "a100", "NoSchedule")
    assert Toleration("gpu", "Equal", "a100", "NoSchedule").tolerates(taint)
    assert Toleration("gpu", "Equal", "a100", "").tolerates(taint)  # empty effect matches all
    assert not Toleration("gpu", "Equal", "v100", "NoSchedule").tolerates(taint)
    assert Toleration("gpu", "Exists", "", "NoSchedule").tolerates(taint)
    assert Toleration("", "Exists", "", "").tolerates(taint)  # tolerates everything
    assert not Toleration("gpu", "Exists", "", "NoExecute").tolerates(taint)
    assert not Toleration("gpu", "Gt", "1", "").tolerates(taint)  # unknown operator


def test_filter_rejects_untolerated_noschedule_and_noexecute_only() -> None:
    table = _table()
    plugin = TaintToleration()
    result = plugin.filter_batch(CycleState(), make_pod("p"), table)
    assert list(result.feasible) == [True, False, False, True]  # PreferNoSchedule does not filter
    assert result.unresolvable
    assert list(result.reasons["node(s) had untolerated taint(s)"]) == [False, True, True, False]
    gpu_pod = make_pod("g", tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    np.testing.assert_array_equal(plugin.node_mask(gpu_pod, table), [True, True, False, True])


def test_score_prefers_nodes_without_intolerable_prefer_no_schedule_taints() -> None:
    table = _table()
    plugin = TaintToleration()
    pod = make_pod("p")
    feasible = np.ones(4, np.bool_)
    scores = plugin.score_batch(CycleState(), pod, table, feasible)
    plugin.normalize_scores(CycleState(), pod, scores, feasible)
    assert list(scores) == [100, 100, 100, 0]
    tolerant = make_pod("t", tolerations=[{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}])
    scores = plugin.score_batch(CycleState(), tolerant, table, feasible)
    plugin.normalize_scores(CycleState(), tolerant, scores, feasible)
    assert list(scores) == [100, 100, 100, 100]


def test_pre_score_skips_unless_a_node_has_an_untolerated_prefer_no_schedule_taint() -> None:
    """Skipping keeps plain clusters on the kernel's incremental selection; it must never skip
    where the score would tell nodes apart."""
    plugin = TaintToleration()
    plain = NodeTable()
    plain.add(make_node("a", taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]))
    plain.add(make_node("b"))
    feasible = np.ones(2, np.bool_)
    assert plugin.pre_score(CycleState(), make_pod("p"), plain, feasible).code is Code.SKIP
    table = _table()
    rows = np.ones(table.size, np.bool_)
    assert plugin.pre_score(CycleState(), make_pod("p"), table, rows).ok
    tolerant = make_pod("t", tolerations=[{"operator": "Exists", "effect": "PreferNoSchedule"}])
    assert plugin.pre_score(CycleState(), tolerant, table, rows).code is Code.SKIP


def test_pre_score_memo_follows_taint_changes() -> None:
    """The answer is kept per tolerations, but never past a taint change of the node table:
    it stays that of a plugin with no memo."""
    plugin = TaintToleration()
    table = NodeTable()
    table.add(make_node("a"))
    pod = make_pod("p")

    def check(p: PodInfo, nodes: NodeTable) -> Code:
        rows = np.ones(nodes.size, np.bool_)
        code = plugin.pre_score(CycleState(), p, nodes, rows).code
        assert code is TaintToleration().pre_score(CycleState(), p, nodes, rows).code
        return code

    assert check(pod, table) is Code.SKIP
    table.update(make_node("a", taints=[{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]))
    assert check(pod, table) is Code.SUCCESS
    table.update(make_node("a", taints=[{"key": "spot", "value": "no", "effect": "NoSchedule"}]))
    check(pod, table)
    plain = NodeTable()  # another table, with its own answer
    plain.add(make_node("b"))
    assert check(pod, plain) is Code.SKIP
    for i in range(1100):  # bounded
        tolerant = make_pod(f"t{i}", tolerations=[{"key": f"k{i}", "operator": "Exists"}])
        assert check(tolerant, table) is Code.SUCCESS
    assert len(plugin._memo) <= 1024


def test_its_score_acts_only_while_a_live_node_has_a_prefer_no_schedule_taint() -> None:
    table = NodeTable()
    plugin = TaintToleration(nodes=table)
    table.add(make_node("a", taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]))
    assert plugin.acts_on() == NO_FEATURES
    table.update(make_node("a", taints=[{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]))
    assert plugin.acts_on() == EVERY_POD
    table.update(make_node("a"))  # the interned set stays, but no live node holds it
    assert plugin.acts_on() == NO_FEATURES
