"""AIRA-Compose's fair baselines and readable scaling (issue 62 parts 2-3): the
Llama-style model against a direct computation with jaxkit.lm's layers, parameter
matching, each run's own cosine schedule, the bounded variable-projection fit
(recovery and degeneracy), and the claims with their negative control."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxkit import training
from jaxkit.compose import fair as F
from jaxkit.compose import vpfit
from jaxkit.compose.config import QUICK, Config
from jaxkit.compose.data import load_corpus
from jaxkit.compose.fair_report import fair_claims, fair_markdown, plot_fair
from jaxkit.compose.llama import build_llama, llama_apply, llama_config, llama_n_params
from jaxkit.compose.results import SearchRun
from jaxkit.compose.runs import (
    RunSettings,
    horizon_cosine,
    match_compose,
    match_llama,
    set_horizon,
    train_runs,
)
from jaxkit.lm.model import rms_norm, rope


def _direct(w, c, tokens):
    """The Llama forward written out with jaxkit.lm's rms_norm and rope, attention with
    the key/value heads repeated per group and a causal mask, SwiGLU."""
    B, T = tokens.shape
    x = w["embed"][tokens]
    pos = jnp.broadcast_to(jnp.arange(T), (B, T))
    g = c.n_heads // c.n_kv_heads
    mask = jnp.tril(jnp.ones((T, T), bool))
    for i in range(c.n_layers):
        n = rms_norm(x, w["attn_norm"][i], c.norm_eps)
        q = rope((n @ w["wq"][i]).reshape(B, T, c.n_heads, c.head_dim), pos, c.rope_base)
        k = rope((n @ w["wk"][i]).reshape(B, T, c.n_kv_heads, c.head_dim), pos, c.rope_base)
        v = (n @ w["wv"][i]).reshape(B, T, c.n_kv_heads, c.head_dim)
        k, v = jnp.repeat(k, g, axis=2), jnp.repeat(v, g, axis=2)
        s = jnp.einsum("bshd,bthd->bhst", q, k) / np.sqrt(c.head_dim)
        p = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1)
        o = jnp.einsum("bhst,bthd->bshd", p, v).reshape(B, T, -1)
        x = x + o @ w["wo"][i]
        m = rms_norm(x, w["mlp_norm"][i], c.norm_eps)
        x = x + (jax.nn.silu(m @ w["w_gate"][i]) * (m @ w["w_up"][i])) @ w["w_down"][i]
    return rms_norm(x, w["final_norm"], c.norm_eps) @ w["embed"].T


def test_llama_block_is_jaxkit_lm_and_counts_its_parameters():
    c = llama_config(8, 2, 4, 12)
    assert (c.n_heads, c.n_kv_heads, c.head_dim) == (4, 2, 2)  # grouped-query attention
    model = build_llama(c, jax.random.key(1))
    w = model.weights()
    tokens = jax.random.randint(jax.random.key(2), (2, 7), 0, 256)
    got = llama_apply(model, tokens)
    assert got.shape == (2, 7, 256)
    np.testing.assert_allclose(got, _direct(w, c, tokens), rtol=2e-5, atol=2e-5)
    # causal: the first positions do not see later tokens
    t2 = tokens.at[:, 5:].set(0)
    np.testing.assert_allclose(llama_apply(model, t2)[:, :5], got[:, :5], atol=1e-5)
    total = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    assert llama_n_params(c) == total - 256 * 8
    with pytest.raises(ValueError, match="`width`"):
        llama_config(10, 1, 4, 8)


def test_parameter_matching():
    cfg = QUICK
    t = match_llama(50_000, 32, 3, 2, 32)
    assert abs(t.n_params / 50_000 - 1) < 0.01 and t.llama.n_kv_heads == 1
    h = match_compose("DMAMDM", 50_000, 32, cfg, 32, depth=6)
    assert abs(h.n_params / 50_000 - 1) < 0.05 and set(h.arch.layers) == set("ADM")
    # the plan matches each baseline to its found family at every width
    s1 = dict(runs={p: [SearchRun.from_history(["AMAMAM", "ADMADM", "AMMAMM", "DAMDAM"],
                                               [3.0, 2.9, 3.1, 3.2])] for p in QUICK.policies})
    plan = F.fair_plan(QUICK, s1)
    assert plan["strings"] == {"found-T": "AMAMAM", "found-H": "ADMADM",
                               "composer-T": "AMAMAM", "composer-H": "ADMADM"}
    assert "random search" in plan["notes"]["composer-H"]
    n = plan["n_params"]
    for base, found in F.AGAINST.items():
        for nb, nf in zip(n[base], n[found], strict=True):
            assert abs(nb / nf - 1) < 0.05, (base, nb, nf)


def test_each_run_has_its_own_cosine_schedule():
    opt = horizon_cosine(1.0, 0.1, 0.1)
    p = {"w": jnp.ones(())}

    def rates(total, n):
        st = set_horizon(opt.init(p), total)
        out = []
        for _ in range(n):
            u, st = opt.update({"w": jnp.ones(())}, st)
            out.append(float(u["w"]))
        return np.asarray(out)

    r10, r40 = rates(10, 12), rates(40, 40)
    assert r10[0] == pytest.approx(1.0) and r10[9] == pytest.approx(0.1 + 0.9 * 0.5 * (
        1 + np.cos(np.pi * 0.9)), rel=1e-5)
    assert r10[10] == pytest.approx(0.1) and r10[11] == pytest.approx(0.1)  # decayed
    # a warm-up of 4 steps times the cosine over 40
    assert r40[1] == pytest.approx(0.5 * (0.1 + 0.45 * (1 + np.cos(np.pi / 40))), rel=1e-5)
    assert r40[3] == pytest.approx(0.1 + 0.45 * (1 + np.cos(np.pi * 3 / 40)), rel=1e-5)
    assert r40[20] > 0.5 > r10[9]


def test_vp_fit_recovers_known_parameters():
    true = dict(E=1.2, A=60.0, a=0.4, B=300.0, b=0.35)
    rng = np.random.default_rng(0)
    N, D = np.geomspace(1e4, 1.2e5, 4), np.geomspace(2e5, 2.4e6, 4)
    exact = vpfit.synthetic_check(rng, N, D, true=true, noise=0.0, tolerance=1e-3)
    assert exact["ok"] and max(exact["errors"].values()) < 1e-3
    noisy = vpfit.synthetic_check(rng, N, D, true=true, noise=0.002, tolerance=0.2)
    assert noisy["ok"]
    # the wrong law (no floor) is not recovered: the check can fail
    bad = vpfit.synthetic_check(rng, N, D, true=dict(true, E=1e-6), noise=0.02,
                                tolerance=0.05)
    assert not bad["ok"]


def test_vp_fit_flags_degenerate_fits():
    n, d = (v.ravel() for v in np.meshgrid(np.geomspace(1, 10, 4), np.geomspace(1e5, 1e6, 4),
                                           indexing="ij"))
    steep = vpfit.vp_fit(n, d, 1.0 + n ** -4.0 + 300 * d ** -0.35)  # a beyond the bound 2
    assert steep.degenerate and "a = 2 at its upper bound 2" in steep.reasons[0]
    flat = vpfit.vp_fit(n, d, 1.5 + 300 * d ** -0.35)  # no N dependence at all
    assert flat.degenerate and any("the N term vanished" in r for r in flat.reasons)
    floorless = vpfit.vp_fit(n, d, 2 * n ** -0.5 + 300 * d ** -0.35)  # E at its bound 0
    assert floorless.degenerate and any("floor at its bound" in r for r in floorless.reasons)
    ok = vpfit.vp_fit(n, d, 1.0 + 2 * n ** -0.5 + 300 * d ** -0.35)
    assert not ok.degenerate and ok.a == pytest.approx(0.5, rel=1e-3)
    with pytest.raises(ValueError, match="`bounds`"):
        vpfit.vp_fit(n, d, 1.0 + 0 * n, bounds=(1.0, 0.5))
    with pytest.raises(ValueError, match="`N`"):
        vpfit.vp_fit(n[:3], d[:3], n[:3])


@pytest.mark.slow
def test_train_runs_tiny_and_killed_then_resumed(tmp_path):
    spec = match_llama(1000, 8, 1, 2, 8)
    s = RunSettings(batch=2, chunk=2, n_val=4, checkpoint_every=1)
    corpus = load_corpus(max_bytes=200_000)
    r2 = train_runs(jax.random.key(0), spec, corpus, 2, s, seeds=2)
    r4 = train_runs(jax.random.key(0), spec, corpus, 4, s, seeds=2)
    assert len(r2["bpb"]) == 2 and np.all(np.isfinite(r2["bpb"]))
    assert r2["bpb"][0] != r2["bpb"][1]  # two initialisations
    assert r4["tokens"] == 2 * r2["tokens"] == 4 * 2 * 8
    with pytest.raises(ValueError, match="`steps`"):
        train_runs(jax.random.key(0), spec, corpus, 3, s)

    # killed after the checkpoint of chunk 2 of 4, resumed: the same losses bit for bit
    # (the run's own schedule length is restored with the optimiser state)
    def run(folder):
        return train_runs(jax.random.key(3), spec, corpus, 8, s, seeds=2,
                          checkpoint_dir=folder)

    ref = run(tmp_path / "ref")
    with training.interrupt_after(2) as hook, pytest.raises(training.Interrupted):
        run(tmp_path / "run")
    assert hook["fired"]
    seen: list = []
    with training.record_resumes(seen):
        out = run(tmp_path / "run")
    assert out["bpb"] == ref["bpb"] and [r["resumed_from"] for r in seen] == [2]


def _fair(cfg, found_slope: float, seed=0, noise=0.003):
    """A fair-stage result on a 4 x 4 grid spanning 10x each: the found families follow
    L = 1.5 (1 + (N/N0)^-s + (D/D0)^-s) with s = ``found_slope``, the baselines with
    s = 0.3, every seed its own noise."""
    rng = np.random.default_rng(seed)
    N = np.geomspace(2e4, 2e5, 4)
    steps = np.asarray(cfg.scale.steps)
    D = steps * cfg.scale.batch * cfg.scale.context
    grid, n_params = {}, {}
    for f in F.FAMILIES:
        s = found_slope if f.startswith("found") else 0.3
        law = 1.5 * (1 + (N[:, None] / N[0]) ** -s + (D[None] / D[0]) ** -s)
        bpb = law[..., None] * np.exp(noise * rng.standard_normal((4, 4, cfg.scale.seeds)))
        grid[f] = dict(bpb=bpb.tolist(), N=N.astype(int).tolist(), D=D.tolist(), seconds=0.0)
        n_params[f] = N.astype(int).tolist()
    plan = dict(strings={"found-T": "AMAM", "found-H": "ADAM", "composer-T": "AAMM",
                         "composer-H": "DAMM"}, notes={},
                n_params=n_params, describe={f: ["x"] * 4 for f in F.FAMILIES})
    return dict(plan=plan, grid=grid, fits=F.fit_grid(cfg, grid, rng),
                synthetic=F.synthetic(cfg, rng, grid))


CFG = QUICK.override(["scale.widths=16,24,32,48", "scale.steps=20,40,80,200", "scale.seeds=3",
                      "n_boot=5"])


def test_fair_claims_say_yes_and_negative_control_says_no(tmp_path):
    steep = _fair(CFG, 0.5)
    paper, setup = fair_claims(CFG, steep)
    assert [c.verdict for c in paper] == ["yes"] * 5, [(c.claim[:30], c.verdict, c.note)
                                                         for c in paper]
    assert [c.verdict for c in setup] == ["yes"] * 3
    assert "Fair baselines" in fair_markdown(CFG, steep)
    assert plot_fair(steep, tmp_path).stat().st_size > 1000
    # negative control: every family follows one law; no paper row may say yes
    null = _fair(CFG, 0.3, seed=1)
    paper, setup = fair_claims(CFG, null)
    assert not [c.claim for c in paper if c.verdict == "yes"]
    assert all(c.verdict in ("no", "not shown") for c in paper)
    # a baseline slope steeper than the found one: the frontier rows say no
    flat = _fair(CFG, 0.2, seed=2)
    assert [c.verdict for c in fair_claims(CFG, flat)[0][1:]] == ["no"] * 4
    # a 2 x 2 grid (QUICK) cannot test the frontier claims
    small = dict(steep, fits=dict(steep["fits"], shape=(2, 2)))
    assert all(c.verdict == "not tested at this size" for c in fair_claims(CFG, small)[0][1:])


def test_config_checks_scale_settings():
    with pytest.raises(ValueError, match="`scale.widths` each must be divisible by heads"):
        QUICK.override(["scale.widths=16,20"])
    with pytest.raises(ValueError, match="`scale.widths` must be >= 2 distinct"):
        QUICK.override(["scale.widths=16,16"])
    with pytest.raises(ValueError, match="`scale.steps` >= 2 distinct positive multiples"):
        QUICK.override(["scale.steps=20,30"])
    with pytest.raises(ValueError, match=r"unknown field `scale_steps`.*did you mean scale.steps"):
        QUICK.override(["scale_steps=20,40"])
    with pytest.raises(ValueError, match="`fit_bounds`"):
        QUICK.override(["fit_bounds=1.0,0.5"])
    assert isinstance(Config(), Config)
