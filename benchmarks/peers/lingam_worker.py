"""Fit and time the ``lingam`` package on datasets from an .npz file (peer worker).

Runs inside the isolated virtual environment made by ``benchmarks/bench_ica.py``
(lingam 1.13.0 pins scipy<=1.13.1, which conflicts with the main environment), so it
imports nothing from jaxkit. Usage::

    python lingam_worker.py DATA.npz OUT.json --methods ica,direct --runs 3

``DATA.npz`` holds ``x`` (B, n, d) and ``seeds`` (B,) (ICALiNGAM's ``random_state``).
For each method and each thread setting ("1": ``threadpool_limits(1)``, "default": the
BLAS/OpenMP defaults) the whole loop over the B datasets is timed ``runs`` times after one
warm-up fit; every fit is timed too. The adjacency matrices of the last run and all times
go to ``OUT.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from importlib import metadata

import numpy as np


def _model(method: str, seed: int):
    import lingam

    if method == "ica":
        return lingam.ICALiNGAM(random_state=int(seed), max_iter=1000)
    if method == "direct":
        return lingam.DirectLiNGAM()
    raise ValueError(f"unknown method {method!r}")


def _loop(method, x, seeds):
    fit_times, adjs = [], []
    for b in range(x.shape[0]):
        t0 = time.perf_counter()
        m = _model(method, seeds[b]).fit(x[b])
        fit_times.append(time.perf_counter() - t0)
        adjs.append(np.asarray(m.adjacency_matrix_, dtype=float))
    return fit_times, adjs


def main(argv=None) -> int:
    from threadpoolctl import threadpool_info, threadpool_limits

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--methods", default="ica,direct")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", default="1,default")
    a = p.parse_args(argv)

    d = np.load(a.data)
    x, seeds = np.asarray(d["x"], dtype=np.float64), np.asarray(d["seeds"])
    out = {
        "versions": {k: metadata.version(k) for k in ("lingam", "numpy", "scipy",
                                                        "scikit-learn")},
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "threadpools": [{k: i.get(k) for k in ("internal_api", "num_threads", "version")}
                        for i in threadpool_info()],
        "results": {},
    }
    for method in a.methods.split(","):
        res = out["results"].setdefault(method, {})
        for threads in a.threads.split(","):
            limits = 1 if threads == "1" else None
            with threadpool_limits(limits):
                _model(method, seeds[0]).fit(x[0])  # warm-up (imports, caches)
                loop_times, fit_times = [], []
                for _ in range(a.runs):
                    t0 = time.perf_counter()
                    ft, adjs = _loop(method, x, seeds)
                    loop_times.append(time.perf_counter() - t0)
                    fit_times.append(ft)
            res[threads] = {"loop_times_s": loop_times, "fit_times_s": fit_times,
                            "adjacency": np.stack(adjs).tolist()}
            print(f"lingam {method} threads={threads}: median loop "
                  f"{np.median(loop_times):.3f} s over {x.shape[0]} datasets", flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
