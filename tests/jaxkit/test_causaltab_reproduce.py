"""Retraining the recorded tiny recipe from scratch reproduces its recorded training
curve (loss and validation AUROC at every segment) within the record's stated
tolerance (``jaxkit/causaltab/tiny_record.json``: AUROC 0.02, loss 0.01; the same code
on the same CPU gives equal numbers, the tolerance covers other CPUs' float rounding)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from jaxkit.causaltab.longtrain import LongRecipe, train_long


@pytest.mark.slow  # one tiny training with its compilations (~70 s CPU)
def test_tiny_recipe_reproduces_its_record(tmp_path):
    rec = json.loads((resources.files("jaxkit.causaltab") / "tiny_record.json").read_text())
    r = LongRecipe(**rec["recipe"])
    train_long(r, tmp_path, eval_every=rec["eval_every"], val_tasks=rec["val_tasks"],
               baselines=False, val_cells=tuple(tuple(c) for c in rec["val_cells"]),
               log=lambda s: None)
    got = json.loads((tmp_path / "curve.json").read_text())
    tol = rec["tolerance"]
    assert [g["step"] for g in got] == [c["step"] for c in rec["curve"]]
    for g, c in zip(got, rec["curve"], strict=True):
        assert g["loss"] == pytest.approx(c["loss"], abs=tol["loss"])
        assert g["val_auroc"] == pytest.approx(c["val_auroc"], abs=tol["val_auroc"])
