"""FastICA's default call with the old and the new ``svd`` whitening, interleaved in one process.

Run ``python benchmarks/ica_svd_whitening_ab.py [--rounds N]``. The old whitening (before
33a9a83: LAPACK's SVD of each centred (d, n) dataset) is patched into
``jaxkit.kernels.ica._whitening_matrix`` for one compiled function; the new one (two Gram
passes, ``kernels/_gram_svd.py``) and ``whiten_solver="eigh"`` are timed beside it on 128
float32 datasets of (2000, 10) (``bench_ica.ica_data``, seed 1): medians of the interleaved
rounds, the load average, and how far the fits differ (per dataset, and the Amari
distance to the true mixing where they differ by more than 1e-3).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=12)
    args = p.parse_args(argv)
    import jax
    import jax.numpy as jnp
    from jaxkit.kernels import ica

    sys.path.insert(0, str(HERE))
    from bench_ica import ica_data

    b = 128
    x, a, _ = ica_data(b, 2000, 10, seed=1, dtype=np.float32)
    keys = jax.random.split(jax.random.key(0), b)
    xj = jnp.asarray(x)
    new = ica._whitening_matrix

    def old(xc, k, solver):
        if solver != "svd":
            return new(xc, k, solver)
        n, d = xc.shape
        u, s, _ = jnp.linalg.svd(xc.T, full_matrices=False)
        floor = jnp.maximum(10 * d * jnp.finfo(xc.dtype).eps * s[0], jnp.finfo(s.dtype).tiny)
        s = jnp.maximum(s, floor)
        u = u * jnp.where(u[0] < 0, -1.0, 1.0).astype(u.dtype)
        return (u / s).T[:k] * jnp.sqrt(jnp.asarray(n, xc.dtype)), s[k - 1] <= floor

    def make(solver="svd"):
        return jax.jit(jax.vmap(lambda k, x: ica.fastica(
            k, x, max_iter=200, tol=1e-4, whiten_solver=solver).components))

    ica._whitening_matrix = old
    f_old = make()
    c_old = np.asarray(f_old(keys, xj))
    ica._whitening_matrix = new
    forms = {"old svd (LAPACK SVD of the data)": f_old, "new svd (Gram passes)": make(),
             "whiten_solver='eigh'": make("eigh")}
    c_new = np.asarray(forms["new svd (Gram passes)"](keys, xj))
    jax.block_until_ready(forms["whiten_solver='eigh'"](keys, xj))
    rel = np.abs(c_new - c_old).max((1, 2)) / np.abs(c_old).max((1, 2))
    print(f"new vs old components: median relative difference {np.median(rel):.1e}; "
          f"{int(np.sum(rel > 1e-3))} of {b} differ by more than 1e-3")
    for i in np.where(rel > 1e-3)[0]:
        am = [float(ica.amari_distance(jnp.asarray(c[i]), jnp.asarray(a[i], jnp.float32)))
              for c in (c_new, c_old)]
        print(f"  dataset {i}: Amari distance new {am[0]:.4f}, old {am[1]:.4f}")
    load0 = os.getloadavg()
    times = {k: [] for k in forms}
    for _ in range(args.rounds):
        for k, f in forms.items():
            t = time.perf_counter()
            jax.block_until_ready(f(keys, xj))
            times[k].append(time.perf_counter() - t)
    print(f"load average before {load0}, after {os.getloadavg()}")
    for k, v in times.items():
        print(f"{k:34s} median {np.median(v) * 1e3:7.1f} ms  p10 {np.percentile(v, 10) * 1e3:7.1f}"
              f"  p90 {np.percentile(v, 90) * 1e3:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
