"""Training CausalTab with a curriculum over d and n and a validation curve against the
classical baselines: ``python -m jaxkit.causaltab.longtrain --out DIR [--dim 64 ...]``.

Recipe (:class:`LongRecipe`): ``steps`` steps of ``batch`` tasks; the optimizer is
:func:`jaxkit.optim.optimizer`'s warm-up + cosine schedule (``warmup`` steps up to
``lr``, cosine down to ``0.05 lr`` at ``steps``), AdamW, clipping at norm 1 (the one
training step, :func:`jaxkit.causaltab.train.chunk_fn`). The curriculum over d and n
runs in two phases: the first ``small_frac`` of the steps draws tasks padded to
``small_d`` variables and ``small_n`` rows (cheaper steps: attention costs scale with
``n d^2`` and ``d n^2``), the rest to ``d_max`` x ``n_max``; within the run the prior moves
from the narrow one (linear ER, mostly observational,
:func:`jaxkit.causaltab.train.narrow_prior`) to the broad one
(:func:`jaxkit.causaltab.train.train_prior`: three graph families, linear / MLP /
sigmoid mechanisms, Gaussian / Laplace / uniform noise, observational, atomic and
multi-node interventions of three types, known or unknown targets, all drawn on the fly
each step) over the first half of the steps (:func:`jaxkit.kernels.sem.mix_priors`; the
mix starts at ``start_t``, 0 the narrow prior, 1 the broad one from the first step).

Training goes through :func:`jaxkit.training.fit` in segments of ``eval_every`` chunks
(``initial_step`` continuing the previous segment in the same checkpoint folder, so the
parameters equal one uninterrupted run's); after each segment the model is scored on the
fixed validation set (:mod:`jaxkit.causaltab.validation`) and the record (step, loss,
validation AUROC, CPU seconds) appended to ``DIR/curve.json``. A killed run restarted
with the same arguments resumes from its newest checkpoint. At the end ``DIR`` holds the
weights in the shipped format (:func:`jaxkit.causal_model.weights_io.save_weights`) with
the recipe, the commit and the validation figures in ``model.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import time
from pathlib import Path

import jax
import numpy as np

from jaxkit import training
from jaxkit.causal_model.model import ModelConfig, init_params, n_params
from jaxkit.checkpoint import Checkpointer
from jaxkit.io import atomic_write
from jaxkit.kernels import sem
from jaxkit.kernels import train as ktrain

from . import validation as val
from .train import (
    TrainSettings,
    chunk_fn,
    load_weights,
    narrow_prior,
    save_weights,
    train_prior,
)

__all__ = ["LongRecipe", "phase_of", "train_long", "main"]


@dataclasses.dataclass(frozen=True)
class LongRecipe:
    """Everything that fixes a long training's parameters (module docstring)."""

    dim: int = 32
    heads: int = 4
    layers: int = 2
    ffn: int = 2
    steps: int = 2000
    batch: int = 16
    lr: float = 1e-3
    warmup: int = 100
    d_max: int = 20
    n_max: int = 64
    small_d: int = 10
    small_n: int = 32
    small_frac: float = 0.3
    chunk: int = 25
    seed: int = 0
    init: str = ""  # a weights folder to start from (same architecture); "" = random
    start_t: float = 0.0  # the prior mix at step 0 (0: narrow, 1: broad from the start)

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        if self.steps < self.chunk or self.steps % self.chunk:
            raise ValueError(f"`steps` ({self.steps}) must be a positive multiple of "
                             f"`chunk` ({self.chunk})")
        if self.dim % self.heads:
            raise ValueError(f"`dim` ({self.dim}) must be divisible by `heads` ({self.heads})")
        if not 0.0 <= self.start_t <= 1.0:
            raise ValueError(f"`start_t` must lie in [0, 1]; got {self.start_t}")
        if not 0.0 <= self.small_frac < 1.0:
            raise ValueError(f"`small_frac` must lie in [0, 1); got {self.small_frac}")
        if not (3 <= self.small_d <= self.d_max and 8 <= self.small_n <= self.n_max):
            raise ValueError("need 3 <= `small_d` <= `d_max` and 8 <= `small_n` <= `n_max`; "
                             f"got {self.small_d}, {self.d_max}, {self.small_n}, {self.n_max}")

    def model(self) -> ModelConfig:
        return ModelConfig(dim=self.dim, heads=self.heads, layers=self.layers, ffn=self.ffn,
                           max_vars=self.d_max)

    def settings(self, d_max: int, n_max: int) -> TrainSettings:
        return TrainSettings(steps=self.steps, batch=self.batch, lr=self.lr, d_max=d_max,
                             n_max=n_max, chunk=self.chunk, warmup=self.warmup)


def phase_of(r: LongRecipe, chunk_index: int) -> int:
    """0 (small tasks) or 1 (full size) for the chunk ``chunk_index``."""
    return int(chunk_index * r.chunk >= r.small_frac * r.steps)


def _priors(r: LongRecipe):
    shapes = ((r.small_d, r.small_n), (r.d_max, r.n_max))
    return [(narrow_prior(d, n), train_prior(d, n)) for d, n in shapes], shapes


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def train_long(r: LongRecipe, out: Path, *, eval_every: int = 8, val_tasks: int = 24,
               max_cpu_s: float | None = None, baselines: bool = True, val_cells=val.CELLS,
               export: bool = False, log=print) -> dict:
    """Train ``r`` into ``out`` (module docstring); returns the summary written to
    ``out/model.json``. ``max_cpu_s``: stop after the segment that passes this many CPU
    seconds (the schedule still assumes ``r.steps``; the summary says where it stopped).
    ``baselines=False``: no classical baselines (a size scan's short runs); ``val_cells``
    the validation set's ``(d, n)`` cells (:func:`jaxkit.causaltab.validation.validation_set`);
    ``export``: train nothing, write the newest checkpoint's weights (a run still going or
    killed) with the summary.
    """
    r.validate()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = r.model()
    priors, shapes = _priors(r)
    fns = [chunk_fn(cfg, r.settings(d, n), None)[0] for d, n in shapes]
    n_chunks = r.steps // r.chunk
    half = max(n_chunks // 2, 1)

    def batch_fn(i):
        ph = phase_of(r, i)
        p = sem.mix_priors(*priors[ph], min(r.start_t + (1 - r.start_t) * i / half, 1.0))
        return ph, jax.tree.map(lambda a: np.broadcast_to(a, (r.chunk, *a.shape)), p)

    def step(key, state, b):
        return fns[b[0]](key, state, b[1])

    benches = val.validation_set(val_cells, n_tasks=val_tasks)
    base = val.cached_baselines(out / "baselines.json", benches,
                                key=f"{tuple(val_cells)} x {val_tasks}, seed 7") if baselines else {
        "none": [float("nan")] * sum(b.x.shape[0] for b in benches)}
    base_mean = {m: float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
                 for m, v in base.items()}
    log(json.dumps({"baselines": base_mean}))
    k_init, k_run = jax.random.split(jax.random.key(r.seed))
    _, opt = chunk_fn(cfg, r.settings(r.d_max, r.n_max), None)
    if r.init:
        p0, c0, _ = load_weights(Path(r.init))
        if c0._replace(max_vars=cfg.max_vars) != cfg:
            raise ValueError(f"`init` weights {r.init} have config {c0}, not {cfg}")
    else:
        p0 = init_params(k_init, cfg)
    state = ktrain.init(p0, opt)
    ckdir = out / "checkpoints"
    with Checkpointer(ckdir) as ck:
        done = max(ck.steps(), default=0)
    curve_path = out / "curve.json"
    curve = [c for c in (json.loads(curve_path.read_text()) if curve_path.is_file() else [])
             if c["chunk"] <= done]
    cpu0 = curve[-1]["cpu_s"] if curve else 0.0
    t0 = time.process_time()
    first = True
    stopped = None
    if export and done > 0:  # restore only: fit runs no step when steps == the checkpoint
        state = training.fit(k_run, state, step, batch_fn, steps=done, checkpoint_dir=ckdir,
                             checkpoint_every=eval_every, progress=None,
                             fingerprint=None).state
        stopped = done * r.chunk if done < n_chunks else None
    while done < n_chunks and not export:
        nxt = min((done // eval_every + 1) * eval_every, n_chunks)
        res = training.fit(k_run, state, step, batch_fn, steps=nxt,
                           checkpoint_dir=ckdir, checkpoint_every=eval_every,
                           initial_step=0 if first else done, log_every=nxt - done,
                           progress=None, fingerprint=None)
        first = False
        state, done = res.state, nxt
        a = val.model_aurocs(state.params, cfg, benches)
        rec = {"chunk": done, "step": done * r.chunk, "loss": res.history[-1].get("loss"),
               "bce": res.history[-1].get("bce"), "val_auroc": float(np.nanmean(a)),
               "cpu_s": cpu0 + time.process_time() - t0, "wall": time.time()}
        curve.append(rec)
        atomic_write(curve_path, json.dumps(curve, indent=0))
        log(json.dumps(rec))
        if max_cpu_s is not None and rec["cpu_s"] > max_cpu_s and done < n_chunks:
            stopped = done * r.chunk
            break
    params = jax.device_get(state.params)
    a = val.model_aurocs(params, cfg, benches)
    best = max(base_mean, key=lambda m: np.nan_to_num(base_mean[m], nan=-1.0))
    diff = np.asarray(a) - np.asarray(base[best])
    ok = np.isfinite(diff)
    se = float(np.std(diff[ok], ddof=1) / np.sqrt(ok.sum())) if ok.sum() > 1 else float("nan")
    mean_diff = float(np.mean(diff[ok])) if ok.any() else float("nan")
    meta = {"recipe": dataclasses.asdict(r), "commit": _commit(), "n_params": n_params(params),
            "stopped_at_step": stopped, "eval_every": eval_every,
            "validation": {"cells": [list(c) for c in val_cells], "tasks_per_cell": val_tasks,
                           "set_seed": 7, "model_auroc": float(np.nanmean(a)),
                           "baselines_auroc": base_mean, "strongest": best,
                           "diff_vs_strongest": mean_diff,
                           "diff_95ci": [mean_diff - 1.96 * se, mean_diff + 1.96 * se]},
            "cpu_seconds": curve[-1]["cpu_s"] if curve else 0.0,
            "command": "python -m jaxkit.causaltab.longtrain " + " ".join(
                f"--{k.replace('_', '-')} {v}" for k, v in dataclasses.asdict(r).items()
                if v != "")}
    save_weights(out, params, cfg, meta)
    return meta


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in dataclasses.fields(LongRecipe):
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--eval-every", type=int, default=8, help="chunks between validations")
    ap.add_argument("--val-tasks", type=int, default=24)
    ap.add_argument("--max-cpu-s", type=float, default=None)
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--export", action="store_true",
                    help="write the newest checkpoint's weights, train nothing")
    a = vars(ap.parse_args(argv))
    out, ev, vt, mc = a.pop("out"), a.pop("eval_every"), a.pop("val_tasks"), a.pop("max_cpu_s")
    nb, ex = a.pop("no_baselines"), a.pop("export")
    r = LongRecipe(**a)
    try:
        r.validate()
    except ValueError as e:
        ap.error(str(e))
    print(json.dumps(train_long(r, out, eval_every=ev, val_tasks=vt, max_cpu_s=mc,
                                baselines=not nb, export=ex)))


if __name__ == "__main__":
    main()
