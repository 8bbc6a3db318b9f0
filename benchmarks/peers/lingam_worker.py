"""Fit and time the ``lingam`` package on datasets from an .npz file (peer worker).

Runs inside the isolated virtual environment made by ``benchmarks/bench_ica.py``
(lingam 1.13.0 pins scipy<=1.13.1, which conflicts with the main environment), so it
imports nothing from jaxkit. Usage::

    python lingam_worker.py DATA.npz OUT.json --methods ica,direct --runs 3
    python lingam_worker.py --cases CASES.npz OUT.json
    python lingam_worker.py --bootstrap DATA.npz OUT.json --n-sampling 100 --runs 3

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


def run_cases(path: str) -> dict:
    """Reference outputs of lingam's options for the parity tests. ``CASES.npz`` holds
    ``x_<name>`` data arrays and ``spec`` (a JSON string): a list of cases, each
    ``{"name", "data", "kind", ...}`` with ``kind`` one of ``direct`` (options
    ``prior_knowledge``, ``soft``, ``measure``), ``ica`` (``seed``), ``total_effect``
    (``model``: a direct case's options, ``from``, ``to``), ``p_values`` (``adjacency``)
    and ``prior_error`` (``prior_knowledge``: the error lingam raises, if any)."""
    import lingam

    z = np.load(path)
    spec = json.loads(str(z["spec"]))
    out = {}
    for c in spec:
        x = np.asarray(z["x_" + c["data"]], dtype=np.float64)
        kind = c["kind"]
        if kind in ("direct", "total_effect", "prior_error"):
            pk = c.get("prior_knowledge")
            m = lingam.DirectLiNGAM(prior_knowledge=None if pk is None else np.asarray(pk),
                                    apply_prior_knowledge_softly=c.get("soft", False),
                                    measure=c.get("measure", "pwling"))
            if kind == "prior_error":
                try:
                    m.fit(x)
                    out[c["name"]] = {"error": None}
                except Exception as e:  # noqa: BLE001 - the peer's error is the result
                    out[c["name"]] = {"error": f"{type(e).__name__}: {e}"}
                continue
            m.fit(x)
            res = {"causal_order": [int(v) for v in m.causal_order_],
                   "adjacency": np.asarray(m.adjacency_matrix_).tolist()}
            if kind == "total_effect":
                res["effect"] = float(m.estimate_total_effect(x, c["from"], c["to"]))
            out[c["name"]] = res
        elif kind == "ica":
            m = lingam.ICALiNGAM(random_state=c.get("seed", 0), max_iter=1000).fit(x)
            out[c["name"]] = {"causal_order": [int(v) for v in m.causal_order_],
                              "adjacency": np.asarray(m.adjacency_matrix_).tolist()}
        elif kind == "p_values":
            m = lingam.DirectLiNGAM()
            m._adjacency_matrix = np.asarray(c["adjacency"], dtype=np.float64)
            out[c["name"]] = {"p_values": m.get_error_independence_p_values(x).tolist()}
        else:
            raise ValueError(f"unknown case kind {kind!r}")
    return out


def run_bootstrap(path: str, n_sampling: int, runs: int, methods: str) -> dict:
    """Time lingam's ``bootstrap(X, n_sampling)`` on ``x`` of ``DATA.npz`` (1 BLAS
    thread) and return the times and the edge probabilities."""
    from threadpoolctl import threadpool_limits

    x = np.asarray(np.load(path)["x"], dtype=np.float64)
    out = {}
    with threadpool_limits(1):
        for method in methods.split(","):
            times, probs = [], None
            for _ in range(runs):
                model = _model(method, 0)
                t0 = time.perf_counter()
                r = model.bootstrap(x, n_sampling)
                times.append(time.perf_counter() - t0)
                probs = r.get_probabilities().tolist()
            out[method] = {"times_s": times, "probabilities": probs}
            print(f"lingam bootstrap {method} x{n_sampling}: median {np.median(times):.2f} s",
                  flush=True)
    return out


def main(argv=None) -> int:
    from threadpoolctl import threadpool_info, threadpool_limits

    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] in ("--cases", "--bootstrap"):
        mode, argv = argv[0], argv[1:]
        q = argparse.ArgumentParser()
        q.add_argument("data")
        q.add_argument("out")
        q.add_argument("--n-sampling", type=int, default=100)
        q.add_argument("--runs", type=int, default=1)
        q.add_argument("--methods", default="direct")
        b = q.parse_args(argv)
        res = (run_cases(b.data) if mode == "--cases"
               else run_bootstrap(b.data, b.n_sampling, b.runs, b.methods))
        res["versions"] = {k: metadata.version(k) for k in ("lingam", "numpy", "scipy")}
        with open(b.out, "w") as f:
            json.dump(res, f)
        return 0

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
