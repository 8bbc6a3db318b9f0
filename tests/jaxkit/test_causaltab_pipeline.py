"""``jaxkit run causaltab`` end to end on a tiny configuration (shipped weights), and the
registry entry."""

from __future__ import annotations

import dataclasses
import json

import pytest

from jaxkit.causaltab import pipeline as P
from jaxkit.causaltab.config import QUICK, Config
from jaxkit.registry import RunContext
from jaxkit.registry import get as get_pipeline


def test_registered_with_quick_and_full():
    e = get_pipeline("causaltab")
    assert e.config(True) == QUICK and isinstance(e.config(False), Config)
    with pytest.raises(ValueError, match="int_fracs"):
        dataclasses.replace(QUICK, int_fracs=(0.0,))
    with pytest.raises(ValueError, match="methods"):
        dataclasses.replace(QUICK, methods=("notears",))
    with pytest.raises(ValueError, match="ablation_d"):  # beyond the narrow prior's d
        dataclasses.replace(QUICK, ablation_d=12)
    assert QUICK.ablation_steps == 0 < e.config(False).ablation_steps


@pytest.mark.slow  # compiles every method (minutes on a loaded 2-core machine)
def test_tiny_run_reports_every_claim_and_resumes(tmp_path):
    tiny = dataclasses.replace(QUICK, n_datasets=3, n=32, semantic_seeds=2, semantic_n=32,
                               sachs_rows=32, methods=("causaltab", "var-sort-regress",
                                                       "random"))
    ctx = RunContext(out_dir=tmp_path, config=tiny, quick=True)
    res = P.run(ctx)
    assert len(res.claims) == 5 and all(c.verdict for c in res.claims)
    assert res.claims[4].verdict == "not tested at this size"  # no ablation in QUICK
    assert "## Semantic environments" in res.markdown and len(res.figures) == 3
    json.dumps(res.metrics, default=float)
    again = RunContext(out_dir=tmp_path, config=tiny, quick=True)
    res2 = P.run(again)
    assert len(again.reloaded) >= 6  # every stage reloaded
    assert [c.measured for c in res2.claims] == [c.measured for c in res.claims]
