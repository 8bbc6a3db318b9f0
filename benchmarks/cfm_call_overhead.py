"""Where the CFM training step loses time when it is called once per step (issue 31).

``bench_flow.py --only train`` times jaxkit's CFM step (64-D, batch 256, the MLP of
``bench_flow``) two ways: one jitted call per step, as the PyTorch peers run, and 20 steps
per call in one ``lax.scan``. On 2-core AVX2 machines the scan reached 1.6-1.7x the peers
and the per-call step only 1.07-1.13x. This probe times, in alternating rounds of one
process, the same step

- one call per step (:func:`jaxkit.bench.time_jax_loop`, the state donated),
- ``--chunk`` steps per call in one ``lax.scan`` (per step),
- an identity "step" on the same state and data (returns the state plus 0): the fixed
  cost of one call, i.e. Python dispatch of the state's leaves, donation and the wait,

and prints each round and the medians, so that the per-call gap splits into the fixed
dispatch cost and the rest. Run it once as is and once under ``taskset -c 0`` (one core:
XLA's thread pool has one thread, no hand-off between threads between calls)::

    python benchmarks/cfm_call_overhead.py [--rounds 3] [--calls 200] [--json out.json]
    taskset -c 0 python benchmarks/cfm_call_overhead.py ...
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_flow as bf  # noqa: E402

from jaxkit import bench  # noqa: E402


def identity_step(state, key, data):
    """A step that does no work: the state (plus 0, so a new buffer) and a zero loss."""
    del key, data
    return jax.tree.map(lambda a: a + 0 if hasattr(a, "dtype") else a, state), jnp.zeros(())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cfm_call_overhead", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    p.add_argument("--calls", type=int, default=200, help="timed calls per round (200)")
    p.add_argument("--chunk", type=int, default=bf.CHUNK, help="steps per scan call (20)")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    if min(args.dim, args.batch, args.rounds, args.calls, args.chunk) < 1:
        p.error("--dim, --batch, --rounds, --calls and --chunk must be >= 1")
    t0 = time.perf_counter()
    env = bench.environment(peers=())
    env["loadavg_at_start"] = os.getloadavg()
    data = bf.mixture_data(bf.N_DATA, args.dim, seed=0)
    model = bf.make_net(jax.random.key(0), args.dim)
    init, step = bf.make_train_step(bf.apply_net, args.batch, kind="cfm")
    n_scan = max(3, args.calls // args.chunk)
    rows = []
    for r in range(args.rounds):
        key = jax.random.key(r + 1)
        call = bench.time_jax_loop(step, init(model), key, data, n_runs=args.calls,
                                   warmup=10, name="one step per call")
        scan = bench.time_jax_loop(bf.scan_steps(step, args.chunk), init(model), key, data,
                                   n_runs=n_scan, warmup=2, items=args.chunk,
                                   name=f"{args.chunk} steps per call")
        ident = bench.time_jax_loop(identity_step, init(model), key, data,
                                    n_runs=args.calls, warmup=10, name="identity call")
        row = dict(round=r, per_call_ms=call.median_s * 1e3,
                   scan_per_step_ms=scan.median_s * 1e3 / args.chunk,
                   identity_call_ms=ident.median_s * 1e3, flops_per_step=call.flops)
        row["gap_ms"] = row["per_call_ms"] - row["scan_per_step_ms"]
        rows.append(row)
        print(f"round {r}: one step per call {row['per_call_ms']:.3f} ms, in a scan "
              f"{row['scan_per_step_ms']:.3f} ms per step, identity call "
              f"{row['identity_call_ms']:.3f} ms; gap {row['gap_ms']:.3f} ms", flush=True)
    med = {k: float(np.median([r[k] for r in rows]))
           for k in ("per_call_ms", "scan_per_step_ms", "identity_call_ms", "gap_ms")}
    roof = (env["machine"].get("roofline_gflops") or {}).get("float32")
    fl = rows[0]["flops_per_step"]
    line = (f"medians over {args.rounds} rounds: per call {med['per_call_ms']:.3f} ms, scan "
            f"{med['scan_per_step_ms']:.3f} ms/step, identity {med['identity_call_ms']:.3f} "
            f"ms, gap {med['gap_ms']:.3f} ms (of which dispatch <= identity)")
    if fl:
        line += f"; XLA FLOPs/step {fl:.3g}"
    if fl and roof:
        line += (f"; scan at {fl / med['scan_per_step_ms'] / 1e6 / roof:.0%}, per call at "
                 f"{fl / med['per_call_ms'] / 1e6 / roof:.0%} of the f32 roofline "
                 f"{roof:.0f} GFLOP/s")
    print(line)
    print(bench.environment_line(env, time.perf_counter() - t0))
    if args.json:
        bench.write_json(args.json, dict(environment=env, rounds=rows, medians=med,
                                         args=vars(args)))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
