"""``bench_ica.py --only default``: the call a user writes against scikit-learn's defaults.

jaxkit: ``jax.jit(jax.vmap(lambda k, x: ica.fastica(k, x, max_iter=200, tol=1e-4)
.components))`` over ``--sets`` (128) datasets of (2000, 10), float32, one CPU device
(the kernel's defaults: ``whiten_solver="svd"``, ``whiten="unit-variance"``, logcosh,
parallel), and the same function through ``jaxkit.distributed.sharded_vmap`` over every
CPU device when there are several; ``whiten_solver="eigh"`` beside them, labelled.
scikit-learn: ``FastICA(random_state=i).fit(x_i)`` in a Python loop (all its defaults,
OpenBLAS at its default threads). The sides run **interleaved** in the same rounds (one
call of each jaxkit form, then one scikit-learn loop, ``--peer-runs`` rounds after a
warm-up round), so machine load hits them alike; medians over the rounds, the ratio of the
medians, and the load average before and after.
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np


def _sk_default_loop(xs):
    from sklearn.decomposition import FastICA
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return np.stack([FastICA(random_state=i).fit(x).components_
                         for i, x in enumerate(xs)])


def case_default(args, rows, results, ica_data, amari_median, sharded):
    """Times the default call (see the module docstring); appends table rows and
    ``results["default_float32"]``."""
    import jax
    from jaxkit.kernels import ica

    from jaxkit import bench

    n_sets, n, d = (16, 500, 6) if args.quick else (args.sets, 2000, 10)
    x, a, _ = ica_data(n_sets, n, d, seed=1, dtype=np.float32)
    keys = jax.random.split(jax.random.key(0), n_sets)

    def default(k, x):
        return ica.fastica(k, x, max_iter=200, tol=1e-4).components

    def eigh(k, x):
        return ica.fastica(k, x, max_iter=200, tol=1e-4, whiten_solver="eigh").components

    xd = jax.device_put(x)
    forms = {"jaxkit default (svd), 1 device": (jax.jit(jax.vmap(default)), (keys, xd)),
             "jaxkit whiten_solver='eigh', 1 device": (jax.jit(jax.vmap(eigh)), (keys, xd))}
    ndev = jax.device_count()
    if ndev > 1:
        fn, placed = sharded(default, (keys, x))
        forms[f"jaxkit default (svd), sharded_vmap over {ndev} devices"] = (fn, placed)
    out = {}
    for label, (fn, fargs) in forms.items():
        out[label] = np.asarray(jax.block_until_ready(fn(*fargs)))  # compile + first call
    load0 = os.getloadavg()
    from threadpoolctl import threadpool_limits

    sk_label, sk1_label = "scikit-learn FastICA() loop", "scikit-learn loop, 1 BLAS thread"
    times = {label: [] for label in (*forms, sk_label, sk1_label)}
    sk = None
    for r in range(args.peer_runs + 1):  # round 0 warms up, untimed
        for label, (fn, fargs) in forms.items():
            t = time.perf_counter()
            jax.block_until_ready(fn(*fargs))
            if r:
                times[label].append(time.perf_counter() - t)
        t = time.perf_counter()
        sk = _sk_default_loop(x)
        if r:
            times[sk_label].append(time.perf_counter() - t)
        with threadpool_limits(1):
            t = time.perf_counter()
            _sk_default_loop(x)
            if r:
                times[sk1_label].append(time.perf_counter() - t)
    load1 = os.getloadavg()
    sk_med = float(np.median(times[sk_label]))
    sk1_med = float(np.median(times[sk1_label]))
    am_s = amari_median(sk, a)
    rec = {}
    for label in forms:
        med = float(np.median(times[label]))
        am = amari_median(out[label][: n_sets], a)
        rec[label] = dict(median_s=med, times_s=times[label], ratio=sk_med / med,
                          ratio_1thread=sk1_med / med, amari_median=am)
        runs = np.round(np.array(times[label]) * 1e3, 1).tolist()
        print(f"{label}: median {med * 1e3:.1f} ms (runs {runs}), "
              f"scikit-learn loop {sk_med * 1e3:.0f} ms: {sk_med / med:.2f}x (1 BLAS thread "
              f"{sk1_med * 1e3:.0f} ms: {sk1_med / med:.2f}x); Amari median "
              f"{am:.1e} (scikit-learn {am_s:.1e})")
        rows.append(dict(case=f"FastICA default call x{n_sets} (n={n}, d={d}) [{label}]",
                         dtype="float32",
                         jax=bench.record_from_times(label, times[label], items=n_sets),
                         peer=bench.record_from_times("sklearn", times[sk_label],
                                                      items=n_sets),
                         peer_name="scikit-learn FastICA() defaults, loop",
                         acc_jax=f"Amari med {am:.1e}", acc_peer=f"Amari med {am_s:.1e}"))
    print(f"load average before {load0}, after {load1} (2 cores: other work skews both sides)")
    results["default_float32"] = dict(
        config=dict(n_sets=n_sets, n=n, d=d, max_iter=200, tol=1e-4,
                    interleaved_rounds=args.peer_runs),
        jaxkit=rec,
        sklearn=dict(median_s=sk_med, times_s=times[sk_label], amari_median=am_s,
                     median_1thread_s=sk1_med, times_1thread_s=times[sk1_label]),
        loadavg_before=load0, loadavg_after=load1)
