"""``jaxkit misaligned ...``: audit a model on your own molecules (a :class:`typer.Typer`).

``jaxkit misaligned audit data.csv --smiles-column smiles --label-column y`` (a CSV with a
header row, or a Parquet file ``data.parquet``) featurises
the molecules, makes ``--seeds`` random or scaffold splits, trains jaxkit's model
(``--model mlp|mpnn|ridge``) on each, runs the whole misaligned baseline family on the
same splits and writes ``audit.md`` and ``audit.json`` into ``--out`` (atomically).
Unparseable SMILES are an error listing their rows unless ``--skip-invalid``; train/test
duplicates are warned about and counted.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Annotated

import typer

from jaxkit._cli_common import console, err_console
from jaxkit._cli_common import fail as _fail

__all__ = ["app"]

app = typer.Typer(help="Misaligned baselines: audit a model on your own molecules.",
                  no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Misaligned baselines: audit a model on your own molecules."""


@app.command("audit")
def audit_cmd(
    data: Annotated[Path, typer.Argument(
        help="CSV file with a header row, or a Parquet file (.parquet)")],
    smiles_column: Annotated[str, typer.Option(help="column holding SMILES")] = "smiles",
    label_column: Annotated[str, typer.Option(help="column holding the numeric label")] = "y",
    split: Annotated[str, typer.Option(help="random or scaffold")] = "scaffold",
    seeds: Annotated[int, typer.Option(min=2, help="splits (and trainings)")] = 5,
    test_fraction: Annotated[float, typer.Option(help="share of molecules in test")] = 0.2,
    model: Annotated[str, typer.Option(help="mlp, mpnn or ridge")] = "mlp",
    steps: Annotated[int, typer.Option(min=50, help="training steps (multiple of 50)")] = 500,
    n_bits: Annotated[int, typer.Option(min=8, help="Morgan fingerprint bits")] = 2048,
    sigma: Annotated[float | None, typer.Option(
        help="stated experimental error of the labels (noise ceiling)")] = None,
    skip_invalid: Annotated[bool, typer.Option(
        help="drop unparseable SMILES (their rows are reported)")] = False,
    seed: Annotated[int, typer.Option(help="base seed")] = 0,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("misaligned-audit"),
) -> None:
    """Audit jaxkit's model against the misaligned baseline family on DATA."""
    import jax
    import numpy as np

    from jaxkit.io import DataError, atomic_write
    from jaxkit.stats import as_generator

    from . import evaluation, models, report
    from .features import featurise, make_splits
    from .userdata import model_fit_predict, read_molecules

    if split not in ("random", "scaffold"):
        _fail(f"--split must be 'random' or 'scaffold'; got {split!r}")
    if model not in ("mlp", "mpnn", "ridge"):
        _fail(f"--model must be 'mlp', 'mpnn' or 'ridge'; got {model!r}")
    if steps % 50:
        _fail(f"--steps must be a multiple of 50; got {steps}")
    if not 0 < test_fraction < 1:
        _fail(f"--test-fraction must lie in (0, 1); got {test_fraction}")
    try:
        smiles, labels = read_molecules(data, smiles_column, label_column)
        ds = featurise(smiles, labels, name=data.stem, n_bits=n_bits,
                       skip_invalid=skip_invalid)
        if ds.info["skipped_rows"]:
            err_console.print(f"skipped {len(ds.info['skipped_rows'])} unparseable SMILES at "
                              f"data rows {ds.info['skipped_rows'][:20]}")
        key = jax.random.key(seed)
        splits = make_splits(ds, split, as_generator(jax.random.fold_in(key, 1)), seeds,
                             test_fraction)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = evaluation.audit(
                model_fit_predict(model, models.TrainSettings(steps=steps),
                                  jax.random.fold_in(key, 2)),
                ds, splits, key=jax.random.fold_in(key, 3), sigma=sigma, name=model)
        for w in caught:
            err_console.print(f"warning: {w.message}")
    except (DataError, ValueError) as e:
        _fail(str(e))
    summ = res.summary()
    g = res.gaps[model]
    b = g["boot"]
    rows = [[report.LABELS.get(m, m), *(report.fmt(summ["metrics"][m][k])
                                       for k in ("rmse", "mae", "r2", "spearman"))]
            for m in summ["metrics"]]
    from jaxkit.report import markdown_table

    verdict = ("not significant" if g["flag"] else "model better" if b.lo > 0
               else "baseline better")
    md = "\n".join([
        f"# Misaligned-baseline audit of {data.name} ({ds.n} molecules, {split} split, "
        f"{seeds} seeds, model {model})", "",
        f"Best misaligned baseline (chosen on {g['selected_on']} sets): "
        f"{report.LABELS[g['best']]}; gap (baseline RMSE - model "
        f"RMSE) {b.estimate:+.3f} [{b.lo:+.3f}, {b.hi:+.3f}] (two-level bootstrap), paired "
        f"t test over seeds: {g['test'].verdict}; **{verdict}**.", "",
        f"Train/test duplicates per seed: {res.duplicates}.", "",
        markdown_table(["method", "RMSE", "MAE", "R2", "Spearman"], rows), ""])
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "audit.md", md)
    atomic_write(out / "audit.json", json.dumps(summ, indent=2, default=lambda v: (
        np.asarray(v).tolist())) + "\n")
    console.print(md, markup=False, highlight=False)
    console.print(f"written: {out / 'audit.md'}, {out / 'audit.json'}")
