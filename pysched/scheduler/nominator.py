"""The engine's side of preemption: nominated pods' held room and dry runs on one node.

A preemptor nominated to a node has its requests counted there (`Cache.hold`) until it binds,
is deleted or loses its nomination, so pods of its priority or lower scheduled meanwhile do not
take the room its victims leave. Its own scheduling cycle releases the hold first and takes it
again if the pod still does not fit; the cycle of a pod of higher priority lifts it for its length
(kube-scheduler's filters add only nominated pods of equal or higher priority), so such a pod may
take that room, and the nominated pod finds out in its next cycle. Scores run with every hold
lifted (`without_others`), as kube scores without nominated pods. Dry runs take pods off a node in
the cache itself (placement notices included, so plugins that count pods per node see the node as
it would be) and put them back exactly.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

from pysched.api.ids import NodeName, PodKey
from pysched.api.objects import PodInfo
from pysched.framework.cycle_state import CycleState
from pysched.scheduler.algorithm import SchedulingAlgorithm
from pysched.scheduler.cache import Cache


class _NodeDryRun:
    def __init__(self, cache: Cache, algorithm: SchedulingAlgorithm, state: CycleState, pod: PodInfo, row: int) -> None:
        self._cache = cache
        self._algorithm = algorithm
        self._state = state
        self._pod = pod
        self._row = row
        self._lifted: dict[PodKey, object] = {}

    def remove(self, pod: PodInfo) -> None:
        if pod.key in self._lifted:
            return
        token = self._cache.lift(pod.key)
        if token is not None:
            self._lifted[pod.key] = token

    def add(self, pod: PodInfo) -> None:
        token = self._lifted.pop(pod.key, None)
        if token is not None:
            self._cache.put_back(token)

    def fits(self) -> bool:
        return self._algorithm.fits_on_row(self._state, self._pod, self._row)

    def refusal(self) -> tuple[str, ...]:
        return self._algorithm.refusal_on_row(self._state, self._pod, self._row)

    def close(self) -> None:
        for token in self._lifted.values():
            self._cache.put_back(token)
        self._lifted.clear()


class Nominator:
    """Implements `framework.preemption.PreemptionEngine` for every profile of one scheduler."""

    def __init__(self, cache: Cache, algorithm_of: Callable[[str], SchedulingAlgorithm | None]) -> None:
        self._cache = cache
        self._algorithm_of = algorithm_of
        self._nominated: dict[PodKey, tuple[NodeName, PodInfo]] = {}
        self._priorities: collections.Counter[int] = collections.Counter()  # of the nominated pods
        self._lifted_now: set[PodKey] = set()  # nominations lifted for the cycle under way (`lift_below`)
        # The same dict, read-only: the engine tests membership before calling in (most pods have
        # no nomination, and a call per cycle point is most of what they would cost).
        self.holding: Mapping[PodKey, tuple[NodeName, PodInfo]] = self._nominated

    def dry_run(self, state: CycleState, pod: PodInfo, row: int) -> _NodeDryRun:
        algorithm = self._algorithm_of(pod.scheduler_name)
        assert algorithm is not None, "a dry run for a pod of a profile this scheduler runs"
        return _NodeDryRun(self._cache, algorithm, state, pod, row)

    def nominate(self, pod: PodInfo, node: NodeName | None) -> None:
        current = self._nominated.get(pod.key)
        if current is not None and current[0] == node:
            return
        self.drop(pod.key)
        # An assumed pod (waiting at Permit, or in PreBind, with its nominatedNodeName written)
        # is placed, not nominated: kube's nominator leaves it out too, so it may be a victim.
        if node is not None and self._cache.hold(pod, node):
            self._nominated[pod.key] = (node, pod)
            self._priorities[pod.priority] += 1

    def nominated(self, key: PodKey) -> NodeName | None:
        found = self._nominated.get(key)
        return None if found is None else found[0]

    def nominated_on(self, node: NodeName) -> Sequence[PodInfo]:
        return [pod for where, pod in self._nominated.values() if where == node]

    # ----- `algorithm.HeldNominations`: the filters' pass without nominated pods
    def held_besides(self, key: PodKey) -> bool:
        return len(self._nominated) - (key in self._nominated) - len(self._lifted_now) > 0

    @contextlib.contextmanager
    def without_others(self, key: PodKey) -> Iterator[None]:
        lifted = []
        try:
            for other in self._nominated:
                if other != key and self._cache.is_nominated(other):
                    token = self._cache.lift(other)
                    if token is not None:
                        lifted.append(token)
            yield
        finally:
            for token in lifted:
                self._cache.put_back(token)

    def drop(self, key: PodKey) -> None:
        """The pod bound, was deleted or lost its nomination."""
        found = self._nominated.pop(key, None)
        if found is not None:
            self._forget_priority(found[1])
            self._lifted_now.discard(key)
            self._cache.release(key)

    # ----- around the nominated pod's own scheduling cycle
    def release_for_cycle(self, key: PodKey) -> None:
        if key in self._nominated:
            self._cache.release(key)

    def lift_below(self, pod: PodInfo) -> list[tuple[PodKey, NodeName, object]]:
        """Lift the held room of the pods nominated with a lower priority than `pod` for its
        cycle; `put_back_lifted` takes it again."""
        lifted: list[tuple[PodKey, NodeName, object]] = []
        if not any(priority < pod.priority for priority in self._priorities):
            return lifted  # the usual case: nothing nominated below it (few priorities, many pods)
        for other, (node, nominated) in self._nominated.items():
            if nominated.priority < pod.priority and other != pod.key and self._cache.is_nominated(other):
                token = self._cache.lift(other)
                if token is not None:
                    lifted.append((other, node, token))
        self._lifted_now = {key for key, _, _ in lifted}
        return lifted

    def put_back_lifted(self, lifted: Sequence[tuple[PodKey, NodeName, object]]) -> None:
        """Hold again what `lift_below` lifted, but for the nominations the cycle dropped (its
        preemption clears lower ones on the node it chose). The room may be taken now: the
        node then counts more than it has for the pods of that priority or lower, as kube's
        filters see it, until the nominated pod's next cycle."""
        self._lifted_now = set()
        for key, node, token in lifted:
            found = self._nominated.get(key)
            if found is not None and found[0] == node and self._cache.pod_node(key) is None:
                self._cache.put_back(token)

    def _forget_priority(self, pod: PodInfo) -> None:
        self._priorities[pod.priority] -= 1
        if self._priorities[pod.priority] <= 0:
            del self._priorities[pod.priority]

    def hold_after_failure(self, key: PodKey) -> None:
        found = self._nominated.get(key)
        if found is not None and not self._cache.is_nominated(key) and self._cache.pod_node(key) is None:
            node, pod = found
            if not self._cache.hold(pod, node):
                del self._nominated[key]
                self._forget_priority(pod)
