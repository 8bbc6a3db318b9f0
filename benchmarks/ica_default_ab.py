"""FastICA's default call (or ``whiten``) at an earlier commit against the working tree,
interleaved in one process.

Run ``python benchmarks/ica_default_ab.py --old REV [--case fastica|whiten] [--dtype
float32|float64] [--rounds N]``. ``kernels/`` at ``REV`` (``git archive``) is imported as a
package of its own beside the installed ``jaxkit.kernels``; both compile the call a user
writes, ``jax.jit(jax.vmap(lambda k, x: ica.fastica(k, x, max_iter=200, tol=1e-4)))``
(``--case whiten``: ``jax.jit(jax.vmap(ica.whiten))``), on 128 datasets of (2000, 10)
(``bench_ica.ica_data``, seed 1). Rounds alternate which side runs first; printed: how far
the results differ (iteration counts, components, whitening), each side's median and
quartile per dataset, and the paired ratio old / new of the rounds (its median and
quartiles: on a VM whose speed drifts, the paired ratio is steadier than the medians).
Example: ``--old 33a9a83~1`` times the whitening by LAPACK's SVD of the data (before the
Gram passes), ``--old 762209a`` the whitening before the sample-last copy (a19e2d1).
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _old_kernels(rev: str, where: Path) -> str:
    """Extract ``kernels/`` at ``rev`` under ``where`` as package ``kernels_at_<rev>``."""
    name = "kernels_at_" + "".join(c if c.isalnum() else "_" for c in rev)
    blob = subprocess.run(["git", "-C", str(REPO), "archive", rev, "kernels"], check=True,
                          capture_output=True).stdout
    tar = where / "k.tar"
    tar.write_bytes(blob)
    with tarfile.open(tar) as t:
        t.extractall(where, filter="data")
    (where / "kernels").rename(where / name)
    return name


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, help="the earlier commit (any git revision)")
    p.add_argument("--case", choices=("fastica", "whiten"), default="fastica")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args(argv)
    import jax

    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    from jaxkit.kernels import ica as new

    sys.path.insert(0, str(HERE))
    from bench_ica import ica_data

    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, tmp)
        old = importlib.import_module(_old_kernels(args.old, Path(tmp)) + ".ica")
        b = 128
        x, _, _ = ica_data(b, 2000, 10, seed=1, dtype=np.dtype(args.dtype))
        keys = jax.random.split(jax.random.key(0), b)
        xd = jax.device_put(x)
        if args.case == "fastica":
            forms = {s: jax.jit(jax.vmap(lambda k, x, m=m: m.fastica(k, x, max_iter=200,
                                                                       tol=1e-4)))
                     for s, m in (("old", old), ("new", new))}
            call_args = (keys, xd)
        else:
            forms = {s: jax.jit(jax.vmap(m.whiten)) for s, m in (("old", old), ("new", new))}
            call_args = (xd,)
        out = {s: jax.block_until_ready(f(*call_args)) for s, f in forms.items()}
        o, n = out["old"], out["new"]
        wo, wn = np.asarray(o.whitening), np.asarray(n.whitening)
        line = f"whitening: max relative difference {np.abs(wo - wn).max() / np.abs(wo).max():.1e}"
        if args.case == "fastica":
            same = int(np.sum(np.asarray(o.n_iter) == np.asarray(n.n_iter)))
            co, cn = np.asarray(o.components), np.asarray(n.components)
            rel = np.abs(co - cn).max((1, 2)) / np.abs(co).max((1, 2))
            line += (f"; n_iter equal on {same}/{b}; components: median relative difference "
                     f"{np.median(rel):.1e}, max {rel.max():.1e}")
        print(f"--old {args.old} against the working tree, {args.case}, {args.dtype}: {line}")
        load0 = os.getloadavg()
        times = {s: [] for s in forms}
        for r in range(args.rounds):
            for s in (("old", "new") if r % 2 else ("new", "old")):
                t = time.perf_counter()
                jax.block_until_ready(forms[s](*call_args))
                times[s].append(time.perf_counter() - t)
        print(f"load average before {load0}, after {os.getloadavg()}")
        for s, v in times.items():
            us = np.array(v) * 1e6 / b
            print(f"{s}: median {np.median(us):.0f} us a dataset (q25 {np.percentile(us, 25):.0f},"
                  f" q75 {np.percentile(us, 75):.0f})")
        ratio = np.array(times["old"]) / np.array(times["new"])
        print(f"paired old / new: median {np.median(ratio):.3f} (q25 "
              f"{np.percentile(ratio, 25):.3f}, q75 {np.percentile(ratio, 75):.3f}) over "
              f"{args.rounds} rounds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
