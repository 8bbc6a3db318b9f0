"""CruxBench: the bivariate normal CDF, the simulator's known VOI recovered from its
prices, scoring closed forms, the JSON Lines format (round trip and bad input), the
statistics, the pipeline (claims, user data, stage resume) and the CLI."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import multivariate_normal

from jaxkit.cruxbench import analysis as A
from jaxkit.cruxbench.config import Config, TextSettings
from jaxkit.cruxbench.data import Dataset, parse_records, read_jsonl, to_records, write_jsonl
from jaxkit.cruxbench.market import (
    bvn_cdf,
    known_voi_at_resolution,
    question_probs,
    simulate_markets,
)
from jaxkit.cruxbench.scoring import agent_usefulness, question_scores, score
from jaxkit.cruxbench.simulate import simulate
from jaxkit.io import DataError
from jaxkit.registry import RunContext
from jaxkit.registry import get as get_pipeline

TINY = Config(n_targets=16, n_proposers=6, n_questions=2, n_factors=4, n_steps=8,
              n_quality_targets=64, n_boot=200, n_perm=500, n_sim_seeds=3,
              lm=TextSettings(model=""))


@pytest.fixture(scope="module")
def sim():
    return simulate(jax.random.key(1), TINY.sim_settings())


def test_bvn_cdf_matches_scipy_including_near_singular_correlations():
    rng = np.random.default_rng(0)
    for r in (-1.0, -0.9999, -0.6, 0.0, 0.4, 0.97, 0.9999, 1.0):
        h, k = rng.normal(size=(2, 12)) * 1.5
        k[:3] = h[:3] + rng.normal(size=3) * 0.01
        ours = np.asarray(jax.jit(bvn_cdf)(h, k, r))
        if abs(r) == 1:  # the limits in closed form
            ref = (ndtr(np.minimum(h, k)) if r > 0 else np.maximum(ndtr(h) - ndtr(-k), 0))
        else:
            ref = np.array([multivariate_normal(cov=[[1, r], [r, 1]]).cdf([a, b])
                            for a, b in zip(h, k, strict=True)])
        np.testing.assert_allclose(ours, ref, atol=1e-9)


def test_question_probs_are_coherent_and_independent_at_zero_correlation():
    c, d = np.array([-0.5, 0.2, 1.0]), np.array([0.3, -1.0, 0.0])
    p, q, p1, p0 = (np.asarray(a) for a in
                    jax.jit(question_probs)(c, d, np.array([0.6, -0.3, 0.0])))
    np.testing.assert_allclose(q * p1 + (1 - q) * p0, p, atol=1e-12)
    assert p1[0] > p[0] > p0[0]                                   # positive correlation
    assert p1[1] < p[1] < p0[1]                                   # negative correlation
    assert p1[2] == pytest.approx(p[2]) and p0[2] == pytest.approx(p[2])


def test_simulated_benchmark_recovers_the_known_voi(sim):
    """In the pipeline's simulated benchmark the price moves measured by the scoring
    code average to the closed-form VOI at the announcements (within 4 standard
    errors), and the opening (q, p1, p0) are the closed form of the latent model."""
    qs = question_scores(sim.data, clip=(1e-9, 1 - 1e-9))
    for m, k in (("realised_abs", sim.known_abs), ("realised_sq", sim.known_sq),
                 ("realised_log_score", sim.known_mi)):
        diff = qs[m] - k
        assert np.isfinite(diff).all()
        assert abs(diff.mean()) < 4 * diff.std() / math.sqrt(diff.size)
    assert np.all(qs["gap"] < 1e-9)   # the stated probabilities are coherent


@pytest.mark.slow
def test_simulated_prices_recover_the_known_voi():
    """(40000 markets; the default run checks the pipeline's own draw.) The jump at each
    announcement has the closed-form VOI as its expectation
    (absolute and squared shift; the log-score gain's expectation is the mutual
    information); opening prices are Phi(-c) and every path stays in [0, 1]."""
    n, T = 40000, 6
    k = jax.random.split(jax.random.key(7), 5)
    rho = jax.random.uniform(k[0], (n,), minval=-0.9, maxval=0.9)
    c, d = 0.7 * jax.random.normal(k[1], (n,)), 0.7 * jax.random.normal(k[2], (n,))
    zs = jax.random.normal(k[3], (n,))
    zy = rho * zs + jnp.sqrt(1 - rho**2) * jax.random.normal(k[4], (n,))

    @jax.jit
    def run(key):
        m = simulate_markets(key, c, d, rho, zy, zs, T)
        return m, known_voi_at_resolution(m)

    m, known = run(jax.random.key(3))
    i = np.arange(n)
    a, b = np.asarray(m.prices)[i, m.t_resolve - 1], np.asarray(m.prices)[i, m.t_resolve]
    y = np.asarray(zy > c, float)
    jump = b - a
    with np.errstate(divide="ignore", invalid="ignore"):  # a 0 or 1 price on the
        gain = np.where(y > 0, np.log(b) - np.log(a), np.log1p(-b) - np.log1p(-a))
    np.testing.assert_allclose(m.if_yes[:, 0], question_probs(c, d, rho)[2], atol=1e-6)
    np.testing.assert_allclose(m.if_no[:, 0], question_probs(c, d, rho)[3], atol=1e-6)
    for measured, expected in ((np.abs(jump), known.abs_shift), (jump**2, known.sq_shift),
                               (gain, known.mutual_info)):
        ok = np.isfinite(measured)   # float32 prices can round to 0 or 1 (log score)
        assert ok.mean() > 0.999
        diff = measured[ok] - np.asarray(expected)[ok]
        assert abs(diff.mean()) < 4 * diff.std() / math.sqrt(n)
    assert float(jnp.max(jnp.abs(m.prices[:, 0] - question_probs(c, d, rho)[0]))) < 1e-6
    assert float(m.prices.min()) >= 0 and float(m.prices.max()) <= 1
    assert abs(float(m.prices[:, -1].mean()) - y.mean()) < 0.01  # martingale to the end


def _two_question_dataset() -> Dataset:
    """One target (price path 0.5 -> 0.5 -> 0.8 -> 0.8, outcome 1), two proposers."""
    recs = [{"type": "target", "id": "t", "prices": [[0, 0.5], [1, 0.5], [2, 0.8], [3, 0.8]],
             "outcome": 1},
            {"type": "question", "target": "t", "proposer": "a", "q": 0.5, "p1": 0.8,
             "p0": 0.2, "resolved_at": 2, "answer": 1},
            {"type": "question", "target": "t", "proposer": "b", "q": 0.5, "p1": 0.9,
             "p0": 0.3, "asked_at": 1, "resolved_at": 1.5, "answer": 0},
            {"type": "quality", "proposer": "a", "score": 2.0}]
    return parse_records(recs)


def test_scoring_closed_forms():
    ds = _two_question_dataset()
    qs = question_scores(ds)
    # a: coherent at 0.5, E|dp| = 2 q (1 - q) |p1 - p0| = 0.3; realised 0.5 -> 0.8
    assert qs["ex_ante_abs"][0] == pytest.approx(0.3)
    assert qs["realised_abs"][0] == pytest.approx(0.3)
    assert qs["realised_log_score"][0] == pytest.approx(math.log(0.8 / 0.5))
    # b: 0.5 q1 + 0.5 q0 = 0.6 != 0.5: conditionals move by -0.1 each (q = 1/2)
    assert (qs["p1"][1], qs["p0"][1], qs["gap"][1]) == pytest.approx((0.8, 0.2, 0.1))
    # b resolves at 1.5: last price before is t=1 (0.5), last at or before 1.5 is t=1:
    # no price move was observed, so the realised update is unknown
    assert math.isnan(qs["realised_abs"][1])
    ag = agent_usefulness(ds, qs)
    # agent: a's answer yes -> forecast 0.8; b's answer no -> 0.2 (projected p0)
    assert ag["forecast"][0, 0] == pytest.approx(0.8)
    assert ag["forecast"][0, 1] == pytest.approx(0.2)
    assert ag["brier_gain"][0, 0] == pytest.approx(0.25 - 0.04)
    assert ag["log_gain"][0, 1] == pytest.approx(math.log(0.2 / 0.5))
    sc = score(ds, window=1.0)
    assert sc.questions["realised_abs"][1] == pytest.approx(0.3)  # 0.5 -> 0.8 by t=2.5
    assert math.isnan(sc.per_proposer["ex_ante_abs"][0]) is False


@pytest.mark.slow  # test-time budget: 2-11 s CPU; kept in the slow set
def test_jsonl_round_trip_scores_the_same(sim, tmp_path):
    path = write_jsonl(tmp_path / "sim.jsonl", sim.data)
    back = read_jsonl(path)
    a, b = score(sim.data), score(back)
    for k in ("ex_ante_abs", "realised_abs", "brier_gain"):
        np.testing.assert_allclose(a.per_proposer[k], b.per_proposer[k], atol=1e-6)
    np.testing.assert_allclose(back.quality, sim.data.quality)
    assert len(to_records(back)) == len(to_records(sim.data))


@pytest.mark.parametrize(("line", "match"), [
    ('{"type": "target", "id": "t", "prices": [[0, 0.5]]', "line 2: invalid JSON"),
    ('{"type": "question", "target": "t", "proposer": "a", "q": 1.5, "p1": 0.5, "p0": 0.5}',
     "line 2: 'q' must be a probability"),
    ('{"type": "question", "target": "t", "proposer": "a", "q": 0.5, "p1": 0.5}',
     "line 2: missing field 'p0'"),
    ('{"type": "question", "target": "x", "proposer": "a", "q": 0.5, "p1": 0.5, "p0": 0.5}',
     "line 2: question names an unknown target 'x'"),
    ('{"type": "target", "id": "u", "prices": [[1, 0.5], [1, 0.6]]}',
     "line 2: prices\\[1\\] time 1 is not after"),
    ('{"type": "target", "id": "u", "prices": [[0, NaN]]}', "line 2: prices\\[0\\] price"),
    ('{"type": "quality", "proposer": "a", "score": "high"}', "line 2: 'score' must be"),
    ('{"type": "forecast"}', "line 2: 'type' must be"),
    ('{"type": "target", "id": "t", "prices": [[0, 0.5]]}', "line 2: duplicate target id"),
    ('[1, 2]', "line 2: each line must be a JSON object"),
])
def test_malformed_jsonl_names_the_line(tmp_path, line, match):
    good = '{"type": "target", "id": "t", "prices": [[0, 0.5], [1, 0.6]]}'
    q = '{"type": "question", "target": "t", "proposer": "a", "q": 0.5, "p1": 0.6, "p0": 0.4}'
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([good, line, q]) + "\n")
    with pytest.raises(DataError, match=match):
        read_jsonl(path)


def test_empty_or_missing_files(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_jsonl(tmp_path / "none.jsonl")
    (tmp_path / "t.jsonl").write_text('{"type": "target", "id": "t", "prices": [[0, 0.5]]}\n')
    with pytest.raises(DataError, match="no question records"):
        read_jsonl(tmp_path / "t.jsonl")


def test_volatility_control_and_sign_check():
    """The realised move at the answer minus the mean move over the path's other windows
    of the same length (not overlapping the answer's), and the sign check, on hand
    paths; a market that moves as much anyway gets no credit."""
    from jaxkit.cruxbench.scoring import matched_moves

    path = np.array([[0.5, 0.5, 0.6, 0.9, 0.9, 0.8], [0.5, 0.8, 0.5, 0.8, 0.5, 0.8]])
    m, n = matched_moves(path, np.ones_like(path, bool), np.array([2, 2]), np.array([3, 3]))
    # row 0: windows t = 0, 1, 3, 4 move 0, 0.1, 0, 0.1; row 1: every window moves 0.3
    np.testing.assert_allclose(m, [0.05, 0.3], atol=1e-6)
    assert n.tolist() == [4, 4]
    m2, _ = matched_moves(path, np.ones_like(path, bool), np.array([1, 0]), np.array([3, 0]))
    # row 0, L = 2: only t = 3 (0.9 -> 0.8) avoids [1, 3]; row 1: an empty window
    assert m2[0] == pytest.approx(0.1, abs=1e-6) and math.isnan(m2[1])
    qs = question_scores(_two_question_dataset())
    assert qs["matched_abs"][0] == pytest.approx(0.0, abs=1e-6)
    assert qs["realised_controlled"][0] == pytest.approx(0.3)
    assert qs["sign_agree"][0] == 1.0 and math.isnan(qs["sign_agree"][1])
    ds = _two_question_dataset()
    ds.answer[0] = 0.0  # the answer said no, yet the price rose: the sign check says 0
    assert question_scores(ds)["sign_agree"][0] == 0.0


def test_quality_link_sets_the_quality_noise():
    """quality_scores at link 1 uses the proposers' own knowledge noise; at link 0 the
    independent draw; in between the geometric mix."""
    from jaxkit.cruxbench.market import make_targets
    from jaxkit.cruxbench.proposers import Proposers, quality_scores

    held = make_targets(jax.random.key(0), 32, 4)
    own, other = jnp.array([0.1, 1.0, 0.5]), jnp.array([1.2, 0.2, 0.5])
    pr = Proposers(own, jnp.zeros(3), jnp.zeros(3))
    k = jax.random.key(1)
    q = lambda p, **kw: np.asarray(quality_scores(k, p, held, **kw))  # noqa: E731
    np.testing.assert_array_equal(q(pr, link=1.0, other_noise=other), q(pr))
    np.testing.assert_allclose(q(pr, link=0.0, other_noise=other),
                               q(pr._replace(knowledge_noise=other)), rtol=1e-5)
    np.testing.assert_allclose(q(pr, link=0.5, other_noise=other),
                               q(pr._replace(knowledge_noise=jnp.sqrt(own * other))),
                               rtol=1e-5)
    with pytest.raises(ValueError, match="`link_sweep`"):
        Config(link_sweep=(1.5,))


@pytest.mark.slow  # test-time budget: two simulator compilations (about 30 s)
def test_quality_link_zero_unties_quality_from_voi():
    """quality_link 0 draws the quality's knowledge noise independently: the markets,
    questions and VOI are unchanged, the quality is not, and over seeds the VOI-quality
    correlation is not called high (the paper row's test cannot say yes by itself)."""
    st1 = TINY.sim_settings()
    st0 = st1._replace(quality_link=0.0)
    a, b = simulate(jax.random.key(3), st1), simulate(jax.random.key(3), st0)
    np.testing.assert_array_equal(a.data.prices, b.data.prices)
    assert not np.allclose(a.data.quality, b.data.quality)
    rs = [A.seed_stats(*(lambda s: (s.data, s.forecast_p1, s.forecast_p0))(
        simulate(jax.random.fold_in(jax.random.key(3), i), st0)))["r_quality"]
        for i in range(10)]
    assert A.seed_correlation(rs, null=TINY.r_high).verdict != "yes", rs


EXAMPLE_CSV = __import__("pathlib").Path(__file__).parent / "data" / "cruxbench_example.csv"


def test_csv_example_reads_scores_and_matches_jsonl(tmp_path):
    """The shipped CSV example (two resolved markets, two proposers): read as documented,
    the same dataset as its JSON Lines form, scored with the volatility control and sign
    check; bad CSV cells are one line naming the file and line."""
    from jaxkit.cruxbench.data import read_csv, read_data

    ds = read_data(EXAMPLE_CSV)
    assert ds.target_ids == ["fed-cut", "cpi-high"] and ds.proposers == ["model-a", "model-b"]
    np.testing.assert_array_equal(ds.outcome, [1.0, 0.0])
    assert ds.mask.sum(1).tolist() == [7, 6] and ds.texts[2] == "Will oil stay above $90?"
    back = read_jsonl(write_jsonl(tmp_path / "ex.jsonl", ds))
    for f in ("prices", "q", "p1", "p0", "answer", "quality", "resolved_at"):
        np.testing.assert_array_equal(getattr(back, f), getattr(ds, f))
    qs = question_scores(ds)
    # model-a on fed-cut: 0.39 -> 0.62 at t = 3; other one-step moves of that path
    # 0.01, 0.02, 0.02, 0.21, 0.02 -> matched mean 0.056
    assert qs["realised_abs"][0] == pytest.approx(0.23)
    assert qs["matched_abs"][0] == pytest.approx(0.056)
    assert np.nanmean(qs["sign_agree"]) == 1.0
    bad = tmp_path / "bad.csv"
    bad.write_text("type,id,t,p\ntarget,x,,\nprice,x,0,high\n")
    with pytest.raises(DataError, match=r"bad.csv, line 3: 'p' must be a number"):
        read_csv(bad)
    bad.write_text("kind,id\ntarget,x\n")
    with pytest.raises(DataError, match="no 'type' column"):
        read_data(bad)
    bad.write_text("type,id,t,p\nprice,y,0,0.5\n")
    with pytest.raises(DataError, match="'y', which no target or market row defines"):
        read_csv(bad)
    from typer.testing import CliRunner

    from jaxkit.cruxbench.cli import cruxbench_app

    r = CliRunner().invoke(cruxbench_app, ["score", str(EXAMPLE_CSV)])
    assert r.exit_code == 0 and "model-a" in r.output, r.output
    r = CliRunner().invoke(cruxbench_app, ["score", str(bad)])
    assert r.exit_code != 0 and "no target or market row defines" in r.output


def test_correlation_statistics():
    x = np.arange(5.0)
    assert A.permutation_p(0, x, x) == pytest.approx(2 / 120)  # exact: r = +-1 only twice
    assert A.permutation_p(0, x, x[[1, 0, 3, 4, 2]]) > 0.1
    assert A.correlation_verdict(0.95, 20).verdict == "yes"
    assert A.correlation_verdict(-0.9, 20).verdict == "no"
    assert A.correlation_verdict(0.3, 8).verdict == "not shown"
    assert A.correlation_equivalence(0.87, 400, target=0.87, margin=0.1).verdict == "yes"
    assert A.correlation_equivalence(0.2, 400, target=0.87, margin=0.1).verdict == "no"
    assert A.correlation_equivalence(0.8, 8, target=0.87, margin=0.1).verdict == "not shown"
    rng = np.random.default_rng(0)
    per = rng.normal(size=(30, 6)) * 0.1 + np.arange(6)   # proposer means 0..5
    s = A.correlation_summary(rng, per, np.arange(6.0), n_boot=300, n_perm=100)
    assert s["r"] > 0.99 and s["spearman"] == pytest.approx(1.0) and s["n"] == 6
    assert s["boot_lo"] <= s["r"] <= s["boot_hi"] + 1e-12
    assert s["fisher_lo"] < s["r"] < s["fisher_hi"]


def test_heldout_usefulness_can_say_yes_and_no():
    rng = np.random.default_rng(1)
    voi = rng.normal(size=(40, 6)) * 0.1 + np.arange(6)
    good = voi * 0.5 + rng.normal(size=(40, 6)) * 0.3   # usefulness follows VOI
    v, d = A.heldout_usefulness(voi, good)
    assert v.verdict == "yes" and d.shape == (40,)
    v, _ = A.heldout_usefulness(voi, -good)
    assert v.verdict == "no"


@pytest.mark.slow  # test-time budget: 30-145 s under load; the quick runs cover it in CI
def test_simulated_scores_and_pipeline(sim, tmp_path):
    """The tiny pipeline: three claims with valid verdicts, the user-data path scored
    by the same code, and a second run reloading the simulated stage."""
    path = write_jsonl(tmp_path / "mine.jsonl", sim.data)
    cfg = TINY.merged({"data": str(path)})
    entry = get_pipeline("cruxbench")
    res = entry.run(RunContext(out_dir=tmp_path / "out", config=cfg, quick=True))
    assert "How much of the correlation is the simulator's assumption" in res.markdown
    assert set(res.metrics["quality_link_sweep"]) == {"0.0", "0.5"}
    # simulated: 2 paper rows, the simulator check (setup), 3 extensions, the sign check
    # (setup); data: 3 extensions
    assert len(res.claims) == 10
    assert [c.kind for c in res.claims] == ["paper", "paper", "setup", *["extension"] * 3,
                                            "setup", *["extension"] * 3]
    assert {c.verdict for c in res.claims} <= {"yes", "no", "not shown",
                                               "not tested at this size"}
    assert "Simulator check" in res.markdown and "Data:" in res.markdown
    assert len(res.metrics["seeds"]["r_quality"]) == TINY.n_sim_seeds
    mine = score(sim.data).per_proposer["realised_abs"]
    np.testing.assert_allclose(res.metrics["data"]["per_proposer"]["realised_abs"], mine,
                               atol=1e-6)  # the data path is the same scoring
    assert all(f.is_file() for f in res.figures)
    ctx = RunContext(out_dir=tmp_path / "out", config=cfg, quick=True)
    again = entry.run(ctx)
    assert ctx.reloaded == ["cruxbench-sim", "cruxbench-seeds", "cruxbench-links"]
    assert again.metrics["per_proposer"] == res.metrics["per_proposer"]


def test_separate_forecaster_reads_the_questions_not_the_proposers_numbers(sim):
    """The separate forecaster with exact loadings states the questions' exact
    conditionals (so the own-number agent is that forecaster with no noise: its gain is
    VOI by construction); with its own noisy view it differs, and it never sees the
    proposers' stated probabilities (changing them leaves its gain unchanged)."""
    from dataclasses import replace

    from jaxkit.cruxbench.market import make_targets
    from jaxkit.cruxbench.proposers import make_proposers, propose, separate_forecaster

    k = jax.random.key(4)
    tg = make_targets(k, 12, 4)
    pr = make_proposers(jax.random.fold_in(k, 1), 3)
    qu = propose(jax.random.fold_in(k, 2), pr, tg, 2)
    p1, p0 = separate_forecaster(jax.random.fold_in(k, 3), pr, tg, qu, noise=0.0)
    np.testing.assert_allclose(p1, qu.p1, atol=1e-6)
    np.testing.assert_allclose(p0, qu.p0, atol=1e-6)
    p1n, _ = separate_forecaster(jax.random.fold_in(k, 3), pr, tg, qu, noise=0.3)
    assert np.max(np.abs(np.asarray(p1n) - np.asarray(qu.p1))) > 0.05
    ds = sim.data
    qs = question_scores(ds)
    from jaxkit.cruxbench.analysis import forecaster_usefulness

    a = forecaster_usefulness(ds, qs, sim.forecast_p1, sim.forecast_p0)
    lied = replace(ds, p1=np.clip(ds.p1 + 0.2, 0, 1), p0=np.clip(ds.p0 - 0.2, 0, 1))
    b = forecaster_usefulness(lied, question_scores(lied), sim.forecast_p1, sim.forecast_p0)
    np.testing.assert_allclose(a, b)


def test_seed_verdicts_decide_over_seeds():
    """The claims' tests take one number per simulator seed: a correlation that is high
    in every seed says yes against r_high, one that straddles it does not, and the
    equivalence to the paper's r needs the seeds' interval inside the margin."""
    assert A.seed_correlation([0.8, 0.85, 0.9, 0.82], null=0.5).verdict == "yes"
    assert A.seed_correlation([0.8, 0.1, 0.7, 0.3], null=0.5).verdict == "not shown"
    assert A.seed_correlation([0.1, 0.0, 0.2, 0.05], null=0.5).verdict == "no"
    v = A.seed_correlation([0.9], null=0.5)
    assert v.verdict == "not shown" and "fewer than 2" in v.test
    eq = A.seed_correlation_equivalence
    assert eq([0.86, 0.88, 0.87, 0.87], target=0.87, margin=0.1).verdict == "yes"
    assert eq([0.3, 0.35, 0.4, 0.3], target=0.87, margin=0.1).verdict == "no"


def _null_seeds(cfg: Config, n: int) -> dict:
    """The negative control: simulated seeds in which the proposers' quality is shuffled
    among them and the answers the forecaster reads are shuffled among the questions
    (they carry no information about their targets). The market prices, and so the
    realised VOI, are untouched."""
    from dataclasses import replace

    rows = []
    for s in range(n):
        sim = simulate(jax.random.fold_in(jax.random.key(1), s), cfg.sim_settings())
        rng = np.random.default_rng(s)
        ds = replace(sim.data, quality=rng.permutation(sim.data.quality),
                     answer=rng.permutation(sim.data.answer))
        rows.append(A.seed_stats(ds, sim.forecast_p1, sim.forecast_p0))
    return {k: np.array([r[k] for r in rows]) for k in A.SEED_STATS}


def test_negative_control_no_paper_claim_says_yes():
    """Shuffled quality and uninformative answers: the claims' logic (the same per-seed
    reduction and report.claims as the pipeline) must not say yes to any paper claim;
    the same seeds unshuffled still give finite numbers (the control is not vacuous)."""
    from jaxkit.cruxbench import report

    seeds = _null_seeds(TINY, 12)
    assert np.isfinite(seeds["r_quality"]).all() and np.isfinite(
        seeds["heldout_forecaster"]).all()
    claims = report.claims(TINY, seeds)
    paper = [c for c in claims if c.kind == "paper"]
    assert len(paper) == 2
    ctrl = [c for c in claims if "volatility control" in c.claim]
    assert len(ctrl) == 1 and ctrl[0].verdict != "yes" and ctrl[0].kind == "extension"
    assert not [c.claim for c in paper if c.verdict == "yes"], claims


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="`n_questions`"):
        Config(n_questions=9, n_factors=4)
    with pytest.raises(ValueError, match="`clip_lo`"):
        Config(clip_lo=0.6)
    with pytest.raises(ValueError, match="`explained`"):
        Config(explained=1.0)


@pytest.mark.slow  # test-time budget: 2-11 s CPU; kept in the slow set
def test_cli_simulate_writes_a_scorable_file(sim, tmp_path):
    from typer.testing import CliRunner

    from jaxkit.cruxbench.cli import cruxbench_app

    sets = [f"{k}={getattr(TINY, k)}" for k in ("n_targets", "n_proposers", "n_questions",
                                                 "n_factors", "n_steps", "n_quality_targets")]
    out = tmp_path / "sim.jsonl"
    r = CliRunner().invoke(cruxbench_app, ["simulate", str(out), "--seed", "1",
                                           *[a for s in sets for a in ("--set", s)]])
    assert r.exit_code == 0, r.output
    back = read_jsonl(out)   # the same draw as the fixture (same key and settings)
    np.testing.assert_allclose(back.prices, sim.data.prices, atol=1e-6)
    r = CliRunner().invoke(cruxbench_app, ["simulate", str(out), "--set", "n_targets=1"])
    assert r.exit_code == 2 and "`n_targets`" in r.output
