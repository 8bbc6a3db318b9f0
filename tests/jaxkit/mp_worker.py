"""Worker for the multi-process test: one of several JAX processes on localhost.

Usage: python mp_worker.py PROCESS_ID NUM_PROCESSES PORT OUT.npy
Each process owns 2 CPU devices and its slice of a batch of datasets; together they fit
FastICA on the global batch sharded over all processes' devices (gloo collectives).
"""

import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jaxkit.kernels.ica import fastica  # noqa: E402

from jaxkit import distributed as jd  # noqa: E402

pid, nproc, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
assert jd.initialize(f"localhost:{port}", nproc, pid)
assert jax.process_count() == nproc and jax.device_count() == 2 * nproc

sys.path.insert(0, os.path.dirname(__file__))
from mp_data import datasets  # noqa: E402

xs, ws = datasets()
per = xs.shape[0] // nproc
mesh = jd.make_mesh({"data": -1})
local = (xs[pid * per:(pid + 1) * per], ws[pid * per:(pid + 1) * per])
gx, gw = jd.global_batch(local, mesh)
assert gx.shape == xs.shape  # global shape assembled from per-process rows
fit = jd.sharded_vmap(lambda x, w: fastica(None, x, w_init=w).components, mesh)
comps = multihost_utils.process_allgather(fit(gx, gw), tiled=True)
if pid == 0:
    np.save(out, np.asarray(comps))
jnp.zeros(()).block_until_ready()
