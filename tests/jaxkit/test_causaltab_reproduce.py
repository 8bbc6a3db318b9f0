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


@pytest.mark.slow  # 200 steps of the shipped dim-64 recipe and 48 validation tasks (~2 min CPU)
def test_shipped_recipe_reproduces_its_first_recorded_point(tmp_path):
    """The shipped weights' first training segment, replayed from scratch for its first
    validation interval (what ``python -m jaxkit.causaltab.make_weights`` does for all
    16,000 steps), reproduces the loss and validation AUROC its ``curve.json`` recorded
    there, within the tiny record's tolerance."""
    from jaxkit.causal_model.weights_io import shipped_weights
    from jaxkit.causaltab.make_weights import recipes

    _, _, meta = shipped_weights()
    r, _, ev = recipes(meta, tmp_path)[0]
    curve = json.loads((resources.files("jaxkit.causal_model") / "weights" / "curve.json")
                       .read_text())
    want = curve[0]
    assert want["segment"] == 0 and want["step"] == ev * r.chunk
    got = train_long(r, tmp_path / "segment-0", eval_every=ev, baselines=False,
                     max_cpu_s=0.0, log=lambda s: None)
    assert got["stopped_at_step"] == want["step"]
    first = json.loads((tmp_path / "segment-0" / "curve.json").read_text())[0]
    tol = json.loads((resources.files("jaxkit.causaltab") / "tiny_record.json")
                     .read_text())["tolerance"]
    assert first["loss"] == pytest.approx(want["loss"], abs=tol["loss"])
    assert first["val_auroc"] == pytest.approx(want["val_auroc"], abs=tol["val_auroc"])
