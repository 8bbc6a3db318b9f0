"""Retrain the shipped CausalTab weights from scratch: ``python -m
jaxkit.causaltab.make_weights [--work DIR] [--out DIR] [--segments K]``.

The shipped ``model.json`` lists the training segments that made the weights
(:func:`jaxkit.causaltab.ship.segments`): each a :class:`~jaxkit.causaltab.longtrain.LongRecipe`
whose ``init`` is the previous segment. This command runs them in order with
:func:`~jaxkit.causaltab.longtrain.train_long` into ``WORK/segment-I`` (each resumable: a
killed run started again continues from its newest checkpoint), then compares the last
segment's weights with the shipped ones on the fixed validation set
(:mod:`jaxkit.causaltab.validation`) and writes ``OUT/`` in the shipped format with the
comparison under ``reproduction`` in ``model.json``. ``--segments K`` runs only the first
K segments (and compares nothing).

Reproduction tolerance: on the CPU and code that made them, the retrained parameters
equal the shipped ones (the training is deterministic given its keys); on another
machine float rounding differs, and the validation AUROC should agree within 0.02 (the
tolerance :mod:`tests.jaxkit.test_causaltab_reproduce` checks on a tiny recipe's whole
curve).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import jax
import numpy as np

from jaxkit.causal_model.weights_io import load_weights, save_weights, shipped_weights
from jaxkit.io import atomic_write

from . import validation as val
from .longtrain import LongRecipe, train_long

__all__ = ["main", "recipes"]


def recipes(meta: dict, work: Path) -> list[tuple[LongRecipe, Path, int]]:
    """``(recipe, out_dir, eval_every)`` of each segment of ``meta["segments"]`` (a
    shipped ``model.json``), ``init`` pointing at the previous segment's folder under
    ``work``.

    Raises:
        ValueError: ``meta`` lists no segments (weights not made by the long training).
    """
    segs = meta.get("segments")
    if not segs:
        raise ValueError("model.json lists no training `segments`: these weights were not "
                         "made by jaxkit.causaltab.longtrain")
    names = {f.name for f in dataclasses.fields(LongRecipe)}
    out = []
    for i, g in enumerate(segs):
        r = {k: v for k, v in g["recipe"].items() if k in names}
        r["init"] = str(work / f"segment-{i - 1}") if i else ""
        out.append((LongRecipe(**r), work / f"segment-{i}", int(g.get("eval_every", 8))))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("causaltab-weights-work"),
                    help="segment folders (checkpoints, curves)")
    ap.add_argument("--out", type=Path, default=None, help="default: WORK/weights")
    ap.add_argument("--segments", type=int, default=None,
                    help="run only the first K segments")
    a = ap.parse_args(argv)
    w = shipped_weights()
    if w is None:
        ap.error("no shipped weights in jaxkit/causal_model/weights to read the recipe from")
    try:
        plan = recipes(w[2], a.work)
    except ValueError as e:
        ap.error(str(e))
    if a.segments is not None and not 1 <= a.segments <= len(plan):
        ap.error(f"--segments must be in [1, {len(plan)}]; got {a.segments}")
    for r, out, ev in plan[:a.segments]:
        print(json.dumps({"segment": str(out), "recipe": dataclasses.asdict(r)}), flush=True)
        train_long(r, out, eval_every=ev, baselines=False)
    if a.segments is not None and a.segments < len(plan):
        return
    mine = load_weights(plan[-1][1])
    cells = tuple(tuple(c) for c in w[2]["validation"]["cells"])
    n_tasks = int(w[2]["validation"]["tasks_per_cell"])
    benches = val.validation_set(cells, n_tasks=n_tasks)
    au_new = float(np.nanmean(val.model_aurocs(mine[0], mine[1], benches)))
    au_old = float(np.nanmean(val.model_aurocs(w[0], w[1], benches)))
    diff = max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
               for x, y in zip(jax.tree.leaves(mine[0]), jax.tree.leaves(w[0]), strict=True))
    rep = {"val_auroc_retrained": au_new, "val_auroc_shipped": au_old,
           "auroc_difference": au_new - au_old, "max_abs_param_difference": diff,
           "within_tolerance": abs(au_new - au_old) <= 0.02}
    dest = a.out or a.work / "weights"
    dest.mkdir(parents=True, exist_ok=True)
    meta = {**mine[2], "segments": w[2]["segments"], "reproduction": rep}
    save_weights(dest, mine[0], mine[1], meta)
    atomic_write(dest / "reproduction.json", json.dumps(rep, indent=1))
    print(json.dumps(rep))


if __name__ == "__main__":
    main()
