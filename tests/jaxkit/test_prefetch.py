"""jaxkit.prefetch: order, look-ahead, error propagation, early close, argument checks."""

import os
import sys
import threading
import time

import pytest

from jaxkit.prefetch import prefetch


def test_items_in_order_with_several_workers():
    def make(i):
        time.sleep(0.002 * (5 - i % 5))  # later items may finish first
        return i * i

    assert list(prefetch(make, 12, depth=4, workers=3)) == [i * i for i in range(12)]
    assert list(prefetch(make, 0)) == []


def test_runs_ahead_of_the_consumer_by_depth():
    started = []

    def make(i):
        started.append(i)
        time.sleep(0.05)
        return i

    it = prefetch(make, 10, depth=3, workers=3)
    assert next(it) == 0
    time.sleep(0.06)  # the consumer "works"; items 1 and 2 are being made meanwhile
    # 1 and 2 started before the consumer asked for them; 3 not yet (depth 3 in flight)
    assert sorted(started) == [0, 1, 2]
    assert [next(it), next(it)] == [1, 2]
    it.close()


def test_unbounded_and_early_close_cancels_the_rest():
    made = []
    lock = threading.Lock()

    def make(i):
        with lock:
            made.append(i)
        return i

    it = prefetch(make, None, depth=2)
    assert [next(it) for _ in range(5)] == list(range(5))
    it.close()
    n = len(made)
    time.sleep(0.02)
    assert len(made) == n and n <= 5 + 2  # nothing made after the close


def test_error_raised_at_its_item():
    def make(i):
        if i == 3:
            raise RuntimeError("bad item 3")
        return i

    it = prefetch(make, 6, depth=2, workers=2)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(RuntimeError, match="bad item 3"):
        next(it)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness")
def test_nice_lowers_the_workers_priority_only():
    def niceness(_):
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    mine = niceness(0)
    assert list(prefetch(niceness, 4, workers=2, nice=19)) == [19] * 4
    assert list(prefetch(niceness, 2, nice=None)) == [mine] * 2  # inherited, unchanged
    assert niceness(0) == mine  # the caller's thread keeps its priority


@pytest.mark.parametrize("kw, match", [(dict(n=-1), "n"), (dict(n=1.5), "n"),
                                       (dict(depth=0), "depth"), (dict(workers=0), "workers"),
                                       (dict(nice=20), "nice"), (dict(nice=-1), "nice"),
                                       (dict(nice=2.5), "nice")])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        prefetch(lambda i: i, **{"n": 3, **kw})
    with pytest.raises(TypeError, match="make"):
        prefetch(3, 2)
