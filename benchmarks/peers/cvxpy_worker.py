"""Solve charge-balanced simplex projections with cvxpy, one QP per cell (peer worker).

Runs inside the isolated virtual environment ``benchmarks/.peer-venv-cvxpy`` (cvxpy 1.9.3
with Clarabel and OSQP) made by ``benchmarks/bench_charge.py``, so it imports nothing from
jaxkit. Usage::

    python cvxpy_worker.py DATA.npz OUT.npz [--solvers CLARABEL,OSQP] [--repeats 1]

``DATA.npz`` holds ``y`` (C, N, K): C cells of N atoms, each row the K element
probabilities a sampler produced, and ``q`` (K,) the formal charges. For every cell the QP

    minimise ||P - Y||_F^2   s.t.   P >= 0,   P 1 = 1,   sum_i q . P_i = 0

(the Euclidean projection onto simplex rows with zero total charge, the problem jaxkit's
``charge.project_soft`` solves) is solved the way a cvxpy user would: the problem is built
once per shape with ``Y`` a ``cp.Parameter`` (DPP, so the canonicalisation is cached) and
``prob.solve(solver=...)`` is called once per cell after one untimed warm-up solve. Every
call is timed on its own (wall clock of ``prob.solve``, cvxpy's own overhead included)
together with the solver's reported ``solve_time``. Solver tolerances are tightened from
their defaults (Clarabel ``tol_gap_abs = tol_gap_rel = tol_feas = 1e-10``; OSQP
``eps_abs = eps_rel = 1e-9``, polishing on) so that the solutions can be compared with the
exact projection. ``OUT.npz`` holds, per solver, ``p_<S>`` (C, N, K), ``t_<S>`` (C,) wall
seconds per cell, ``ts_<S>`` (C,) solver-reported seconds, ``status_<S>`` and a JSON
``meta`` string with versions.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np
from _common import versions

SOLVER_OPTS = {
    "CLARABEL": dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10),
    "OSQP": dict(eps_abs=1e-9, eps_rel=1e-9, polish=True, max_iter=200_000),
}




def build_problem(n: int, q: np.ndarray):
    """The projection QP for an (n, K) cell with the cell as a parameter."""
    import cvxpy as cp

    k = q.shape[0]
    y = cp.Parameter((n, k))
    p = cp.Variable((n, k))
    cons = [p >= 0, cp.sum(p, axis=1) == 1, cp.sum(p @ q) == 0]
    prob = cp.Problem(cp.Minimize(cp.sum_squares(p - y)), cons)
    return prob, p, y


def solve_cells(y_cells: np.ndarray, q: np.ndarray, solver: str):
    """Solve every cell; returns solutions, wall times, solver times, statuses."""
    c, n, k = y_cells.shape
    prob, p, y = build_problem(n, q.astype(np.float64))
    opts = SOLVER_OPTS.get(solver, {})
    y.value = y_cells[0]
    prob.solve(solver=solver, **opts)  # warm-up: canonicalisation cached, imports done
    out = np.full((c, n, k), np.nan)
    wall, st, status = np.zeros(c), np.zeros(c), []
    for i in range(c):
        y.value = y_cells[i]
        t0 = time.perf_counter()
        prob.solve(solver=solver, **opts)
        wall[i] = time.perf_counter() - t0
        stats = prob.solver_stats
        st[i] = np.nan if stats is None or stats.solve_time is None else stats.solve_time
        status.append(str(prob.status))
        if p.value is not None:
            out[i] = p.value
    return out, wall, st, status


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--solvers", default="CLARABEL")
    args = ap.parse_args(argv)
    d = np.load(args.data)
    y_cells, q = np.asarray(d["y"], np.float64), np.asarray(d["q"], np.float64)
    res = {}
    for s in [s.strip().upper() for s in args.solvers.split(",") if s.strip()]:
        p, wall, st, status = solve_cells(y_cells, q, s)
        res[f"p_{s}"], res[f"t_{s}"], res[f"ts_{s}"] = p, wall, st
        res[f"status_{s}"] = np.array(status)
        print(f"cvxpy {s}: {y_cells.shape[0]} cells of {y_cells.shape[1]} atoms, median "
              f"{np.median(wall) * 1e3:.1f} ms/cell (solver {np.nanmedian(st) * 1e3:.1f} ms)",
              flush=True)
    meta = dict(versions=versions(["cvxpy", "clarabel", "osqp", "numpy", "scipy"]),
                python=sys.version.split()[0], platform=platform.platform(),
                solver_options=SOLVER_OPTS)
    np.savez(args.out, meta=json.dumps(meta), **res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
