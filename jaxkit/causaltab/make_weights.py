"""Train the shipped CausalTab weights: ``python -m jaxkit.causaltab.make_weights
[--steps N] [--out DIR]`` (default ``jaxkit/causaltab/weights``), with checkpoints under
``DIR/../.weights-checkpoints`` so a killed training resumes. Writes ``params.npz``,
``model.json`` (config, training settings, throughput, seed) and ``curve.json`` (the
training curve, one record per chunk)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import jax

from jaxkit.io import atomic_write

from .model import ModelConfig, n_params
from .train import TrainSettings, narrow_prior, save_weights, train_model, train_prior


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=1600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--d-max", type=int, default=20)
    ap.add_argument("--n-max", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "weights")
    a = ap.parse_args(argv)
    cfg = ModelConfig(max_vars=a.d_max)
    st = TrainSettings(steps=a.steps, batch=a.batch, d_max=a.d_max, n_max=a.n_max)
    ckpt = a.out.parent / ".weights-checkpoints"
    curve: list[dict] = []
    t0 = time.time()

    def log(done, rec):
        curve.append(rec)
        print(json.dumps(rec), flush=True)
        atomic_write(a.out.parent / ".weights-curve.json", json.dumps(curve))

    params, hist, thr = train_model(jax.random.key(a.seed), cfg, st,
                                    start=narrow_prior(a.d_max, a.n_max),
                                    end=train_prior(a.d_max, a.n_max), checkpoint_dir=ckpt,
                                    on_log=log)
    meta = {"settings": asdict(st), "seed": a.seed, "throughput": thr,
            "n_params": n_params(params), "wall_seconds": time.time() - t0,
            "command": f"python -m jaxkit.causaltab.make_weights --steps {a.steps} "
                       f"--batch {a.batch} --d-max {a.d_max} --n-max {a.n_max} --seed {a.seed}"}
    save_weights(a.out, params, cfg, meta)
    atomic_write(a.out / "curve.json", json.dumps(hist, indent=0))
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
