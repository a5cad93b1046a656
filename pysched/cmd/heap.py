"""What a long-running pysched process does with Python's cyclic garbage collector.

The scheduler's heap is mostly long-lived records that reference counting frees on its own:
nodes, pods, their raw API objects, the cache's indexes. CPython's full collection walks every
tracked object each time the long-lived set has grown by a quarter, so its pause grows with the
cluster and lands inside whichever scheduling cycle happens to allocate at that moment (a single
pause of about 130 ms in the one-second burst of `pysched bench --nodes 5000 --pods 20000`).

`settled` is entered once a command has loaded what it keeps (the informers' initial lists): it
collects what is garbage then and freezes the survivors, which later collections skip. Frozen
objects are still freed by reference counting; only a reference cycle among them (the scheduler's
own object graph has some) waits for the collector until the block ends, which unfreezes them
all. `pysched run` stays in the block for its whole life: a cycle among objects it listed at
start and let go later is kept until then (pod and node records form none). Not reentrant: the
inner block's end would unfreeze the outer one's objects too.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def settled() -> Iterator[int]:
    """Collect, then keep every object alive now out of the collector's walks until the block
    ends. Yields how many objects were frozen."""
    gc.collect()
    gc.freeze()
    try:
        yield gc.get_freeze_count()
    finally:
        gc.unfreeze()
