"""``jaxkit misaligned ...``: audit a model on your own molecules (a :class:`typer.Typer`).

``jaxkit misaligned audit data.csv --smiles-column smiles --label-column y`` (a CSV with a
header row, or a Parquet file ``data.parquet``) featurises
the molecules, makes ``--seeds`` random or scaffold splits, trains jaxkit's model
(``--model mlp|mpnn|dmpnn|ridge``) on each, runs the whole misaligned baseline family on the
same splits and writes ``audit.md`` and ``audit.json`` into ``--out`` (atomically).
Unparseable SMILES are an error listing their rows unless ``--skip-invalid``; train/test
duplicates are warned about and counted.

``jaxkit misaligned audit [DATA] --predictions preds.csv`` audits *any* external model
(chemprop, a docking score, ...) from its predictions instead: ``preds.csv`` (CSV with a
header row, or Parquet) has the columns ``y_true``, ``y_pred`` and ``smiles`` (or ``id``,
a row id of DATA's ``--id-column``), optionally ``seed`` (an integer: one test set per
seed) and ``split`` (``test``, the default, or ``train``). Its test rows are the test
set; the training set of each seed is every molecule of DATA (the model's training data,
or the whole data set) that is not a test molecule of that seed, plus the ``train`` rows.
The misaligned family is fitted on that training set (the best baseline chosen on a
validation fold carved from it) and scored on the same test molecules. 0/1 labels (or
``--task classification``) give AUROC, PR-AUC, enrichment (EF 1%, EF 5%) and BEDROC
(``--lower-is-better`` for scores such as docking energies); other labels give RMSE,
MAE, R2 and Spearman. A bad file (missing columns, non-numeric cells, ids not in DATA,
labels that disagree for one molecule, a test set with one class) is a one-line error
with exit code 2, before any fitting.
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


_PRED_HELP = ("an external model's predictions (CSV with a header row, or Parquet): columns "
              "y_true, y_pred and smiles (or id, matched with DATA's --id-column); "
              "optional seed (integer, one test set per seed) and split (test or train); "
              "audited against the misaligned family fitted on DATA minus the test "
              "molecules (plus any split=train rows) instead of training jaxkit's model")


@app.command("audit")
def audit_cmd(
    data: Annotated[Path | None, typer.Argument(
        help="CSV file with a header row, or a Parquet file (.parquet); with "
             "--predictions: the model's training molecules (or the whole data set)")] = None,
    predictions: Annotated[Path | None, typer.Option(help=_PRED_HELP)] = None,
    id_column: Annotated[str, typer.Option(
        help="DATA's id column (predictions matched by id)")] = "id",
    task: Annotated[str, typer.Option(
        help="with --predictions: auto (classification when every label is 0 or 1), "
             "regression or classification")] = "auto",
    lower_is_better: Annotated[bool, typer.Option(
        help="classification: a lower y_pred means active (e.g. docking scores)")] = False,
    n_boot: Annotated[int, typer.Option(min=10, help="bootstrap resamples")] = 1000,
    smiles_column: Annotated[str, typer.Option(help="column holding SMILES")] = "smiles",
    label_column: Annotated[str, typer.Option(help="column holding the numeric label")] = "y",
    split: Annotated[str, typer.Option(help="random or scaffold")] = "scaffold",
    seeds: Annotated[int, typer.Option(min=2, help="splits (and trainings)")] = 5,
    test_fraction: Annotated[float, typer.Option(help="share of molecules in test")] = 0.2,
    model: Annotated[str, typer.Option(help="mlp, mpnn, dmpnn (bond-aware) or ridge")] = "mlp",
    steps: Annotated[int, typer.Option(min=50, help="training steps (multiple of 50)")] = 500,
    n_bits: Annotated[int, typer.Option(min=8, help="Morgan fingerprint bits")] = 2048,
    sigma: Annotated[float | None, typer.Option(
        help="stated experimental error of the labels (noise ceiling)")] = None,
    skip_invalid: Annotated[bool, typer.Option(
        help="drop unparseable SMILES (their rows are reported)")] = False,
    seed: Annotated[int, typer.Option(help="base seed")] = 0,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("misaligned-audit"),
) -> None:
    """Audit a model against the misaligned baseline family: jaxkit's own model trained on
    DATA, or an external model's --predictions."""
    import jax
    import numpy as np

    from jaxkit.io import DataError, atomic_write
    from jaxkit.stats import as_generator

    from . import evaluation, models
    from .features import featurise, make_splits
    from .userdata import model_fit_predict, read_molecules

    if predictions is not None:
        _audit_predictions(predictions, data, smiles_column, label_column, id_column, task,
                           lower_is_better, n_bits, sigma, n_boot, seed, out)
        return
    if data is None:
        _fail("give DATA (molecules to train jaxkit's model on) or --predictions PATH")
    if split not in ("random", "scaffold"):
        _fail(f"--split must be 'random' or 'scaffold'; got {split!r}")
    if model not in ("mlp", "mpnn", "dmpnn", "ridge"):
        _fail(f"--model must be 'mlp', 'mpnn', 'dmpnn' or 'ridge'; got {model!r}")
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
    summ = res.summarise()
    md = _regression_md(
        res, summ, model, f"# Misaligned-baseline audit of {data.name} ({ds.n} molecules, "
        f"{split} split, {seeds} seeds, model {model})")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "audit.md", md)
    atomic_write(out / "audit.json", json.dumps(summ.as_dict(), indent=2, default=lambda v: (
        np.asarray(v).tolist())) + "\n")
    console.print(md, markup=False, highlight=False)
    console.print(f"written: {out / 'audit.md'}, {out / 'audit.json'}")


def _regression_md(res, summ, model: str, head: str) -> str:
    """The regression audit's markdown: ``head``, the best misaligned baseline (chosen on
    validation sets) against ``model`` with the bootstrap gap and the paired t verdict,
    the duplicates and the metrics table."""
    from jaxkit.report import markdown_table

    from . import report

    g = res.gaps[model]
    b = g.boot
    rows = [[report.LABELS.get(m, m), *(report.fmt(summ.metrics[m][k])
                                       for k in ("rmse", "mae", "r2", "spearman"))]
            for m in summ.metrics]
    verdict = ("not significant" if g.flag else "model better" if b.lo > 0
               else "baseline better")
    return "\n".join([
        head, "", f"Best misaligned baseline (chosen on {g.selected_on} sets): "
        f"{report.LABELS.get(g.best, g.best)}; gap (baseline RMSE - model RMSE) "
        f"{b.estimate:+.3f} [{b.lo:+.3f}, {b.hi:+.3f}] (two-level bootstrap), paired t "
        f"test over seeds: {g.test.verdict}; **{verdict}**.", "",
        f"Train/test duplicates per seed: {res.duplicates}.", "",
        markdown_table(["method", "RMSE", "MAE", "R2", "Spearman"], rows), ""])


def _audit_predictions(predictions: Path, data: Path | None, smiles_column: str,
                       label_column: str, id_column: str, task: str, lower_is_better: bool,
                       n_bits: int, sigma: float | None, n_boot: int, seed: int,
                       out: Path) -> None:
    """``audit --predictions``: an external model's predictions against the family (the
    module docstring); writes ``audit.md`` and ``audit.json`` into ``out``."""
    import jax
    import numpy as np

    from jaxkit.io import DataError, atomic_write
    from jaxkit.report import markdown_table

    from . import classification as C
    from . import evaluation, report
    from .features import Splits, featurise
    from .metrics import SCREENING
    from .userdata import assemble_predictions, read_ids, read_molecules, read_predictions

    if task not in ("auto", "regression", "classification"):
        _fail(f"--task must be 'auto', 'regression' or 'classification'; got {task!r}")
    try:
        preds = read_predictions(predictions)
        table = None
        if data is not None:
            smi, lab = read_molecules(data, smiles_column, label_column)
            table = (smi, lab, read_ids(data, id_column)) if preds.by == "id" else (smi, lab)
        us = assemble_predictions(preds, table, data)
        labels01 = bool(np.isin(us.y, (0.0, 1.0)).all())
        kind = ("classification" if labels01 else "regression") if task == "auto" else task
        if kind == "classification" and not labels01:
            raise DataError(f"{predictions}: --task classification needs labels 0 or 1")
        pred = -us.pred if (lower_is_better and kind == "classification") else us.pred
        ds = featurise(us.smiles, us.y, name=predictions.stem, n_bits=n_bits)
        splits = Splits("user", us.train, us.test)
        if kind == "classification":
            pos = [(us.y[t] > 0.5).sum() for t in us.test]
            one = [us.seeds[s] for s, t in enumerate(us.test) if pos[s] in (0, t.sum())]
            if one:
                raise DataError(f"{predictions}: the test rows of seeds {one} hold one class; "
                                "the AUROC is undefined there")
        key = jax.random.key(seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if kind == "classification":
                res = C.audit_classes(key, ds, splits, pred, name="model", n_boot=n_boot)
            else:
                calls = [0]

                def fit_predict(_d, _tr, te):
                    calls[0] += 1
                    return us.pred[calls[0] - 1, te]

                res = evaluation.audit(fit_predict, ds, splits, key=key, sigma=sigma,
                                       name="model", n_boot=n_boot)
        for w in caught:
            if not issubclass(w.category, DeprecationWarning):  # third-party imports
                err_console.print(f"warning: {w.message}")
    except (DataError, ValueError) as e:
        _fail(str(e))
    head = (f"# Misaligned-baseline audit of {predictions.name} ({kind}; {ds.n} molecules, "
            f"{len(us.seeds)} seed(s), test molecules per seed "
            f"{[int(t.sum()) for t in us.test]}, training molecules per seed "
            f"{[int(t.sum()) for t in us.train]})")
    if kind == "classification":
        g = res.gaps["model"]
        b = g.boot
        keys = (*SCREENING, "accuracy")
        undefined = (f", {b.undefined} resamples with one class left out"
                     if b.undefined else "")
        rows = [[report.LABELS.get(m, m), *(report.fmt(res.metrics[m][k]) for k in keys)]
                for m in res.metrics]
        md = "\n".join([
            head, "", f"Best misaligned baseline (chosen on {g.selected_on} sets by AUROC"
            f"; {res.validation_undefined} validation set(s) with one class left out): "
            f"{report.LABELS.get(g.best, g.best)}; AUROC gap (model - baseline) "
            f"{b.estimate:+.3f} [{b.lo:+.3f}, {b.hi:+.3f}] (two-level bootstrap"
            f"{undefined}); paired t over seeds: {g.test.verdict}.", "",
            "Scores: higher = predicted active" + (" (y_pred negated: --lower-is-better)"
                                                   if lower_is_better else "")
            + "; EF at 1% and 5%, BEDROC at alpha 20; accuracy at score > 1/2.", "",
            markdown_table(["method", "AUROC", "PR-AUC", "EF 1%", "EF 5%", "BEDROC",
                            "accuracy"], rows), ""])
        summ = res.as_dict()
    else:
        summ = res.summarise()
        md = _regression_md(res, summ, "model", head)
        summ = summ.as_dict()
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "audit.md", md)
    atomic_write(out / "audit.json", json.dumps(
        {"task": kind, "seeds": us.seeds, **summ}, indent=2,
        default=lambda v: np.asarray(v).tolist()) + "\n")
    console.print(md, markup=False, highlight=False)
    console.print(f"written: {out / 'audit.md'}, {out / 'audit.json'}")
