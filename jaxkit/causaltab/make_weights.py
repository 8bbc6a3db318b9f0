"""Train the shipped CausalTab weights: ``python -m jaxkit.causaltab.make_weights
[--steps N] [--out DIR]`` (default ``jaxkit/causal_model/weights``), with checkpoints under
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

from jaxkit.causal_model.model import ModelConfig, n_params
from jaxkit.io import atomic_write

from .train import (
    TrainSettings,
    load_weights,
    narrow_prior,
    save_weights,
    train_model,
    train_prior,
)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=1600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--d-max", type=int, default=20)
    ap.add_argument("--n-max", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).parents[1] / "causal_model" / "weights")
    ap.add_argument("--init", type=Path, default=None,
                    help="continue from these weights (broad prior only, no curriculum)")
    a = ap.parse_args(argv)
    cfg = ModelConfig(max_vars=a.d_max)
    init = None
    if a.init is not None:
        init, cfg, old = load_weights(a.init)
        prev = old.get("command", "?")
    st = TrainSettings(steps=a.steps, batch=a.batch, d_max=a.d_max, n_max=a.n_max)
    tag = f"{a.steps}-{a.batch}-{a.seed}" + ("-cont" if init is not None else "")
    ckpt = a.out.parent / f".weights-checkpoints-{tag}"
    curve: list[dict] = []
    t0 = time.time()

    def log(done, rec):
        curve.append(rec)
        print(json.dumps(rec), flush=True)
        atomic_write(a.out.parent / ".weights-curve.json", json.dumps(curve))

    start = narrow_prior(a.d_max, a.n_max) if init is None else None
    params, hist, thr = train_model(jax.random.key(a.seed), cfg, st, start=start,
                                    end=train_prior(a.d_max, a.n_max), params=init,
                                    checkpoint_dir=ckpt, on_log=log)
    meta = {"settings": asdict(st), "seed": a.seed, "throughput": thr,
            "n_params": n_params(params), "wall_seconds": time.time() - t0,
            "command": f"python -m jaxkit.causaltab.make_weights --steps {a.steps} "
                       f"--batch {a.batch} --d-max {a.d_max} --n-max {a.n_max} --seed {a.seed}"
                       + (f" --init {a.init}" if init is not None else "")}
    if init is not None:
        meta["continued_from"] = prev
    save_weights(a.out, params, cfg, meta)
    old_curve = []
    if a.init is not None and (a.init / "curve.json").is_file():
        old_curve = json.loads((a.init / "curve.json").read_text())
        off = old_curve[-1]["step"] if old_curve else 0
        hist = [{**h, "step": h["step"] + off} for h in hist]
    atomic_write(a.out / "curve.json", json.dumps(old_curve + hist, indent=0))
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
