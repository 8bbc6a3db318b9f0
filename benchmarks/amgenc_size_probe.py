"""How the AMGenC generator's close pairs grow with cell size (issue 27's plausibility).

Reloads a finished (or killed after training) ``jaxkit run amgenc`` folder: its data stage
and its trained denoiser (the checkpoint; nothing is retrained when training finished),
then samples ``--cells`` cells at each size of ``--sizes`` with the AMGenC sampler (all
three mechanisms, the run's steps and corrector, each cell at its target's number
density, as :mod:`jaxkit.amgenc.scale`), and prints per size:

- the share of cells with no pair under 1 A (the issue's target is >= 90%);
- the share of atoms with a neighbour under 1 A (the per-atom rate ``p``);
- ``(1 - p)^N``, the no-close-pair share that rate would give if close pairs were
  independent, beside the share of the smallest size's rate carried to size ``N``.

If ``p`` stays flat as N grows, the cell-level share falls only because a large cell has
more atoms to fail; if ``p`` grows with N, the generator itself is worse on large cells.

    python benchmarks/amgenc_size_probe.py RUN_DIR [--sizes 100,200,400,800] [--cells 8]
        [--steps S] [--corrector C] [--snr R] [--quick] [--set field=value ...]
        [--json out.json]

``--steps``, ``--corrector`` and ``--snr`` change the sampler only (the model and the
data stay the run's), to tell whether sampling settings alone move the rates.
``--quick`` and ``--set`` must repeat the run's own (the stages are keyed on the
resolved configuration); the run's ``run.json`` gives them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import jax
import numpy as np


def _close_atoms(pos: np.ndarray, box: float, r_min: float = 1.0) -> int:
    """Atoms with another atom closer than ``r_min`` (minimum image), of one cell."""
    d = pos[:, None, :] - pos[None, :, :]
    d -= box * np.round(d / box)
    r = np.sqrt((d * d).sum(-1))
    np.fill_diagonal(r, np.inf)
    return int((r.min(axis=1) < r_min).sum())


def main(argv: list[str] | None = None) -> int:
    from jaxkit.amgenc.config import FULL, QUICK
    from jaxkit.amgenc.data import make_data
    from jaxkit.amgenc.scale import sized_sampler
    from jaxkit.amgenc.train import fit_denoiser
    from jaxkit.distributed import make_mesh
    from jaxkit.registry import RunContext

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--sizes", default="100,200,400,800")
    p.add_argument("--cells", type=int, default=8)
    p.add_argument("--quick", action="store_true", help="the run was a --quick one")
    p.add_argument("--set", action="append", default=[], dest="sets")
    p.add_argument("--steps", type=int, default=None,
                   help="predictor steps of the sampler (default: the run's sample_steps)")
    p.add_argument("--corrector", type=int, default=None,
                   help="corrector steps per level (default: the run's corrector_steps)")
    p.add_argument("--snr", type=float, default=None,
                   help="corrector signal-to-noise ratio (default: the run's snr)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    cfg = (QUICK if args.quick else FULL).override(args.sets)
    ctx = RunContext(out_dir=args.run_dir, config=cfg, quick=args.quick, seed=0,
                     mesh=make_mesh(), resume=True)
    if not ctx.stage_path("amgenc-data").exists():
        raise SystemExit(f"{ctx.stage_path('amgenc-data')}: no data stage of this "
                         "configuration (pass the run's --set overrides)")
    data = ctx.stage("amgenc-data", lambda: make_data(cfg, ctx.rng("data")))
    ckpt = ctx.out_dir / "checkpoints" / "train" / f"{cfg.digest()[:16]}-seed{ctx.seed}"
    trained = fit_denoiser(cfg, data, ctx.key("train"), mesh=ctx.mesh, checkpoint_dir=ckpt,
                           resume=True)
    if trained.resumed_from != cfg.train_steps:
        raise SystemExit(f"{ckpt}: training resumed from step {trained.resumed_from}, not the "
                         f"finished {cfg.train_steps}; refusing to probe a retrained model")
    # sampler settings only: the model and data stay the run's
    sampling = dataclasses.replace(
        cfg, sample_steps=cfg.sample_steps if args.steps is None else args.steps,
        corrector_steps=cfg.corrector_steps if args.corrector is None else args.corrector,
        snr=cfg.snr if args.snr is None else args.snr)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        b = args.cells
        run, _, box = sized_sampler(sampling, data, trained,
                                    jax.random.fold_in(ctx.key("probe"), n), n, b,
                                    steps=sampling.sample_steps, mesh=ctx.mesh)
        t0 = time.perf_counter()
        x, _ = jax.block_until_ready(run(True, cfg.soft_eta))
        secs = time.perf_counter() - t0
        x, boxes = np.asarray(x, np.float64), np.asarray(box, np.float64)
        close = [_close_atoms(x[i] * boxes[i], boxes[i]) for i in range(b)]
        rate = float(np.sum(close) / (b * n))
        rows.append(dict(atoms=n, cells=b, no_close_pair=float(np.mean(np.equal(close, 0))),
                         atom_rate=rate, independent=(1 - rate) ** n, seconds=secs,
                         steps=sampling.sample_steps, corrector=sampling.corrector_steps,
                         snr=sampling.snr, close_per_cell=close))
    base = rows[0]["atom_rate"]
    print(f"{args.run_dir}: model at step {trained.resumed_from}; sampler: "
          f"{sampling.sample_steps} levels, corrector {sampling.corrector_steps} at snr "
          f"{sampling.snr}; {args.cells} cells per size")
    print("| atoms | no pair < 1 A | atoms with a neighbour < 1 A | (1-p)^N | smallest size's "
          "p carried to N | sampling s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['atoms']} | {r['no_close_pair']:.0%} | {r['atom_rate']:.3%} | "
              f"{r['independent']:.0%} | {(1 - base) ** r['atoms']:.0%} | {r['seconds']:.0f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
