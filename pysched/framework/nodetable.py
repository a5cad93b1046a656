"""The plugin-visible node view: nodes as numpy struct-of-arrays, one row per node.

Filters and scores read these arrays in batch; the engine's cache updates them in place (assume,
confirm, forget, informer events), and the change log lets score caches rescore only the rows that
changed. Everything about the array layout lives here: the fixed resource columns, the pod-count
column, the score scale and the array aliases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pysched.api.ids import NodeName
from pysched.api.objects import NodeInfo, Taint
from pysched.api.resources import GPU, PODS, ResourceNames, nonzero_requests

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
Bools = npt.NDArray[np.bool_]

POD_COLUMN = 2  # index of "pods" in ResourceNames' fixed prefix
MIN_COMPACT_AT = 4096  # interned label values and taint sets kept before unused ones are dropped
MAX_NODE_SCORE = 100  # kube-scheduler's framework.MaxNodeScore

# A pod's score shape: (nz cpu, nz memory, cpu, memory), followed by (gpu, gpu column or -1,
# score class) when the profile has a fused term that reads the pod's class.
ScoreShape = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RequestShape:
    """A pod request in array form. Shared by every pod with the same request: never modify."""

    key: tuple[tuple[str, object], ...]  # the requests, and the scoring CPU and memory where they differ
    vector: I64  # per resource column
    columns: I64  # the columns the fit check reads (the pod count is always checked)
    charge: I64  # what placing the pod adds to its node's row: the vector plus one pod
    nonzero: I64  # cpu and memory as scoring counts them (defaults for zero)
    score_shape: ScoreShape  # what the fused scores read: nz cpu, nz memory, cpu, memory
    # What UrgencyPlacement adds to the score shape, with the pod's score class after it: gpu and
    # the gpu column (-1 when the pod requests no GPU). Kept apart so that profiles without that
    # term do not split their cached score arrays by GPU count.
    gpu_shape: tuple[int, int]


class NodeTable:
    """Per-node arrays, one row per node; rows of deleted nodes are reused.

    `generation` changes whenever anything a node mask depends on (labels, taints,
    unschedulable, the set of nodes) changes, so masks can be cached per pod signature; also when
    the first node reports images or the last stops (plugin gates read it).
    """

    def __init__(self, rows: int = 64) -> None:
        self.resources = ResourceNames()
        self.column: dict[str, int] = {n: i for i, n in enumerate(self.resources.names)}
        self.size = 0  # rows in use, deleted ones included
        self.count = 0  # live nodes
        self.generation = 0
        self.names: list[NodeName | None] = []
        self.infos: list[NodeInfo | None] = []
        self.row: dict[NodeName, int] = {}
        self._free: list[int] = []
        r = len(self.resources.names)
        self.capacity: I64 = np.zeros((rows, r), np.int64)
        self.allocatable: I64 = np.zeros((rows, r), np.int64)
        self.requested: I64 = np.zeros((rows, r), np.int64)
        self.nonzero_requested: I64 = np.zeros((rows, 2), np.int64)
        self.present: Bools = np.zeros(rows, np.bool_)
        self.unschedulable: Bools = np.zeros(rows, np.bool_)
        self.taint_set: I32 = np.zeros(rows, np.int32)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_set_ids: dict[tuple[Taint, ...], int] = {(): 0}
        self.labels: dict[str, I32] = {}  # label key -> value id per row, -1 when absent
        self.label_values: dict[str, dict[str, int]] = {}
        # Label values and taint sets interned (every node ever seen would keep its hostname and a
        # cluster autoscaler's timestamped taint): `_forget_unused` drops those no node holds
        # once their number has grown past this.
        self._interned = 1
        self._compact_at = MIN_COMPACT_AT
        # Rows whose resources changed, in order: lets score caches rescore only those rows.
        self._changes: I64 = np.empty(1 << 16, np.int64)
        self._change_count = 0
        self._log_base = 0
        self._request_memo: dict[tuple[tuple[str, object], ...], RequestShape] = {}
        # Image name (as nodes report it) -> rows holding it, and its size as first reported
        # (kube-scheduler's image states). Written only for nodes that report images.
        self.image_rows: dict[str, dict[int, None]] = {}
        self.image_size: dict[str, int] = {}

    # ----- change log
    @property
    def change_seq(self) -> int:
        return self._log_base + self._change_count

    def touch(self, row: int) -> None:
        if self._change_count == self._changes.shape[0]:
            # Start a new page: readers older than it recompute in full.
            self._log_base += self._change_count
            self._change_count = 0
        self._changes[self._change_count] = row
        self._change_count += 1

    def changed_since(self, seq: int, limit: int | None = None) -> I64 | None:
        """Rows changed after `seq` (repeats possible; a view, read it at once), or None when that
        history is gone or longer than `limit` (default: half the rows), so that recomputing
        everything is cheaper."""
        start = seq - self._log_base
        if start < 0 or self.change_seq - seq > (self.size // 2 if limit is None else limit):
            return None
        return self._changes[start : self._change_count]

    # ----- one node's room
    def allocatable_and_free(self, node: NodeName | None, resource: str) -> tuple[int, int]:
        """(allocatable, allocatable minus what its pods request) of `resource` on `node`, in
        scheduler units; (0, 0) for a node or a resource the table does not know."""
        row = self.row.get(node) if node is not None else None
        column = self.column.get(resource)
        if row is None or column is None:
            return 0, 0
        allocatable = int(self.allocatable[row, column])
        return allocatable, allocatable - int(self.requested[row, column])

    # ----- label lookups for the mask filters (views, no copies)
    def label_column(self, key: str) -> I32:
        column = self.labels.get(key)
        if column is None:
            return np.full(self.size, -1, np.int32)
        return column[: self.size]

    def label_value_id(self, key: str, value: str) -> int:
        return self.label_values.get(key, {}).get(value, -2)  # -2 matches no row

    # ----- growth
    def _ensure_rows(self, rows: int) -> None:
        capacity = len(self.present)
        if rows <= capacity:
            return
        new = max(rows, capacity * 2)

        def grow(a: npt.NDArray[np.generic], fill: object = 0) -> npt.NDArray[np.generic]:
            out = np.full((new, *a.shape[1:]), fill, a.dtype)
            out[:capacity] = a
            return out

        self.capacity = grow(self.capacity)  # type: ignore[assignment]
        self.allocatable = grow(self.allocatable)  # type: ignore[assignment]
        self.requested = grow(self.requested)  # type: ignore[assignment]
        self.nonzero_requested = grow(self.nonzero_requested)  # type: ignore[assignment]
        self.present = grow(self.present, False)  # type: ignore[assignment]
        self.unschedulable = grow(self.unschedulable, False)  # type: ignore[assignment]
        self.taint_set = grow(self.taint_set)  # type: ignore[assignment]
        for key, column in self.labels.items():
            self.labels[key] = grow(column, -1)  # type: ignore[assignment]

    def ensure_resources(self, names: Mapping[str, int]) -> None:
        """Add columns for resource names seen for the first time (rare: a new device plugin)."""
        if self.column.keys() >= names.keys():
            return
        widened = self.resources.with_names(names)
        if widened is self.resources:
            return
        extra = len(widened.names) - len(self.resources.names)
        self.resources = widened
        self._request_memo.clear()
        self.column = {n: i for i, n in enumerate(widened.names)}
        pad = np.zeros((len(self.present), extra), np.int64)
        self.capacity = np.hstack([self.capacity, pad])
        self.allocatable = np.hstack([self.allocatable, pad])
        self.requested = np.hstack([self.requested, pad])

    def vector(self, requests: Mapping[str, int]) -> I64:
        """A request as a row of the resource columns (shared between equal requests: do not modify)."""
        return self.request_shape(requests).vector

    def request_shape(self, requests: Mapping[str, int], nonzero: tuple[int, int] | None = None) -> RequestShape:
        """Everything the cycle derives from a request, built once per distinct request; `nonzero`:
        the pod's scoring CPU and memory where they are not `nonzero_requests(requests)`."""
        key = tuple(requests.items()) if nonzero is None else (*requests.items(), ("", nonzero))
        found = self._request_memo.get(key)
        if found is None:
            self.ensure_resources(requests)
            vector = np.zeros(len(self.resources.names), np.int64)
            for name, value in requests.items():
                vector[self.column[name]] = value
            charge = vector.copy()
            charge[POD_COLUMN] += 1
            nz_cpu, nz_mem = nonzero_requests(requests) if nonzero is None else nonzero
            gpu = requests.get(GPU, 0)
            if len(self._request_memo) >= 4096:
                self._request_memo.clear()
            found = self._request_memo[key] = RequestShape(
                key=key,
                vector=vector,
                columns=np.array([self.column[n] for n, v in requests.items() if v and n != PODS], np.int64),
                charge=charge,
                nonzero=np.array([nz_cpu, nz_mem], np.int64),
                score_shape=(nz_cpu, nz_mem, int(vector[0]), int(vector[1])),
                gpu_shape=(gpu, self.column[GPU] if gpu else -1),
            )
        return found

    # ----- node events
    def _intern_taints(self, taints: tuple[Taint, ...]) -> int:
        key = tuple(sorted(taints, key=lambda t: (t.key, t.value, t.effect)))
        found = self._taint_set_ids.get(key)
        if found is None:
            found = len(self.taint_sets)
            self.taint_sets.append(key)
            self._taint_set_ids[key] = found
            self._interned += 1
        return found

    def _index_images(self, row: int, old: NodeInfo | None, new: NodeInfo | None) -> None:
        had_images = bool(self.image_rows)
        self._reindex_images(row, old, new)
        if bool(self.image_rows) != had_images:
            self.generation += 1  # whether image locality can score anything (plugin gates read it)

    def _reindex_images(self, row: int, old: NodeInfo | None, new: NodeInfo | None) -> None:
        if old is not None:
            for image in old.images:
                for name in image.names:
                    rows = self.image_rows.get(name)
                    if rows is not None and rows.pop(row, 0) is None and not rows:
                        del self.image_rows[name]
                        del self.image_size[name]
        if new is not None:
            for image in new.images:
                for name in image.names:
                    self.image_rows.setdefault(name, {})[row] = None
                    self.image_size.setdefault(name, image.size)

    def _write_node(self, row: int, node: NodeInfo, placement_changed: bool = True) -> None:
        old = self.infos[row]
        if node.images or (old is not None and old.images):
            self._index_images(row, old, node)
        self.ensure_resources(node.allocatable)
        self.ensure_resources(node.capacity)
        self.allocatable[row] = 0
        self.capacity[row] = 0
        for name, amount in node.allocatable.items():
            self.allocatable[row, self.column[name]] = amount
        for name, amount in node.capacity.items():
            self.capacity[row, self.column[name]] = amount
        self.unschedulable[row] = node.unschedulable
        self.taint_set[row] = self._intern_taints(node.taints)
        for label, values in self.labels.items():
            if label not in node.labels:
                values[row] = -1
        for label, value in node.labels.items():
            if label not in self.labels:
                self.labels[label] = np.full(len(self.present), -1, np.int32)
                self.label_values[label] = {}
            ids = self.label_values[label]
            found = ids.get(value)
            if found is None:
                found = ids[value] = len(ids)
                self._interned += 1
            self.labels[label][row] = found
        self.infos[row] = node
        if placement_changed:
            self.generation += 1
        self.touch(row)
        if self._interned > self._compact_at:
            self._forget_unused()

    def _forget_unused(self) -> None:
        """Renumber the label values and taint sets the present nodes hold, in their old order
        (ties broken by id stay as they were), and drop the rest. Ids are read within a cycle
        only, and masks are cached per generation, which this moves."""
        size = self.size
        present = self.present[:size]
        self.taint_set[:size][~present] = 0
        used = np.union1d([0], self.taint_set[:size])
        renumber = np.zeros(len(self.taint_sets), np.int32)
        renumber[used] = np.arange(len(used), dtype=np.int32)
        self.taint_set[:size] = renumber[self.taint_set[:size]]
        self.taint_sets = [self.taint_sets[i] for i in used]
        self._taint_set_ids = {taints: i for i, taints in enumerate(self.taint_sets)}
        interned = len(self.taint_sets)
        for label in list(self.labels):
            column = self.labels[label][:size]
            column[~present] = -1
            held = np.unique(column[column >= 0])
            if not held.size:
                del self.labels[label], self.label_values[label]
                continue
            renumber = np.full(len(self.label_values[label]) + 1, -1, np.int32)  # the last: absent (-1)
            renumber[held] = np.arange(len(held), dtype=np.int32)
            column[:] = renumber[column]
            value_of = {i: value for value, i in self.label_values[label].items()}
            self.label_values[label] = {value_of[int(i)]: n for n, i in enumerate(held)}
            interned += len(held)
        self._interned = interned
        self._compact_at = max(MIN_COMPACT_AT, 2 * interned)
        self.generation += 1

    def add(self, node: NodeInfo) -> int:
        if node.name in self.row:
            self.update(node)
            return self.row[node.name]
        if self._free:
            row = self._free.pop()
        else:
            row = self.size
            self.size += 1
            self._ensure_rows(self.size)
            self.names.append(None)
            self.infos.append(None)
        self.names[row] = node.name
        self.row[node.name] = row
        self.present[row] = True
        self.requested[row] = 0
        self.nonzero_requested[row] = 0
        self.count += 1
        self._write_node(row, node)
        return row

    def update(self, node: NodeInfo) -> None:
        """A node changed. Status heartbeats change nothing the scheduler reads and cost nothing;
        only label, taint, cordon or declared-feature changes invalidate the cached node masks."""
        row = self.row[node.name]
        old = self.infos[row]
        assert old is not None
        placement_changed = (old.labels, old.taints, old.unschedulable, old.declared_features) != (
            node.labels,
            node.taints,
            node.unschedulable,
            node.declared_features,
        )
        if not placement_changed and (old.allocatable, old.capacity) == (node.allocatable, node.capacity):
            if old.images != node.images:
                self._index_images(row, old, node)
            self.infos[row] = node
            return
        self._write_node(row, node, placement_changed)

    def remove(self, name: NodeName) -> None:
        row = self.row.pop(name)
        self._index_images(row, self.infos[row], None)
        self.present[row] = False
        self.names[row] = None
        self.infos[row] = None
        self.requested[row] = 0
        self.nonzero_requested[row] = 0
        self.count -= 1
        self._free.append(row)
        self.generation += 1
        self.touch(row)
