"""The rows matrix of the waiting pods' fixed features: one row per pod version, rows reused."""

import dataclasses

import pytest

from pysched.api.builders import make_pod
from pysched.api.objects import PodInfo
from pysched.deadline.features import STATIC_WIDTH
from pysched.framework.interfaces import QueuedPod
from pysched.plugins.learned_queue_sort import fixed
from pysched.plugins.learned_queue_sort.fixed import FIRST_ROWS, FixedRows


def _queued(count: int, start: int = 0) -> list[QueuedPod]:
    return [QueuedPod(make_pod(f"p{i}", created=float(i)), 0.0) for i in range(start, start + count)]


def _created(pod: PodInfo) -> list[float]:
    return [pod.created] * STATIC_WIDTH


def test_rows_are_read_once_per_pod_version_and_the_matrix_grows() -> None:
    reads: list[str] = []

    def read(pod: PodInfo) -> list[float]:
        reads.append(pod.name)
        return _created(pod)

    rows = FixedRows()
    queued = _queued(FIRST_ROWS + 10)
    index = rows.index(queued, read)
    assert len(set(index.tolist())) == len(queued)  # one row each, past the first allocation
    assert [r[0] for r in rows.matrix[index]] == [float(i) for i in range(len(queued))]
    assert rows.index(queued[:3], read).tolist() == index[:3].tolist() and len(reads) == len(queued)
    changed = QueuedPod(dataclasses.replace(queued[1].pod, created=99.0), 0.0)  # a new version of p1
    assert rows.index([changed], read).tolist() == [index[1]]  # read again into its own row
    assert rows.matrix[index[1], 0] == 99.0 and reads[-1] == "p1"


def test_a_row_left_behind_is_used_again_and_the_limit_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = FixedRows()
    first = rows.index(_queued(2), _created)
    rows.drop(_queued(1)[0].pod.key)
    again = rows.index(_queued(1, start=5), _created)
    assert again.tolist() == [first[0]] and rows.matrix[first[0], 0] == 5.0
    monkeypatch.setattr(fixed, "LIMIT", 3)
    rows.index(_queued(1, start=6), _created)  # a third pod: at the limit
    assert len(rows.slot) == 3
    window = [*_queued(1, start=5), *_queued(2, start=7)]  # a known pod first, then new ones
    index = rows.index(window, _created)  # past the limit: every row is read again, each its own
    assert len(rows.slot) == 3 and len(set(index.tolist())) == 3
    assert rows.matrix[index, 0].tolist() == [5.0, 7.0, 8.0]


def test_the_rows_of_a_window_that_grows_the_matrix_are_in_the_grown_one() -> None:
    rows = FixedRows()
    rows.index(_queued(FIRST_ROWS - 2), _created)
    window = _queued(6, start=FIRST_ROWS - 2)  # four of them past the first allocation
    index = rows.index(window, _created)
    assert rows.matrix[index, 0].tolist() == [float(i) for i in range(FIRST_ROWS - 2, FIRST_ROWS + 4)]
