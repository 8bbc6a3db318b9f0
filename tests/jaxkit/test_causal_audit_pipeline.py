"""causal-audit claims on hand-made cells (each claim's computation can say yes and no),
the report layout, and (slow) the quick pipeline end to end with a resumed rerun and the
benchmark script's smoke run."""

import importlib.util
import json
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxkit.causal_audit import report as R
from jaxkit.causal_audit.audit import reisach_cells
from jaxkit.causal_audit.config import QUICK, Config
from jaxkit.causal_audit.grid import CellResult
from jaxkit.claims import VERDICTS

K = 24
METHODS = ("var-sort-regress", "random-sort-regress", "r2-sort-regress", "direct-lingam")
CFG = Config(d=4, n=80, batch=K, host_datasets=0, methods=METHODS,
             pairs=("noise=gaussian/laplace;scale=raw/standardised/iscm",), sizes=(80, 160),
             consistency_methods=("direct-lingam", "var-sort-regress"))


def _cell(spec, rng, *, vs, r2, f1):
    f1 = {m: np.clip(v + rng.normal(0, 0.03, K), 0, 1) for m, v in f1.items()}
    shd = {m: (1 - v) * 6 for m, v in f1.items()}
    return CellResult(spec, f1, shd, vs + rng.normal(0, 0.02, K), r2 + rng.normal(0, 0.02, K),
                      np.ones(K, bool))


def _fake(reisach_holds: bool):
    """Results in which the Reisach headline holds (or is reversed)."""
    rng = np.random.default_rng(0)
    rc = reisach_cells(CFG)
    if reisach_holds:
        raw = _cell(rc["raw"], rng, vs=0.95, r2=0.8, f1={
            "var-sort-regress": 0.85, "random-sort-regress": 0.4, "r2-sort-regress": 0.6,
            "direct-lingam": 0.45})
        std = _cell(rc["standardised"], rng, vs=0.5, r2=0.8, f1={
            "var-sort-regress": 0.4, "random-sort-regress": 0.4, "r2-sort-regress": 0.6,
            "direct-lingam": 0.45})
        std.r2_sort = raw.r2_sort.copy()
        iscm = _cell(rc["iscm"], rng, vs=0.5, r2=0.5, f1={
            "var-sort-regress": 0.4, "random-sort-regress": 0.4, "r2-sort-regress": 0.4,
            "direct-lingam": 0.45})
    else:  # not sortable, the floor weak everywhere, standardising changes nothing
        f1 = {"var-sort-regress": 0.3, "random-sort-regress": 0.6, "r2-sort-regress": 0.5,
              "direct-lingam": 0.8}
        raw = _cell(rc["raw"], rng, vs=0.3, r2=0.3, f1=f1)
        std = _cell(rc["standardised"], rng, vs=0.3, r2=0.8, f1=f1)
        std.f1 = {m: v.copy() for m, v in raw.f1.items()}
        iscm = _cell(rc["iscm"], rng, vs=0.9, r2=0.9, f1=f1)
    results = {rc["raw"]: raw, rc["standardised"]: std, rc["iscm"]: iscm}
    for s in list(results):  # the laplace column of the pair
        lap = s.replace(noise="laplace")
        results[lap] = _cell(lap, rng, vs=0.9, r2=0.7, f1={m: 0.7 for m in METHODS})
    sizes = []
    for n in CFG.sizes:
        c = _cell(CFG.base().replace(n=n), rng, vs=0.9, r2=0.7, f1={m: 0.7 for m in METHODS})
        c.shd["direct-lingam"] = np.full(K, 40.0 / n if reisach_holds else n / 10.0) + \
            rng.uniform(0, 0.1, K)
        sizes.append(c)
    return results, sizes


@pytest.mark.parametrize("holds", [True, False])
def test_each_claim_can_say_yes_and_no(holds):
    results, sizes = _fake(holds)
    comps = R.rank_comparisons(jax.random.key(0), CFG, results, sizes)
    claims = R.claims(CFG, results, sizes, comps)
    assert len(claims) == 7 and all(c.verdict in VERDICTS for c in claims)
    want = "yes" if holds else "no"
    verdicts = [c.verdict for c in claims]
    # var-sortable; competitive; falls to chance; R2 survives; iSCM removes both;
    # ranking changes; DirectLiNGAM consistent
    assert verdicts[0] == want
    assert verdicts[1] == want
    assert verdicts[2] == want
    assert verdicts[3] == want
    assert verdicts[4] == want
    assert verdicts[5] == want
    assert verdicts[6] == want


def test_report_lists_findings_floors_and_failures(tmp_path):
    results, sizes = _fake(True)
    next(iter(results.values())).failures["(simulator)"] = "2 of 24 datasets are invalid"
    comps = R.rank_comparisons(jax.random.key(0), CFG, results, sizes)
    claims = R.claims(CFG, results, sizes, comps)
    md = R.markdown(CFG, results, sizes, comps, claims, quick=True, seed=0, seconds=1.0)
    for text in ("### Findings per method", "**var-sort-regress**", "Ranking instability",
                 "floor beats a method", "### Consistency", "2 of 24 datasets are invalid",
                 "Reisach et al. reproduction"):
        assert text in md
    figs = R.figures(CFG, results, sizes, tmp_path)
    assert len(figs) == 2 and all(f.stat().st_size > 1000 for f in figs)


def test_quick_config_is_small():
    assert QUICK.batch <= 16 and QUICK.d <= 5 and len(QUICK.sizes) <= 3
    QUICK.grid_pairs()  # every pair parses


@pytest.mark.slow
def test_quick_pipeline_runs_and_resumes(tmp_path):
    from jaxkit import registry

    entry = registry.get("causal-audit")
    ctx = registry.RunContext(tmp_path, config=QUICK, quick=True)
    res = entry.run(ctx)
    assert len(res.claims) == 7 and all(c.verdict in VERDICTS for c in res.claims)
    assert len(res.figures) == len(QUICK.pairs) + 1
    json.dumps(res.metrics, default=float)
    again = registry.RunContext(tmp_path, config=QUICK, quick=True)
    res2 = entry.run(again)
    assert again.reloaded == ["grid", "sizes"]  # a killed run resumes at its stages
    assert [c.measured for c in res2.claims] == [c.measured for c in res.claims]


@pytest.mark.slow
def test_benchmark_script_smoke(tmp_path):
    path = Path(__file__).parents[2] / "benchmarks" / "bench_causal_audit.py"
    spec = importlib.util.spec_from_file_location("bench_causal_audit", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "b.json"
    assert mod.main(["--quick", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {r["case"].split(" x")[0] for r in rows} >= {"var+R2 sortability",
                                                        "Var+R2-SortnRegress", "grid cell"}
    assert "max |diff| to peer" in rows[0]["acc_jax"]
