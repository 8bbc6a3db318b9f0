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
validation figures, the training segments of :func:`segments`) and ``curve.json`` (the
training curves of every segment, one record per validation with its validation AUROC;
the baselines' are in ``model.json``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import numpy as np

from jaxkit import stats
from jaxkit.causal_model.weights_io import load_weights
from jaxkit.io import atomic_write

from . import validation as val

__all__ = ["summarize", "segments", "ship"]


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


def segments(run_dir: Path, curves: list | None = None) -> list[dict]:
    """The training segments that made ``run_dir``'s weights, first to last: each
    segment's recipe (with ``init`` naming the previous segment by its index, not a
    path), command, commit, chunks between validations (``eval_every``, from its
    ``curve.json``), CPU seconds and validation AUROC, read from the ``model.json``
    of the run and, following ``recipe.init``, of the runs it continued. ``curves``: a
    list to extend with the segments' training curves, first to last, each record
    tagged with its ``segment`` and its ``step`` counted from the first segment's start.

    Raises:
        FileNotFoundError: a segment's ``init`` folder has no ``model.json``.
    """
    chain, parts, d = [], [], Path(run_dir)
    while True:
        if not (d / "model.json").is_file():
            raise FileNotFoundError(f"{d / 'model.json'}: not found (a segment's `init`)")
        m = json.loads((d / "model.json").read_text())
        curve = json.loads((d / "curve.json").read_text()) if (d / "curve.json").is_file() \
            else []
        if "segments" in m:  # a shipped folder: its segments (and curve) already resolved
            chain[:0] = m["segments"]
            parts.insert(0, (None, curve))
            break
        r = dict(m.get("recipe", {}))
        nxt = r.get("init") or ""
        parts.insert(0, (r.get("steps", 0), curve))
        chain.insert(0, {"recipe": r, "command": m.get("command"), "commit": m.get("commit"),
                         "eval_every": m.get("eval_every") or (
                             curve[0].get("chunk", 8) if curve else 8),
                         "cpu_seconds": m.get("cpu_seconds"),
                         "val_auroc": m.get("validation", {}).get("model_auroc")})
        if not nxt:
            break
        d = Path(nxt)
    for i, g in enumerate(chain):
        g["recipe"]["init"] = f"segment {i - 1}" if i else ""
        g["command"] = re.sub(r" --init \S+", f" --init <segment {i - 1}>" if i else "",
                              g["command"] or "")
    if curves is not None:
        seg, off = 0, 0
        for steps, curve in parts:
            if steps is None:  # an already concatenated (shipped) curve
                curves.extend(curve)
                seg = len(chain) - len(parts) + 1
                off = sum(g["recipe"].get("steps", 0) for g in chain[:seg])
                continue
            curves.extend({**c, "segment": seg, "step": c["step"] + off} for c in curve)
            seg, off = seg + 1, off + steps
    return chain


def ship(run_dir: Path, dest: Path, baselines_path: Path, *, compare: Path | None = None,
         compare_label: str = "") -> dict:
    """Write ``run_dir``'s weights to ``dest`` (module docstring), scored on the validation
    cells and task count its ``model.json`` records; ``compare``: also score
    the weights there (e.g. the currently shipped ones) and record them under
    ``validation["previous"]`` with ``source`` = ``compare_label`` (default: the
    path). Returns the written ``model.json`` content.

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
        summary["previous"]["source"] = compare_label or str(compare)
    r = meta.get("recipe", {})
    curve: list[dict] = []
    meta["segments"] = segments(run_dir, curve)
    # the last segment's recipe and command, its `init` named as a segment (not a path)
    meta["recipe"] = dict(meta["segments"][-1]["recipe"])
    meta["command"] = meta["segments"][-1]["command"]
    meta["total_steps"] = sum(g["recipe"].get("steps", 0) for g in meta["segments"])
    meta["settings"] = {"n_max": r.get("n_max"), "d_max": r.get("d_max"),
                        "steps": r.get("steps"), "batch": r.get("batch"), "lr": r.get("lr")}
    meta["validation"] = summary
    dest.mkdir(parents=True, exist_ok=True)
    if dest.resolve() != run_dir.resolve():
        shutil.copyfile(run_dir / "params.npz", dest / "params.npz")
    atomic_write(dest / "model.json", json.dumps({"config": w[1]._asdict(), **meta}, indent=1))
    atomic_write(dest / "curve.json", json.dumps(curve, indent=0))
    return {"config": w[1]._asdict(), **meta}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--dest", type=Path, default=None, help="default: RUN_DIR/ship")
    ap.add_argument("--baselines", type=Path, default=None,
                    help="default: RUN_DIR/baselines.json")
    ap.add_argument("--compare", type=Path, default=None)
    ap.add_argument("--compare-label", default="", help="how model.json names --compare")
    a = ap.parse_args(argv)
    try:
        out = ship(a.run_dir, a.dest or a.run_dir / "ship",
                   a.baselines or a.run_dir / "baselines.json", compare=a.compare,
                   compare_label=a.compare_label)
    except FileNotFoundError as e:
        ap.error(str(e))
    print(json.dumps(out["validation"], indent=1))


if __name__ == "__main__":
    main()
