"""A short soak of `pysched run` (the code of `perf/soak.py`, smaller and faster): after 40 s of
churn, with training jobs resized in place, and every pod finished and deleted, nothing is left
in the scheduler's queues, cache, informer store, Permit waits, event backlog or Autoscale's
per-job state, and its RSS stayed near what it was after the warm-up."""

from __future__ import annotations

import pytest

from pysched.testing.soak import QUEUES, Soak, SoakConfig, Workload

pytestmark = pytest.mark.integration

NODES = 50
RATE = 10.0  # pods/s: ~100 pods alive on 50 nodes of 8 CPUs
CHURN_SECONDS = 40.0
CONFIG = SoakConfig(
    nodes=NODES,
    churn_seconds=CHURN_SECONDS,
    interval=5.0,
    workload=Workload(
        rate=RATE, run_seconds=(2.0, 8.0), training_share=0.25, training_steps=(20, 35), deadline_share=(0.6, 0.8)
    ),
    progress_interval=2.0,
    autoscale={"intervalSeconds": 2, "cooldownSeconds": 4},
    drain_timeout=60.0,
    settle_timeout=20.0,
)
# RSS may grow after the warm-up by allocator slack and first-time paths (a resize, a relist), not
# by churn: 10% plus 10 MB. Leaked pods show in the counts exactly; this catches gross growth only.
RSS_SLACK_SHARE, RSS_SLACK_MB = 0.10, 10.0


def test_churn_leaves_nothing_behind(control_plane_bin_dir: str) -> None:  # the fixture skips without binaries
    with Soak(CONFIG) as soak:  # its own control plane: the cache counts only this test's pods
        result = soak.run()
    churn = [s for s in result.samples if s.phase == "churn"]
    final = result.drained
    assert not result.errors, result.errors[:5]
    # The churn really ran: pods created near the rate, bound, resized in place, held in the cache.
    assert final.created >= 0.8 * RATE * CHURN_SECONDS, final
    assert final.bound == final.created == final.deleted, final
    assert final.rescales > 0, "Autoscale resized no training job"
    assert max(s.cache_pods for s in churn) >= 20 and max(s.informer_pods for s in churn) >= 20, churn
    # Everything finished and was deleted: nothing is left over.
    assert final.alive == 0, final
    assert {name: final.queues[name] for name in QUEUES} == dict.fromkeys(QUEUES, 0), final
    assert (final.cache_pods, final.cache_assumed, final.informer_pods) == (0, 0, 0), final
    assert final.cache_nodes == NODES, final
    assert (final.waiting, final.event_backlog, final.events_dropped) == (0, 0, 0), final
    assert final.autoscale_jobs == 0, final
    assert result.settled
    bound = result.warm.rss_mb * (1 + RSS_SLACK_SHARE) + RSS_SLACK_MB
    assert final.rss_mb <= bound, f"RSS {result.warm.rss_mb} MB after warm-up, {final.rss_mb} MB at the end"
