"""Helpers shared by the peer workers. They run inside the peers' own virtual
environments, where jaxkit is not installed, so they cannot import ``jaxkit.bench``;
each worker imports this file from its own folder (the script's folder is on sys.path)."""

import gc
import time
from importlib import metadata


def versions(names):
    """Installed version of each distribution in ``names`` (None when missing)."""
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def timed_runs(fn, runs: int, warmup: int, setup=None) -> list[float]:
    """``runs`` timings of ``fn()`` after ``warmup`` untimed calls; ``setup()`` (untimed)
    before each call."""
    for _ in range(warmup):
        if setup:
            setup()
        fn()
    gc.collect()
    gc.disable()
    try:
        out = []
        for _ in range(runs):
            if setup:
                setup()
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return out
