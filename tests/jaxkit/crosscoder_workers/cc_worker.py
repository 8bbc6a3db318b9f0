"""Subprocess worker of the crosscoder-training tests.

Usage: python cc_worker.py STORE OUT.npz STEPS [--ckpt DIR] [--every N] [--sleep S]
       [--resume] [--devices N] [--mesh data=4,model=2] [--mp PID NPROC PORT]

Trains on the store (settings of cc_common) and writes the final params to OUT.npz
(process 0). ``--sleep`` pauses after every step (so a test can kill it mid-run);
``--mp`` joins a jax.distributed run on localhost with gloo CPU collectives.
"""

import argparse
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("store")
ap.add_argument("out")
ap.add_argument("steps", type=int)
ap.add_argument("--ckpt", default=None)
ap.add_argument("--every", type=int, default=3)
ap.add_argument("--sleep", type=float, default=0.0)
ap.add_argument("--resume", action="store_true")
ap.add_argument("--devices", type=int, default=1)
ap.add_argument("--mesh", default="data=-1")
ap.add_argument("--mp", nargs=3, type=int, default=None)
a = ap.parse_args()

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={a.devices}"

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxkit import distributed as jd  # noqa: E402

if a.mp is not None:
    pid, nproc, port = a.mp
    assert jd.initialize(f"localhost:{port}", nproc, pid)
    assert jax.process_count() == nproc

from jaxkit.crosscoder.train import train  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from cc_common import BATCH, SEED, train_kwargs  # noqa: E402

axes = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in a.mesh.split(",")}
mesh = jd.make_mesh(axes)


def slow(i, m):
    print(f"step {i} loss {m['loss']:.6f}", flush=True)
    time.sleep(a.sleep)


r = train(jax.random.key(SEED), a.store, batch_size=BATCH, seed=SEED, steps=a.steps,
          mesh=mesh, checkpoint_dir=a.ckpt, checkpoint_every=a.every, resume=a.resume,
          on_step=slow, **train_kwargs())
if jax.process_index() == 0:
    np.savez(a.out, **r.params._asdict(), resumed_from=-1 if r.resumed_from is None
             else r.resumed_from)
print("done", flush=True)
