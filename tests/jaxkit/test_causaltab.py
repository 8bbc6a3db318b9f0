"""CausalTab pipeline pieces: predict's bad input, its row and variable chunking, the
expert networks, the DAG projection, the baselines on a case with a known answer, the
claim tests and the negative control."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkit import stats
from jaxkit.causal_model.model import ModelConfig, forward, init_params
from jaxkit.causal_model.predict import predict, variable_subsets
from jaxkit.causaltab import evaluate as ev
from jaxkit.causaltab import experiments, report, semantic
from jaxkit.causaltab.results import AblationCell, MethodScores, SyntheticCell
from jaxkit.stats import Verdict

CFG = ModelConfig(dim=8, heads=2, layers=1, ffn=2, max_vars=6)


@functools.cache
def _weights():
    return init_params(jax.random.key(0), CFG), CFG, {"settings": {"n_max": 16}}


def _x(n=40, d=4, seed=0):
    x = np.random.default_rng(seed).normal(size=(n, d))
    x[:, 1] += x[:, 0]
    return x


def test_predict_chunks_rows_and_returns_probabilities():
    w = _weights()
    p = predict(_x(40), weights=w)  # 40 rows in chunks of <= 16
    assert p.shape == (4, 4) and np.all(np.diag(p) == 0) and np.all((p >= 0) & (p <= 1))
    p2 = predict(_x(40), weights=w, n_chunk=40)  # one chunk: a different estimate
    assert p2.shape == (4, 4) and not np.allclose(p, p2)
    mask = np.zeros((40, 4))
    mask[20:, 2] = 1
    assert not np.allclose(predict(_x(40), mask, weights=w), p)  # the indicator is used


def test_variable_subsets_cover_every_pair_deterministically():
    for d, size, rounds in ((7, 6, 1), (37, 20, 1), (27, 5, 2)):
        s = variable_subsets(d, size, seed=3, rounds=rounds)
        assert s.shape[1] == size and all(len(set(r)) == size for r in s)
        cover = np.zeros((d, d), int)
        for r in s:
            cover[np.ix_(r, r)] += 1
        assert cover.min() >= 1, (d, size)  # every pair shares a subset
        assert np.array_equal(s, variable_subsets(d, size, seed=3, rounds=rounds))
    assert not np.array_equal(variable_subsets(37, 20, seed=0), variable_subsets(37, 20, seed=1))
    assert np.array_equal(variable_subsets(5, 6), np.arange(5)[None])  # one subset


@functools.cache
def _plain_forward():  # one task, all rows and variables, no intervention indicator
    params, cfg, _ = _weights()
    return jax.jit(lambda x: forward(params, cfg, x, jnp.zeros_like(x),
                                     jnp.ones(x.shape[1], bool), jnp.ones(x.shape[0], bool)))


def test_predict_chunks_variables_beyond_max_vars():
    w = _weights()
    x = _x(40, 4)
    direct = np.asarray(_plain_forward()(jnp.asarray(x, jnp.float32)), np.float64)
    np.fill_diagonal(direct, 0.0)
    one = predict(x, weights=w, n_chunk=40, var_chunk=4)  # one row chunk, one subset
    np.testing.assert_allclose(one, direct, rtol=1e-5, atol=1e-6)
    xw = _x(16, 9, seed=1)  # 9 > max_vars = 6 variables: subsets of 6 (16 rows, 1 chunk)
    p = predict(xw, weights=w)
    off = ~np.eye(9, dtype=bool)
    assert p.shape == (9, 9) and np.all(p[~off] == 0) and np.all((p[off] > 0) & (p[off] < 1))
    assert np.array_equal(p, predict(xw, weights=w))  # deterministic
    assert not np.allclose(p, predict(xw, weights=w, seed=1))  # other subsets
    tot, cnt = np.zeros((9, 9)), np.zeros((9, 9))  # the mean over the subsets, by hand
    for r in variable_subsets(9, 6, seed=0):
        tot[np.ix_(r, r)] += np.asarray(_plain_forward()(jnp.asarray(xw[:, r], jnp.float32)))
        cnt[np.ix_(r, r)] += 1
    ref = tot / cnt
    np.fill_diagonal(ref, 0.0)
    np.testing.assert_allclose(p, ref, rtol=1e-5, atol=1e-6)


def test_predict_bad_input_names_the_argument(tmp_path):
    w = _weights()
    bad = _x()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="`x`.*NaN"):
        predict(bad, weights=w)
    const = _x()
    const[:, 3] = 1.0
    with pytest.raises(ValueError, match="constant"):
        predict(const, weights=w)
    with pytest.raises(ValueError, match="at least 2 samples"):
        predict(_x()[:1], weights=w)
    with pytest.raises(ValueError, match="interventions"):
        predict(_x(), np.zeros((5, 4)), weights=w)
    with pytest.raises(ValueError, match="max_vars=6"):  # subsets above the limit
        predict(_x(d=7), weights=w, var_chunk=7)
    with pytest.raises(ValueError, match="var_chunk"):
        predict(_x(d=7), weights=w, var_chunk=1)
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,c\n1,2,x\n3,4,5\n2,1,0\n")
    with pytest.raises(ValueError, match="c"):
        predict(csv, weights=w)


def test_expert_networks_parse_and_sample_by_their_tables():
    net = semantic.load_network("asia")
    assert len(net.names) == 8 and int(net.adj.sum()) == 8
    i, j = net.names.index("lung"), net.names.index("smoke")
    assert net.adj[i, j]  # smoke -> lung
    x, t = semantic.sample_bif(np.random.default_rng(0), net, 4000, 2000)
    smoke = x[:4000, j]
    assert abs((smoke == 0).mean() - 0.5) < 0.03  # P(smoke = yes) = 0.5
    # P(lung = yes | smoke = yes) = 0.1, P(lung = yes | smoke = no) = 0.01
    lung = x[:4000, i]
    assert abs((lung[smoke == 0] == 0).mean() - 0.1) < 0.03
    assert (lung[smoke == 1] == 0).mean() < 0.03
    for v in range(8):  # do(X_v = s): one state per environment
        hit = t[:, v]
        assert not hit[:4000].any()
        if hit.any():
            assert len(np.unique(x[hit, v])) == 1
    sachs = semantic.load_network("sachs")
    assert len(sachs.names) == 11 and int(sachs.adj.sum()) == 17
    poltzer = semantic.load_network("Polzer_2012")
    assert len(poltzer.names) == 14 and int(poltzer.adj.sum()) == 69
    with pytest.raises(ValueError, match="unknown network"):
        semantic.load_network("nope")


def test_dag_projection_keeps_the_most_probable_acyclic_edges():
    p = np.zeros((3, 3))
    p[1, 0], p[2, 1], p[0, 2] = 0.9, 0.8, 0.7  # a 3-cycle: the weakest edge goes
    g = ev.dag_projection(p)
    assert g[1, 0] and g[2, 1] and not g[0, 2] and ev._is_dag(g)


def test_baselines_recover_a_known_chain():
    rng = np.random.default_rng(0)
    n = 400
    e = rng.laplace(size=(n, 3))
    x = np.zeros((n, 3))
    x[:, 0] = e[:, 0]
    x[:, 1] = 1.5 * x[:, 0] + e[:, 1]
    x[:, 2] = -1.2 * x[:, 1] + e[:, 2]
    true = np.zeros((3, 3))
    true[1, 0] = true[2, 1] = 1
    for m in ("direct-lingam", "ica-lingam", "var-sort-regress"):
        est, scores = ev.run_method(m, x, np.zeros_like(x), np.zeros(x.shape, bool),
                                    rng=np.random.default_rng(2))
        assert np.array_equal(est != 0, true != 0), m
    est, _ = ev.run_method("random", x, None, None, rng=np.random.default_rng(1))
    assert np.all(np.diag(est) == 0)
    assert ev.sid(true, true) == 0 and ev.sid(true, true.T) > 0


def _scores(auroc) -> MethodScores:
    """AUROCs only (the other metrics NaN): what the claims read."""
    nan = np.full(len(auroc), np.nan)
    return MethodScores.from_arrays(dict(shd=nan, f1=nan, auroc=auroc, auprc=nan, sid=nan,
                                         seconds=nan))


def _row(which, frac, ct, base, d=10):
    return SyntheticCell(which=which, d=d, n=40, int_frac=frac, var_sortability=0.5,
                         r2_sortability=0.5,
                         methods={"causaltab": _scores(ct), "notears": _scores(base),
                                  "random": _scores([0.5] * len(ct))})


def _abl(which, frac, broad, narrow):
    return AblationCell(which=which, d=10, n=40, int_frac=frac,
                        methods={"broad": _scores(broad), "narrow": _scores(narrow)})


def test_results_pickle_and_record_the_metrics_mapping():
    """The typed rows survive the stage cache (pickle) and give metrics.json's mapping
    in its key order; the training info prints as the mapping it records."""
    import pickle

    from jaxkit.causaltab.results import SmokeTraining, TrainingInfo

    cell = _row("id", 0.5, [0.75, 0.5], [0.5, 0.25])
    again = pickle.loads(pickle.dumps(cell))
    assert np.array_equal(again.methods["causaltab"].auroc, [0.75, 0.5])
    d = again.as_dict()
    assert list(d) == ["which", "d", "n", "int_frac", "var_sortability", "r2_sortability",
                       "methods", "chunked"]
    assert d["methods"]["causaltab"]["auroc"] == [0.75, 0.5]
    assert "compile_seconds" not in d["methods"]["causaltab"]  # a method skipped at this d
    info = TrainingInfo(source="shipped", config={"max_vars": 20},
                        extra={"seed": 0, "settings": {"steps": 1}},
                        smoke_training=SmokeTraining(recipe={"steps": 2}, curve=[]))
    assert info.as_dict() == {"source": "shipped", "config": {"max_vars": 20}, "seed": 0,
                              "settings": {"steps": 1},
                              "smoke_training": {"recipe": {"steps": 2}, "curve": []}}
    assert list(info.as_dict()) == ["source", "config", "seed", "settings", "smoke_training"]


def test_claims_say_yes_no_and_not_tested():
    rng = np.random.default_rng(0)
    good = 0.8 + 0.01 * rng.normal(size=8)
    bad = 0.6 + 0.01 * rng.normal(size=8)
    synth = [_row("id", 0.0, good, bad), _row("id", 0.5, good + 0.1, bad),
             _row("ood", 0.0, bad, good), _row("ood", 0.5, bad, good)]
    abl = [_abl("id", 0.0, bad, good), _abl("ood", 0.0, good, bad),
           _abl("ood", 0.5, good, bad)]
    c = report.claims(synth, [_row("id", 0.0, good[:2], bad[:2])], abl)
    assert [x.kind for x in c] == ["paper"] * 6 + ["setup"] * 2 + ["extension"] * 2
    # other CDFMs; broad prior; in distribution; out of distribution; semantic (2
    # datasets); interventional evidence; better than chance; the LLM audit (not run);
    # then the extension rows observational and mixed interventional (in distribution)
    assert [x.verdict for x in c] == ["not tested", "yes", "yes", "no",
                                      "not tested at this size", "yes", "yes", "not tested",
                                      "yes", "yes"]
    assert "observational" in c[8].claim and "mixed interventional" in c[9].claim
    assert "vs notears" in c[2].measured and "none is picked" in c[2].note
    assert "in distribution: mean -0.2" in c[1].note  # reported, not tested
    noise = 0.05 * rng.normal(size=8)  # broad minus narrow centred near 0: not shown
    c5 = report.ablation_claim([_abl("ood", 0.0, bad + noise - noise.mean(), bad)])
    assert c5.verdict == "not shown"
    assert report.ablation_claim(None).verdict == "not tested at this size"


def test_claims_beat_every_baseline_with_margins_from_the_config():
    """A claim against several baselines needs a win over each (no best baseline picked
    on the test data); a loss to one says "no" only when it survives Holm; the margins
    are configuration fields."""
    import dataclasses

    from jaxkit.causaltab.config import QUICK

    rng = np.random.default_rng(1)
    ct, weak = 0.8 + 0.01 * rng.normal(size=8), 0.6 + 0.01 * rng.normal(size=8)
    strong = 0.82 + 0.01 * rng.normal(size=8)

    def row(other):
        r = _row("id", 0.0, ct, weak)
        return dataclasses.replace(r, methods=r.methods | {"direct-lingam": _scores(other)})

    assert report.claims([row(weak)], [])[2].verdict == "yes"
    assert report.claims([row(strong)], [])[2].verdict == "no"
    strict = dataclasses.replace(QUICK, beat_margin=0.3)
    c = report.claims([row(weak)], [], cfg=strict)[2]
    assert c.verdict == "no" and "margin 0.3" in c.test
    assert stats.holm_reject([0.01, 0.02, 0.04], 0.05).all()
    assert not stats.holm_reject([0.03, 0.04], 0.05).any()


def test_negative_control_untrained_model_no_paper_claim_says_yes(monkeypatch):
    """A misaligned model: CausalTab's untrained initial weights on data whose
    "interventions" change nothing (the indicator channel marks random rows of the
    interventional cells, the rows are the observational ones), against
    Var-SortnRegress, with the ablation's two arms the same model. No paper claim may
    say "yes"; under a test that always says yes, the same rows do. The shapes of
    test_prior_ablation (d = 4, 40 rows, 3 datasets) and its compiled model."""
    def fake_bench(key, prior, n_datasets, d, n):
        rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
        x = rng.normal(size=(n_datasets, n, d))
        x[:, :, 1] += x[:, :, 0]
        adj = np.zeros((n_datasets, d, d), bool)
        adj[:, 1, 0] = True
        ind = np.zeros_like(x)
        if float(prior.obs_frac[0]) < 1.0:  # indicators of interventions that did nothing
            rows = np.random.default_rng(1).random((n_datasets, n)) < 0.5
            ind[rows, rng.integers(0, d)] = 1.0
        return ev.Bench(x, ind, ind.astype(bool), adj, {})

    monkeypatch.setattr(experiments, "make_bench", fake_bench)
    untrained = _weights()[:2]
    synth = []
    for which, base in (("id", experiments.id_prior()), ("ood", experiments.ood_prior())):
        for f in (0.0, 0.5):
            bench = fake_bench(jax.random.key(0 if which == "id" else 1),
                               experiments.cell_prior(base, f), 3, 4, 40)
            res = ev.evaluate(bench, ("causaltab", "var-sort-regress", "random"),
                              model=untrained)
            synth.append(SyntheticCell(which=which, d=4, n=40, int_frac=f,
                                       var_sortability=0.5, r2_sortability=0.5,
                                       methods=experiments.scores(res)))
    abl = experiments.prior_ablation(jax.random.key(2), models={"broad": untrained,
                                                                "narrow": untrained},
                                     d=4, n=40, n_datasets=3, int_fracs=(0.0, 0.5))
    sem = [r for r in synth if r.which == "ood"]  # the claims read only `methods`

    def paper():
        return [c.verdict for c in report.claims(synth, sem, abl) if c.kind == "paper"]

    verdicts = paper()
    assert len(verdicts) == 6 and "yes" not in verdicts, verdicts
    monkeypatch.setattr(report.stats, "superiority", lambda x, margin=0.0, level=0.95: Verdict(
        "yes", 1.0, 1.0, 1.0, len(x), "always yes"))
    assert paper().count("yes") == 5


def test_prior_ablation_scores_the_models_on_the_same_datasets(monkeypatch):
    calls = []

    def fake_bench(key, prior, n_datasets, d, n):  # numpy data: no prior sampler to compile
        calls.append((np.asarray(jax.random.key_data(key)).tolist(), prior))
        rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
        x = rng.normal(size=(n_datasets, n, d))
        x[:, :, 1] += x[:, :, 0]
        adj = np.zeros((n_datasets, d, d), bool)
        adj[:, 1, 0] = True
        return ev.Bench(x, np.zeros_like(x), np.zeros(x.shape, bool), adj, {})

    monkeypatch.setattr(experiments, "make_bench", fake_bench)
    w = _weights()
    a, b = (w[0], CFG), (init_params(jax.random.key(1), CFG), CFG)
    rows = experiments.prior_ablation(jax.random.key(0), models={"broad": a, "narrow": b,
                                                                 "again": a},
                                      d=4, n=40, n_datasets=3, int_fracs=(0.0, 0.5))
    assert all(isinstance(r, AblationCell) for r in rows)
    assert [(r.which, r.int_frac) for r in rows] == [
        ("id", 0.0), ("id", 0.5), ("ood", 0.0), ("ood", 0.5)]
    assert calls[0][0] == calls[1][0] != calls[2][0] == calls[3][0]  # paired fractions
    assert np.asarray(calls[2][1].graph_w).tolist() == np.asarray(
        experiments.cell_prior(experiments.ood_prior(), 0.0).graph_w).tolist()
    assert float(calls[1][1].obs_frac[0]) == 0.5 and float(calls[0][1].obs_frac[0]) == 1.0
    for r in rows:
        m = r.methods
        assert np.array_equal(m["again"].auroc, m["broad"].auroc)  # same model, datasets
        assert m["broad"].auroc.shape == (3,)
        assert np.all((m["narrow"].auroc >= 0) & (m["narrow"].auroc <= 1))
        assert list(r.as_dict()["methods"]["broad"]) == [
            "shd", "f1", "auroc", "auprc", "sid", "seconds", "compile_seconds"]
    diffs = np.concatenate([r.methods["broad"].auroc - r.methods["narrow"].auroc
                            for r in rows[2:]])
    assert np.any(diffs != 0)  # two different models
    c = report.ablation_claim(rows, min_n=2)
    assert c.measured.startswith(f"broad - narrow: {diffs.mean():.3g}") and "n=6" in c.test


def test_cli_predict_writes_edges_and_names_bad_columns(tmp_path):
    import json

    from typer.testing import CliRunner

    from jaxkit.causaltab.cli import causaltab_app

    x = _x(60, 4)
    csv = tmp_path / "data.csv"
    csv.write_text("a,b,c,d\n" + "\n".join(",".join(f"{v:.5f}" for v in r) for r in x))
    out = tmp_path / "g.json"
    r = CliRunner().invoke(causaltab_app, ["predict", str(csv), "--json", str(out)])
    assert r.exit_code == 0, r.output
    g = json.loads(out.read_text())
    assert g["variables"] == ["a", "b", "c", "d"] and len(g["probabilities"]) == 4
    assert all(e["cause"] != e["effect"] for e in g["edges"])
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,oops\n")
    r = CliRunner().invoke(causaltab_app, ["predict", str(bad)])
    assert r.exit_code != 0 and "b" in r.output
