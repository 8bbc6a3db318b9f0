"""TempBench: generator statistics against their closed forms (Markov firing rate and lag-1
autocorrelation, HMM transition frequencies and the forward-backward posterior against
brute-force enumeration, chain order), input errors, jit/vmap invariance, the method
comparison on a tiny config, the quick pipeline's report and claims, and training killed
mid-way resuming to the parameters of an uninterrupted run."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxkit.checkpoint import Checkpointer
from jaxkit.registry import RunContext
from jaxkit.registry import get as get_pipeline
from jaxkit.tempbench import compare as C
from jaxkit.tempbench import pipeline as P
from jaxkit.tempbench import report as R
from jaxkit.tempbench import tasks as T
from jaxkit.tempbench import train as TR
from jaxkit.tempbench.config import FULL, QUICK, Config
from jaxkit.tempbench.results import MarkovSweep, Panel, RealResult, Summary

RBG = functools.partial(jax.random.key, impl="rbg")  # compiles much faster than threefry

# ------------------------------------------------------------------ Markov features

RHOS = (0.0, 0.3, 0.5, 0.7, 0.9)
PI = 0.2


@functools.partial(jax.jit, static_argnames=("n_seq", "length"))
def _markov_codes(key, rho, *, n_seq, length):
    return T.markov_features(key, n_seq=n_seq, length=length, d=4, n_features=8, pi=PI,
                             rho=rho).codes


@pytest.fixture(scope="module")
def markov_sweep():
    rhos = jnp.asarray(RHOS)
    codes = jax.vmap(lambda r: _markov_codes(RBG(3), r, n_seq=100,
                                             length=250))(rhos)
    return np.asarray(codes, np.float64)  # (R, n, L, F)


@pytest.mark.parametrize("i", range(len(RHOS)))
def test_markov_rate_and_autocorrelation(markov_sweep, i):
    c = markov_sweep[i]
    rho = RHOS[i]
    n_eff = c.size * (1 - rho) / (1 + rho)  # effective sample size of an AR(1) indicator
    se_rate = np.sqrt(PI * (1 - PI) / n_eff)
    assert abs(c.mean() - PI) < 5 * se_rate
    a, b = c[:, :-1].ravel(), c[:, 1:].ravel()
    assert abs(np.corrcoef(a, b)[0, 1] - rho) < 0.02
    # transition probabilities of the closed form
    p11, p01 = (float(v) for v in T.markov_transition(PI, rho))
    assert abs(b[a == 1].mean() - p11) < 0.02
    assert abs(b[a == 0].mean() - p01) < 0.01


@functools.lru_cache(maxsize=1)
def _signal_fn():
    return jax.jit(lambda k: T.markov_features(k, n_seq=20, length=30, d=6, n_features=10,
                                               pi=0.3, rho=0.5, noise=0.05))


def test_markov_signal_model():
    t = _signal_fn()(RBG(1))  # rbg: one cheap compilation
    np.testing.assert_allclose(np.linalg.norm(t.directions, axis=1), 1.0, atol=1e-5)
    mags = np.asarray(t.magnitudes)
    codes = np.asarray(t.codes)
    assert np.all(mags[~codes] == 0) and np.all(mags[codes] > 0)
    assert abs(mags[codes].mean() - 1.0) < 0.02
    resid = np.asarray(t.x) - mags @ np.asarray(t.directions)
    assert abs(resid.std() - 0.05) < 0.005


@pytest.mark.slow  # two threefry compilations (rbg draws differ under vmap by design)
def test_markov_signal_model_jit_vmap():
    keys = jax.random.split(jax.random.key(0), 2)
    t = _signal_fn()(keys[1])
    batched = jax.jit(jax.vmap(_signal_fn()))(keys)  # vmap invariance
    np.testing.assert_allclose(batched.x[1], t.x, atol=1e-6)
    np.testing.assert_array_equal(batched.codes[1], t.codes)


@settings(max_examples=25, deadline=None)
@given(pi=st.floats(0.01, 0.99), rho=st.floats(-1.0, 1.0))
def test_markov_transition_stationary(pi, rho):
    """Valid (pi, rho) give probabilities with stationary rate pi and autocorrelation rho;
    invalid ones raise ValueError naming rho."""
    if rho < -min(pi / (1 - pi), (1 - pi) / pi) - 1e-6:
        with pytest.raises(ValueError, match="rho"):
            T.markov_transition(pi, rho)
        return
    p11, p01 = (float(v) for v in T.markov_transition(pi, rho))
    assert -1e-6 <= p01 <= 1 + 1e-6 and -1e-6 <= p11 <= 1 + 1e-6
    assert abs(pi * p11 + (1 - pi) * p01 - pi) < 1e-5  # stationarity
    assert abs((p11 - p01) - rho) < 1e-5  # lag-1 autocorrelation of a two-state chain


def test_markov_bad_inputs():
    kw = dict(n_seq=2, length=3, d=2, n_features=3)
    with pytest.raises(ValueError, match="pi"):
        T.markov_features(RBG(0), pi=1.5, **kw)
    with pytest.raises(ValueError, match="rho"):
        T.markov_features(RBG(0), rho=float("nan"), **kw)
    with pytest.raises(ValueError, match="n_features"):
        T.markov_features(RBG(0), **{**kw, "n_features": 0})
    with pytest.raises(Exception, match="rho"):  # traced: equinox run-time check
        jax.jit(lambda r: T.markov_features(RBG(0), rho=r, **kw).x)(1.5)


def test_persistent_atoms():
    u = T.unit_directions(RBG(0), 3, 5, orthogonal=True)
    np.testing.assert_allclose(u @ u.T, np.eye(3), atol=1e-5)
    a = T.persistent_atoms(u, 4)
    assert a.shape == (3, 4, 5)
    np.testing.assert_allclose(np.linalg.norm(a.reshape(3, -1), axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(a[:, 2], u / 2.0, atol=1e-6)
    with pytest.raises(ValueError, match="orthogonal"):
        T.unit_directions(RBG(0), 6, 5, orthogonal=True)


# ------------------------------------------------------------------------- HMM


def test_hmm_transitions_and_ambiguity():
    """Empirical transition frequencies vs P; emission noise; one token is ambiguous while
    the forward-backward posterior (context) is not."""
    P_ = np.array([[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.3, 0.0, 0.7]], np.float32)
    h = jax.jit(lambda k: T.hmm_denoising(k, n_seq=200, length=200, d=4, n_states=3,
                                          transition=P_, sigma=0.8))(RBG(0))
    s = np.asarray(h.states)
    counts = np.zeros((3, 3))
    np.add.at(counts, (s[:, :-1].ravel(), s[:, 1:].ravel()), 1)
    freq = counts / counts.sum(1, keepdims=True)
    np.testing.assert_allclose(freq, P_, atol=0.015)
    assert counts[2, 1] == 0
    resid = np.asarray(h.x) - np.asarray(h.directions)[s]
    assert abs(resid.std() - 0.8) < 0.01
    single = (np.asarray(h.x @ h.directions.T).argmax(-1) == s).mean()
    post = jax.jit(jax.vmap(lambda x: T.hmm_posterior(x, h.directions, h.transition,
                                                      h.initial, sigma=0.8)))(h.x[:40])
    smooth = (np.asarray(post).argmax(-1) == s[:40]).mean()
    assert single < 0.8 and smooth > single + 0.05
    np.testing.assert_allclose(T.sticky_transition(4, 0.9).sum(1), 1.0, atol=1e-6)
    with pytest.raises(ValueError, match="transition"):
        T.hmm_denoising(RBG(0), n_seq=2, length=3, d=4, n_states=3,
                        transition=P_[:2])
    with pytest.raises(ValueError, match="transition"):
        T.hmm_denoising(RBG(0), n_seq=2, length=3, d=4, n_states=3,
                        transition=P_ * 2)


def test_hmm_posterior_matches_enumeration():
    """Forward-backward vs brute force over all S^L paths (float64 NumPy)."""
    S, L, d, sigma = 3, 5, 2, 0.9
    P_ = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.25, 0.25, 0.5]])
    init = np.array([0.5, 0.3, 0.2])
    rng = np.random.default_rng(0)
    mu = rng.standard_normal((S, d))
    mu /= np.linalg.norm(mu, axis=1, keepdims=True)
    x = rng.standard_normal((L, d))
    post = np.zeros((L, S))
    for path in itertools.product(range(S), repeat=L):
        w = init[path[0]] * np.prod([P_[a, b] for a, b in zip(path[:-1], path[1:], strict=True)])
        w *= np.exp(-0.5 * np.sum((x - mu[list(path)]) ** 2) / sigma ** 2)
        post[np.arange(L), path] += w
    post /= post.sum(1, keepdims=True)
    got = jax.jit(functools.partial(T.hmm_posterior, sigma=sigma))(
        jnp.asarray(x), jnp.asarray(mu), jnp.asarray(P_), jnp.asarray(init))
    np.testing.assert_allclose(got, post, atol=1e-6)


# ---------------------------------------------------------------------- chains


def test_chain_order_and_rate():
    m, p = 4, 0.1
    t = jax.jit(lambda k: T.ordered_features(k, n_seq=50, length=80, d=8, n_chains=3,
                                             chain_length=m, p_start=p))(RBG(5))
    c = np.asarray(t.codes)  # (n, L, C, m)
    # A at t => B at t+1 => ... (within the sequence), and B at t => A at t-1
    assert np.all(c[:, :-1, :, :-1] <= c[:, 1:, :, 1:])
    assert np.all(c[:, 1:, :, 1:] <= c[:, :-1, :, :-1])
    np.testing.assert_array_equal(c[..., 0], np.asarray(t.starts))
    assert abs(c.mean() - p) < 0.01
    with pytest.raises(ValueError, match="chain_length"):
        T.ordered_features(RBG(0), n_seq=2, length=5, d=3, n_chains=1,
                           chain_length=2)


@pytest.mark.parametrize("window", [2, 3, 5])
def test_chain_atoms(window):
    u = T.unit_directions(RBG(0), 6, 8).reshape(2, 3, 8)
    a = np.asarray(T.chain_atoms(u, window))
    n_align = abs(3 - window) + 1
    assert a.shape == (2 * n_align, window, 8)
    np.testing.assert_allclose(np.linalg.norm(a.reshape(len(a), -1), axis=1), 1.0,
                               atol=1e-6)
    first = a[0][np.linalg.norm(a[0], axis=1) > 0]
    cos = np.sum(first * np.asarray(u[0, :len(first)]), 1) / np.linalg.norm(first, axis=1)
    np.testing.assert_allclose(cos, 1.0, atol=1e-6)  # chain 0 in order, first alignment


def test_sliding_windows():
    x = jnp.arange(2 * 6 * 3, dtype=jnp.float32).reshape(2, 6, 3)
    w = T.sliding_windows(x, 4)
    assert w.shape == (2, 3, 4, 3)
    np.testing.assert_array_equal(w[1, 2], x[1, 2:6])
    with pytest.raises(ValueError, match="window"):
        T.sliding_windows(x, 7)


# ------------------------------------------------------------------ comparison

TINY = QUICK.override(["rhos=0.0,0.9", "windows=2", "ks=1", "seeds=2", "steps=40",
                       "log_every=20", "checkpoint_every=2", "batch_size=32", "n_latents=12",
                       "d=6", "n_features=10", "pi=0.1", "length=16", "n_train=8", "n_test=4",
                       "n_states=3", "sigma=0.8", "n_chains=3", "hmm_windows=2",
                       "chain_windows=2", "panel=synthetic", "reference=false"])
METRIC_KEYS = {"token_auc", "token_mmcs", "token_mcc", "temporal_auc", "temporal_mmcs",
               "fvu", "l0", "train_fvu_final"}


def test_recovery_metrics_reference():
    """The true dictionary scores 1; a one-position atom scores 1/sqrt(T) against a
    persisting feature; the slice floor drops numerical leftovers."""

    u = T.unit_directions(RBG(0), 5, 8)
    Tw = 4
    truth = T.persistent_atoms(u, Tw)
    rec = jax.jit(lambda a, t: C.recovery_metrics(a, C.token_slices(a), u, t))  # 1 compile
    res = rec(truth, truth)
    for key in ("token_auc", "token_mmcs", "token_mcc", "temporal_mmcs"):
        assert float(res[key]) == pytest.approx(1.0, abs=1e-5), key
    one_pos = jnp.pad(u[:, None], ((0, 0), (0, Tw - 1), (0, 0)))
    res = rec(one_pos, truth)
    assert float(res["temporal_mmcs"]) == pytest.approx(0.5, abs=1e-5)
    assert float(res["token_mmcs"]) == pytest.approx(1.0, abs=1e-5)
    # a leftover slice at 5% of the atom's main slice is dropped, one at 50% is kept
    a = jnp.stack([u[0], 0.05 * u[1]])[None]
    sl = np.asarray(C.token_slices(a))
    np.testing.assert_allclose(sl[1], 0.0)
    sl = np.asarray(C.token_slices(jnp.stack([u[0], 0.5 * u[1]])[None]))
    np.testing.assert_allclose(sl[1], 0.5 * u[1], atol=1e-6)


def test_probe_accuracy_known_answers():
    """The HMM latent probe: codes that are a one-hot of the state (beside constant
    columns, as dead latents and padding are) read it perfectly at every position; codes
    independent of the state score chance 1/S (1,200 held-out predictions, sd 0.014)."""
    rng = np.random.default_rng(0)
    S, N, P, width = 3, 600, 2, 24
    y_fit, y_test = rng.integers(0, S, (N, P)), rng.integers(0, S, (N, P))

    def one_hot(y):
        return np.pad(np.eye(S)[y].reshape(N, P * S), ((0, 0), (0, width - P * S)))

    probe = functools.partial(C._probe_jit, n_classes=S)  # one compile for both cases
    acc = probe(jnp.asarray(one_hot(y_fit), jnp.float32), y_fit,
                jnp.asarray(one_hot(y_test), jnp.float32), y_test)
    np.testing.assert_array_equal(np.asarray(acc), 1.0)
    noise = rng.standard_normal((2, N, width)).astype(np.float32)
    acc = probe(noise[0], y_fit, noise[1], y_test)
    assert acc.shape == (P,) and abs(float(acc.mean()) - 1 / S) < 0.06, acc


def test_view_norm_penalty_and_atoms():
    from jaxkit.kernels import crosscoder as cc

    rng = np.random.default_rng(0)
    W = rng.standard_normal((5, 3, 4))
    z = np.abs(rng.standard_normal((7, 5)))
    ref = np.mean(z @ np.linalg.norm(W, axis=-1).sum(-1))
    assert float(C.view_norm_penalty(jnp.asarray(z), jnp.asarray(W))) == pytest.approx(ref)
    # stacked per-position SAEs: SAE p's atoms sit at position p of the window
    p = jax.jit(jax.vmap(lambda k: cc.init(k, 4, 5, site=(1,))))(jax.random.split(RBG(0), 3))
    atoms = np.asarray(C.window_atoms("stacked", p, 3))
    assert atoms.shape == (15, 3, 4)
    np.testing.assert_allclose(atoms[5:10, 1], p.W_dec[1, :, 0])
    assert np.all(atoms[5:10, [0, 2]] == 0)
    # the per-token SAE writes to every position: each atom at each of the T positions,
    # but its per-token atoms are counted once
    sae = jax.tree_util.tree_map(lambda a: a[0], p)
    atoms = np.asarray(C.window_atoms("sae", sae, 3))
    assert atoms.shape == (15, 3, 4)
    np.testing.assert_allclose(atoms[10:15, 2], sae.W_dec[:, 0])
    assert np.all(atoms[10:15, :2] == 0)
    np.testing.assert_allclose(C.window_slices("sae", sae, 3), sae.W_dec[:, 0])


@pytest.fixture(scope="module")
def tiny_pipeline(tmp_path_factory):
    out = tmp_path_factory.mktemp("tempbench")
    return P.run(RunContext(out_dir=out, config=TINY, quick=True)), out


def test_registered_package():
    entry = get_pipeline("tempbench")
    assert entry.module == "jaxkit.tempbench.pipeline"
    assert entry.quick is QUICK and entry.full is FULL


def test_config_validation():
    with pytest.raises(ValueError, match="`steps`"):
        QUICK.override(["steps=150"])  # not a multiple of log_every
    with pytest.raises(ValueError, match="`n_latents`"):
        QUICK.override(["n_latents=3"])
    with pytest.raises(ValueError, match="`pi`"):
        Config(pi=1.5)
    assert QUICK.override(["seeds=4"]).seeds == 4


def test_config_sections_ref_and_real(tmp_path):
    """``ref`` and ``real`` are sections: set by dotted paths (the other fields keep their
    values), their errors name the dotted path, and an old flat name suggests the new
    one; the TOML of ``--show-config`` reads back."""
    cfg = QUICK.override(["real.steps=200", "ref.latents=48"])
    assert cfg.real.steps == 200 and cfg.real.k == QUICK.real.k
    assert cfg.ref.latents == 48 and cfg.ref.methods == QUICK.ref.methods
    with pytest.raises(ValueError, match="`ref.features` must be <= d"):
        QUICK.override(["ref.features=40"])
    with pytest.raises(ValueError, match="`real.methods` must be methods"):
        QUICK.override(["real.methods=sae"])
    with pytest.raises(ValueError, match="`real.steps` must be a multiple of log_every"):
        QUICK.override(["real.steps=150"])
    with pytest.raises(ValueError, match="did you mean real.steps"):
        QUICK.override(["real_steps=3"])
    with pytest.raises(ValueError, match="did you mean ref.latents"):
        QUICK.override(["ref_latents=3"])
    from jaxkit.config import read_toml

    toml = QUICK.to_toml()
    assert "\n[real]\n" in toml and "\n[ref]\n" in toml
    (tmp_path / "c.toml").write_text(toml)
    assert Config().merged(read_toml(tmp_path / "c.toml")) == QUICK


def test_compare_markov_keys_and_finite(tiny_pipeline):
    """Direct call with the pipeline's tiny config (compiled code is reused)."""
    mk = C.MarkovSetting(d=TINY.d, n_features=TINY.n_features, pi=TINY.pi,
                         length=TINY.length, n_train=TINY.n_train, n_test=TINY.n_test)
    res = C.compare_markov(jax.random.key(7), 0.5, mk, P.train_config(TINY), windows=(2,), k=1,
                           n_seeds=2)
    assert set(res.windows) == {2} and set(res.windows[2].methods) == set(C.METHODS)
    assert res.windows[2].references is None  # the HMM's only
    for m, met in res.windows[2].methods.items():
        assert set(met) == METRIC_KEYS, m
        v = {key: np.asarray(s.seeds) for key, s in met.items()}
        for key, arr in v.items():
            assert arr.shape == (2,) and np.all(np.isfinite(arr)), (m, key)
            assert met[key].mean == pytest.approx(arr.mean()), (m, key)
        assert np.all((v["token_auc"] >= 0) & (v["token_auc"] <= 1))
    for m in ("sae", "stacked", "tc"):  # TopK: exactly k T active per window
        np.testing.assert_allclose(res.windows[2].methods[m]["l0"].seeds, 2.0)
    # per-token atoms cannot exceed 1/sqrt(T) against a persisting feature
    assert np.all(np.asarray(res.windows[2].methods["sae"]["temporal_mmcs"].seeds)
                  <= 1 / np.sqrt(2) + 1e-5)


def test_pipeline_report_consistent(tiny_pipeline):
    import json

    result, out = tiny_pipeline
    assert all(p.is_file() and p.stat().st_size > 1000 for p in result.figures)
    assert {p.name for p in result.figures} == {"tempbench_markov_auc.png",
                                               "tempbench_hmm_chains.png"}
    json.dumps(result.metrics)
    md = result.markdown
    by_label = {v: k for k, v in C.LABELS.items()}
    n_rows = 0
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 9 and cells[3] in by_label:  # Markov table row
            T_, k, rho, label, auc, mcc, tauc, fvu, l0 = cells
            summ = result.metrics["markov"][f"T={T_}"][f"k={k}"][f"rho={float(rho)}"]
            s = summ[by_label[label]]
            assert [auc, mcc, tauc, fvu, l0] == [R.fmt(Summary.from_dict(s[m])) for m in (
                "token_auc", "token_mcc", "temporal_auc", "fvu", "l0")]
            n_rows += 1
    assert n_rows == len(TINY.rhos) * len(C.METHODS)
    # verdict counts match the verdicts
    v = result.metrics["verdicts"]
    for key, c in result.metrics["verdict_counts"].items():
        assert c["win"] == sum(d.get(key) == "win" for d in v.values())
    assert "Where the temporal crosscoder wins" in md
    hmm = result.metrics["hmm"]["T=2"]
    refs = hmm["references"]
    assert refs["forward_backward"]["mean"] >= refs["single_token"]["mean"]
    assert 0 <= hmm["tc"]["state_acc"]["mean"] <= 1
    for m in C.METHODS:  # the latent probe, every method, beside the x_hat readout
        assert 0 <= hmm[m]["probe_acc"]["mean"] <= 1 and len(hmm[m]["probe_acc"]["seeds"]) == 2
    assert "state acc. (latent probe)" in md and "state acc. (x_hat readout)" in md
    assert 1 / TINY.n_states < refs["window_probe"]["mean"] <= 1  # the raw window carries it
    # the paper's two synthetic rows (Markov, HMM), then jaxkit's own rows, one per test:
    # 3 Markov (rho max: temporal, token; rho min: equivalence), HMM x_hat readout vs the
    # SAE and vs the raw window mean, HMM latent probe vs the SAE and vs the probe on the
    # raw window (non-inferiority), chains; each measured on the per-seed differences of
    # the summaries; then the real-task row (not tested: panel=synthetic) and the
    # backtracking pair (not tested)
    paper = [c for c in result.claims if c.kind == "paper"]
    ext = [c for c in result.claims if c.kind == "extension"]
    assert len(result.claims) == 13 and len(paper) == 5 and len(ext) == 8
    assert "setting 1" in paper[0].claim and "setting 2" in paper[1].claim
    assert all("Holm" in c.test and "margin 0.01" in c.test for c in paper[:2])
    assert [c.verdict for c in paper[2:]] == ["not tested"] * 3
    assert "panel=synthetic" in paper[2].note
    d_wm = np.subtract(hmm["tc"]["state_acc"]["seeds"], refs["window_mean"]["seeds"])
    assert "raw window" in ext[4].claim
    assert ext[4].measured.startswith(f"{d_wm.mean():.3g}")
    d_probe = np.subtract(hmm["tc"]["probe_acc"]["seeds"], hmm["sae"]["probe_acc"]["seeds"])
    assert "latents track" in ext[5].claim
    assert ext[5].measured.startswith(f"{d_probe.mean():.3g}")
    d_raw = np.subtract(hmm["tc"]["probe_acc"]["seeds"], refs["window_probe"]["seeds"])
    assert "raw-window probe" in ext[6].claim and "margin -0.05" in ext[6].test
    assert ext[6].measured.startswith(f"{d_raw.mean():.3g}")
    assert "structural" in ext[0].note and "structural" in ext[-1].note
    assert 0 <= refs["bayes_filter"]["mean"] <= 1
    # the temporal AUC is tallied only against the acausal crosscoder (structural vs SAEs)
    assert "structural_temporal_auc_vs_sae" in result.metrics
    assert "Structural, not counted as wins" in md
    assert all(c.verdict in ("yes", "no", "not shown") for c in result.claims[:10])
    s = result.metrics["chains"]["T=2"]
    d = np.subtract(s["tc"]["temporal_auc"]["seeds"], s["sae"]["temporal_auc"]["seeds"])
    assert ext[-1].measured.startswith(f"{d.mean():.3g}")
    assert (out / "checkpoints").is_dir()


def test_pipeline_resume(tiny_pipeline):
    result, out = tiny_pipeline
    ctx = RunContext(out_dir=out, config=TINY, quick=True)
    again = P.run(ctx)
    assert len(ctx.reloaded) == len(TINY.rhos) + 2
    assert again.metrics["markov"] == result.metrics["markov"]


class _Killed(RuntimeError):
    pass


def _kill_at_save(monkeypatch, n: int):
    """Make the ``n``-th checkpoint save (1-based) raise: the training dies mid-way with
    the earlier checkpoints on disk."""
    calls = {"n": 0}
    save = Checkpointer.save

    def killing(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == n:
            raise _Killed(f"killed at save {n}")
        return save(self, *a, **kw)

    monkeypatch.setattr(Checkpointer, "save", killing)


class _Count:
    """Counts the calls of a wrapped function (the batches a training draws)."""

    def __init__(self, fn):
        self.fn, self.n = fn, 0

    def __call__(self, *a, **kw):
        self.n += 1
        return self.fn(*a, **kw)


# The custom-objective trainings (acausal crosscoder, Matryoshka, T-SAE, TFA) share one
# loop (train.fit_chunks); the TopK ones go through crosscoder.fit, whose kill-and-resume
# and mesh tests are in test_crosscoder_fit.
# T-SAE and TFA differ from Matryoshka only in the chunk program (the loop is the same
# fit_chunks; TFA's attention compiles the longest): their kill-and-resume runs under -m slow
@pytest.mark.parametrize("method", ["acausal", "matryoshka",
                                    pytest.param("tsae", marks=pytest.mark.slow),
                                    pytest.param("tfa", marks=pytest.mark.slow)])
def test_training_killed_resumes_to_same_params(tmp_path, monkeypatch, method):
    """A training killed at its second checkpoint save (of 2 chunks) and resumed draws
    only the chunk after the first checkpoint and ends with the parameters of an
    uninterrupted training: exactly on one device, to float tolerance when the resumed
    run splits its batches over an 8-device mesh (acausal). The pipeline's tiny shapes
    and keys, so the one-device programs are the ones the tiny pipeline compiled."""
    from jaxkit.distributed import make_mesh
    from jaxkit.tempbench import baselines as BL

    x = T.markov_features(RBG(1), n_seq=8, length=16, d=6, n_features=10, pi=0.1, rho=0.9).x
    cfg = P.train_config(TINY)._replace(window=2, k=1, checkpoint_every=1)  # 2 chunks
    key = jax.random.key(3)

    def train(trainer, name):
        if method == "acausal":
            return TR.train_method(method, key, x, cfg, trainer, name=name)
        return BL.train_any(method, key, x, cfg, trainer, name=name)

    ref, ref_curve = train(TR.Trainer(), "ref")
    mesh = make_mesh() if method == "acausal" else None
    trainer = TR.Trainer(mesh=mesh, checkpoint_dir=tmp_path)
    with monkeypatch.context() as mp:
        _kill_at_save(mp, 2)
        with pytest.raises(_Killed):
            train(trainer, "job")
    count = _Count(TR.sample_chunk)
    monkeypatch.setattr(TR, "sample_chunk", count)
    got, curve = train(trainer, "job")
    assert count.n == 1  # resumed from the checkpoint after chunk 1
    tol = dict(atol=2e-4, rtol=1e-4) if mesh is not None else dict(atol=0, rtol=0)
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(got), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), **tol)
    np.testing.assert_allclose(curve[-1], ref_curve[-1], rtol=1e-4)


def test_pipeline_killed_resumes_to_same_results(tiny_pipeline, tmp_path, monkeypatch):
    """The pipeline killed in its 7th training (at that training's checkpoint save) and
    run again gives the results of the uninterrupted run: the finished trainings reload
    from the stage cache, the interrupted one runs again (resuming a training from a
    mid-way checkpoint is test_training_killed_resumes_to_same_params)."""
    result, _ = tiny_pipeline
    with monkeypatch.context() as mp:
        _kill_at_save(mp, 7)
        with pytest.raises(_Killed):
            P.run(RunContext(out_dir=tmp_path, config=TINY, quick=True))
    ctx = RunContext(out_dir=tmp_path, config=TINY, quick=True)
    again = P.run(ctx)
    assert ctx.reloaded  # the trainings finished before the kill
    for part in ("markov", "hmm", "chains"):
        assert again.metrics[part] == result.metrics[part], part
    assert [c.to_dict() for c in again.claims] == [c.to_dict() for c in result.claims]


def _settings_of(markov: dict, hmm: dict, chains: dict) -> list[dict]:
    return ([s for per_k in markov.values() for per_rho in per_k.values()
             for s in per_rho.values()] + list(hmm.values()) + list(chains.values()))


def _paper_verdicts(markov, hmm, chains, real_info):
    from jaxkit.tempbench import report_real

    cfg = TINY.merged({"real.seeds": 3, "real.windows": (3,)})
    # the plain mappings of metrics.json, read back into the typed results
    cl = R.claims(cfg, MarkovSweep.from_dict(markov), Panel.from_dict(hmm),
                  Panel.from_dict(chains)) + report_real.real_claims(cfg, real_info)
    return [c.verdict for c in cl if c.kind == "paper"]


def test_negative_control_a_tc_that_is_the_sae_wins_no_paper_claim(tiny_pipeline):
    """Negative control: the tiny run's own results with the temporal crosscoder's
    numbers replaced by the per-token SAE's (a TC that is the SAE: no effect by
    construction), and a real panel whose TC is a copy of its SAE. No paper claim may say
    "yes"; the synthetic rows must say "no" (TC - SAE = 0 < the margin). The positive
    control (a planted TC advantage of 0.2 on the same results) says "yes", so the claim
    logic can say yes."""
    import copy

    from jaxkit.tempbench import real

    result, _ = tiny_pipeline
    parts = [copy.deepcopy(result.metrics[k]) for k in ("markov", "hmm", "chains")]
    for s in _settings_of(*parts):
        s["tc"] = copy.deepcopy(s["sae"])
    null_real = RealResult(source="x", tokens=0,
                           real=real.summarise_real(_fake_real(copy_tc_from="sae")))
    got = _paper_verdicts(*parts, null_real)
    assert "yes" not in got and len(got) == 5
    assert got[:2] == ["no", "no"] and got[2] in ("no", "not shown")
    assert got[3:] == ["no", "no"]  # backtracking: TC - SAE = 0 is not above the margin 0
    # positive control: the same results with every method at the SAE's numbers and the
    # TC 0.2 above them (2 seeds: a t interval with 1 degree of freedom needs a steady
    # difference)
    for s in _settings_of(*parts):
        for key in ("token_auc", "temporal_auc", "probe_acc"):
            if key in s["tc"]:
                base = np.asarray(s["sae"][key]["seeds"])
                for m in C.METHODS:
                    s[m][key]["seeds"] = list(base + (m == "tc") * (0.2 + 0.001 * np.arange(
                        len(base))))
    good_real = RealResult(source="x", tokens=0,
                           real=real.summarise_real(_fake_real(tc_shift=0.2)))
    assert _paper_verdicts(*parts, good_real) == ["yes"] * 5


def _fake_real(tc_shift: float = 0.0, copy_tc_from: str | None = None, seeds: int = 3):
    """A real-panel result (:func:`jaxkit.tempbench.real.summarise_real`'s input): every
    method at 0.7 + noise on every task, the TC shifted by ``tc_shift`` or an exact copy
    of ``copy_tc_from``."""
    from jaxkit.tempbench import real
    from jaxkit.tempbench import text_tasks as TT

    rng = np.random.default_rng(0)
    res = {}
    for m in ("raw_token", "raw_window", "sae", "stacked", "acausal", "tfa", "tc"):
        keys = [f"{t}/{k}" for t in TT.TASKS for k in real.PROBE_METRICS]
        if m not in real.REFERENCES:
            keys += ["bt/detect", "bt/steer_sel", "bt/steer", "loss_recovered"]
        met = {key: 0.7 + 0.01 * rng.normal(size=seeds) + (tc_shift if m == "tc" else 0.0)
               for key in keys}
        met["fvu"], met["l0"] = np.full(seeds, 0.2), np.full(seeds, 3.0)
        res[m] = met
    if copy_tc_from:
        res["tc"] = {k: v.copy() for k, v in res[copy_tc_from].items()}
    return {"tasks": {t: {"positives": 0.3, "valid": 100} for t in TT.TASKS}, "T=3": res}


@pytest.mark.slow
def test_quick_pipeline(tmp_path):
    r = P.run(RunContext(out_dir=tmp_path, config=QUICK, quick=True))
    assert len(r.figures) == 2 and "### Markov features" in r.markdown
    assert set(r.metrics["markov"]["T=3"]["k=1"]) == {"rho=0.0", "rho=0.9"}
    # synthetic: 2 paper + 8 extension; real: the task-count row, the backtracking pair
    # (paper), loss recovered and the steering control (extension), the probe setup row
    assert len(r.claims) == 2 + 8 + 3 + 2 + 1
    assert sum(c.kind == "paper" for c in r.claims) == 5
    assert "### Real activations" in r.markdown and "real_tallies" in r.metrics
    assert "loss recovered" in r.markdown and "backtracking" in r.markdown
    real_rows = [c for c in r.claims if "Stand-in" in c.claim]
    assert len(real_rows) == 2 and all(c.measured.startswith("T=3: TC") for c in real_rows)

