"""Score a long training's weights on the validation set against the classical baselines
and write them in the shipped format: ``python -m jaxkit.causaltab.ship RUN_DIR
[--dest DIR] [--baselines FILE] [--compare OLD_DIR]``.

:func:`summarize` computes, on the fixed validation set of :mod:`.validation` (the
cells and task count the run recorded), the model's mean AUROC, each baseline's
(DirectLiNGAM, NOTEARS, PC, GES), and the paired AUROC difference against the strongest
baseline (chosen on the validation set itself, so the difference is an in-distribution
figure, not a test-set claim) with its 95% t interval (:func:`jaxkit.stats.t_interval`).
:func:`ship` copies ``params.npz`` and writes ``model.json`` (config, recipe, commit,
``settings.n_max`` for :func:`jaxkit.causal_model.predict.predict`'s row chunks, the
validation figures) and ``curve.json`` (the training curve, one record per segment with
its validation AUROC; the baselines' are in ``model.json``).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from jaxkit import stats
from jaxkit.causal_model.weights_io import load_weights
from jaxkit.io import atomic_write

from . import validation as val

__all__ = ["summarize", "ship"]


def summarize(weights, baselines: dict[str, list[float]], *, cells=val.CELLS,
              n_tasks: int = 24) -> dict:
    """Validation figures of ``weights`` (``(params, cfg, meta)``) against ``baselines``
    (per-task AUROCs in the set's order, :func:`.validation.baseline_aurocs`)."""
    params, cfg, _ = weights
    benches = val.validation_set(cells, n_tasks=n_tasks)
    a = np.asarray(val.model_aurocs(params, cfg, benches))
    means = {m: float(np.nanmean(v)) for m, v in baselines.items()}
    best = max(means, key=means.get)
    diff = stats.paired_difference(a, np.asarray(baselines[best], np.float64))
    mid, half = stats.t_interval(diff)
    return {"cells": [list(c) for c in cells], "tasks_per_cell": n_tasks, "set_seed": 7,
            "model_auroc": float(np.nanmean(a)), "baselines_auroc": means,
            "strongest": best, "diff_vs_strongest": float(np.nanmean(diff)),
            "diff_95ci": [mid - half, mid + half], "n_paired": int(np.isfinite(diff).sum()),
            "per_cell_model_auroc": [float(np.nanmean(a[i * n_tasks:(i + 1) * n_tasks]))
                                     for i in range(len(cells))]}


def ship(run_dir: Path, dest: Path, baselines_path: Path, *, compare: Path | None = None
         ) -> dict:
    """Write ``run_dir``'s weights to ``dest`` (module docstring), scored on the validation
    cells and task count its ``model.json`` records; ``compare``: also score
    the weights there (e.g. the currently shipped ones) and record them under
    ``validation["previous"]``. Returns the written ``model.json`` content.

    Raises:
        FileNotFoundError: naming a missing ``params.npz``, ``model.json`` or baselines
            file.
    """
    run_dir, dest, baselines_path = Path(run_dir), Path(dest), Path(baselines_path)
    for f in (run_dir / "params.npz", run_dir / "model.json", baselines_path):
        if not f.is_file():
            raise FileNotFoundError(f"{f}: not found")
    w = load_weights(run_dir)
    meta = dict(w[2])
    base = json.loads(baselines_path.read_text())["auroc"]
    v = meta.get("validation", {})
    n_tasks = int(v.get("tasks_per_cell", 24))
    cells = tuple(tuple(c) for c in v.get("cells", val.CELLS))
    summary = summarize(w, base, cells=cells, n_tasks=n_tasks)
    if compare is not None:
        summary["previous"] = summarize(load_weights(compare), base, cells=cells,
                                        n_tasks=n_tasks)
        summary["previous"]["source"] = str(compare)
    r = meta.get("recipe", {})
    meta["settings"] = {"n_max": r.get("n_max"), "d_max": r.get("d_max"),
                        "steps": r.get("steps"), "batch": r.get("batch"), "lr": r.get("lr")}
    meta["validation"] = summary
    dest.mkdir(parents=True, exist_ok=True)
    if dest.resolve() != run_dir.resolve():
        shutil.copyfile(run_dir / "params.npz", dest / "params.npz")
    atomic_write(dest / "model.json", json.dumps({"config": w[1]._asdict(), **meta}, indent=1))
    curve = json.loads((run_dir / "curve.json").read_text()) \
        if (run_dir / "curve.json").is_file() else []
    atomic_write(dest / "curve.json", json.dumps(curve, indent=0))
    return {"config": w[1]._asdict(), **meta}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--dest", type=Path, default=None, help="default: RUN_DIR/ship")
    ap.add_argument("--baselines", type=Path, default=None,
                    help="default: RUN_DIR/baselines.json")
    ap.add_argument("--compare", type=Path, default=None)
    a = ap.parse_args(argv)
    try:
        out = ship(a.run_dir, a.dest or a.run_dir / "ship",
                   a.baselines or a.run_dir / "baselines.json", compare=a.compare)
    except FileNotFoundError as e:
        ap.error(str(e))
    print(json.dumps(out["validation"], indent=1))


if __name__ == "__main__":
    main()
