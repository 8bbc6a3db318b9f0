"""Fit and time causal-learn's PC and GES on datasets from an .npz file (peer worker).

Runs inside ``benchmarks/.peer-venv-causallearn`` (causal-learn 0.1.4.8, made by
``benchmarks/bench_causaltab.py``), so it imports nothing from jaxkit. Usage::

    python causallearn_worker.py DATA.npz OUT.json --methods pc,ges

``DATA.npz`` holds ``x`` (B, n, d). PC: Fisher-z test, alpha 0.05, stable, default
orientation rules; GES: BIC score (``local_score_BIC``). Each fit is timed. The
estimated graphs go to ``OUT.json`` in the LiNGAM convention (``[i, j] = 1``: ``j -> i``;
an undirected edge ``i - j`` sets both entries).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def _to_lingam(g: np.ndarray) -> np.ndarray:
    """causal-learn's GeneralGraph matrix: ``G[j, i] = 1, G[i, j] = -1`` is ``i -> j``;
    ``G[i, j] = G[j, i] = -1`` is ``i - j``."""
    d = g.shape[0]
    out = np.zeros((d, d))
    for i in range(d):
        for j in range(d):
            if i == j:
                continue
            if g[j, i] == 1 and g[i, j] == -1:  # i -> j
                out[j, i] = 1
            elif g[i, j] == -1 and g[j, i] == -1:  # i - j
                out[j, i] = out[i, j] = 1
    return out


def _fit(method: str, x: np.ndarray) -> np.ndarray:
    if method == "pc":
        from causallearn.search.ConstraintBased.PC import pc

        cg = pc(x, 0.05, "fisherz", stable=True, show_progress=False)
        return _to_lingam(np.asarray(cg.G.graph))
    if method == "ges":
        from causallearn.search.ScoreBased.GES import ges

        rec = ges(x, score_func="local_score_BIC")
        return _to_lingam(np.asarray(rec["G"].graph))
    raise ValueError(f"unknown method {method!r}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--methods", default="pc,ges")
    a = ap.parse_args(argv)
    x = np.load(a.data)["x"]
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from _common import versions

    res = {"versions": versions(["causal-learn", "numpy", "scipy"]), "methods": {}}
    for m in a.methods.split(","):
        graphs, times = [], []
        for b in range(x.shape[0]):
            t0 = time.perf_counter()
            graphs.append(_fit(m, x[b]).tolist())
            times.append(time.perf_counter() - t0)
        res["methods"][m] = {"graphs": graphs, "seconds": times}
    with open(a.out, "w") as fh:
        json.dump(res, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
