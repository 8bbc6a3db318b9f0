"""AIRA-Compose: layer strings, build() against hand-built models, the supernet, save /
load, bad input, search policies, the scaling fit on synthetic losses, and the claim
computations on small synthetic results."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxkit.kernels import seq

from jaxkit.compose import (
    Arch,
    build,
    extract,
    fit_chinchilla,
    frontier,
    load_lm,
    parse,
    save_lm,
    scales_faster,
    stack,
    stretch,
)
from jaxkit.compose import report as R
from jaxkit.compose import scaling as S
from jaxkit.compose.arch import llama_style, mutate, mutation_ops, nemotron_style
from jaxkit.compose.model import SuperLM, identity_kinds, lm_loss
from jaxkit.compose.policies import POLICIES, make_policy
from jaxkit.compose.results import SearchRun
from jaxkit.compose.search import run_search

KW = dict(width=16, heads=2, d_state=4, context=8)


def test_bad_architectures_are_clear_errors():
    with pytest.raises(ValueError, match="unknown letter.*X"):
        Arch("AMX")
    with pytest.raises(ValueError, match="non-empty"):
        Arch("")
    with pytest.raises(ValueError, match="divisible by `heads`"):
        Arch("AM", width=30, heads=4)
    with pytest.raises(ValueError, match="`width`"):
        Arch("AM", width=0)
    assert parse(" ams ").layers == "AMS"


def test_stack_stretch_and_baselines():
    assert stack("AMS", 7) == "AMSAMSA"
    assert stretch("AMS", 2) == "AAMMSS"
    assert llama_style(5) == "AMAMA"
    assert nemotron_style(8) == "SMSMAMSM"
    assert nemotron_style(16).count("A") == 2
    assert nemotron_style(8, "D") == "DMDMAMDM"  # Nemotron-H's Mamba-2 layers
    assert mutation_ops("AM") == ["to-A", "to-M", "swap", "copy", "tile"]
    assert "to-D" in mutation_ops()
    assert any("D" in mutate(np.random.default_rng(i), "AMAM", "to-D", "AMD") for i in range(5))
    with pytest.raises(ValueError, match="`alphabet`"):
        mutation_ops("AQ")
    rng = np.random.default_rng(0)
    for _ in range(50):
        s = mutate(rng, "AMAM", "to-S", "AM")
        assert "S" not in s and len(s) == 4
    with pytest.raises(ValueError, match="`depth`"):
        stack("A", 0)


@pytest.fixture(scope="module")
def small_model():
    arch = Arch("AMSD", **KW, ssd_chunk=4)  # 8 = 2 SSD chunks of 4
    return arch, build(arch, jax.random.key(1))


def test_build_matches_hand_built_model(small_model):
    arch, model = small_model
    tokens = jax.random.randint(jax.random.key(2), (2, 8), 0, 256)
    # hand-built: embedding + positions, three residual blocks, final norm, tied head
    b = model.blocks
    w = [blk.weights() for blk in b]
    norms = [blk.norm[...] for blk in b]

    @jax.jit  # one compilation of each side instead of eager op-by-op dispatch
    def hand_built(tokens, tok, pos, norm_f, w, norms):
        x = tok[tokens] + pos[:8]
        x = x + seq.self_attention(w[0], seq.layer_norm(x, norms[0]), 2)
        x = x + seq.mlp(w[1], seq.layer_norm(x, norms[1]))
        x = x + seq.mamba_mixer(w[2], seq.layer_norm(x, norms[2]))
        x = x + seq.mamba2_mixer(w[3], seq.layer_norm(x, norms[3]), chunk=4)
        return seq.layer_norm(x, norm_f) @ tok.T

    logits = hand_built(tokens, model.embed.tok[...], model.embed.pos[...],
                        model.embed.norm_f[...], w, norms)
    np.testing.assert_allclose(jax.jit(lambda t: model(t))(tokens), logits, rtol=1e-5,
                               atol=1e-5)
    assert [blk.letter for blk in model.blocks] == list("AMSD")
    assert len(jax.eval_shape(model.hidden_states, tokens)) == 5
    # the analytic parameter count equals the model's
    from flax import nnx
    n = sum(v[...].size for _, v in nnx.to_flat_state(nnx.state(model, nnx.Param)))
    assert n == arch.n_params(embedding=True)
    with pytest.raises(ValueError, match="longer than the model's context"):
        model(jnp.zeros((1, 9), jnp.int32))


@pytest.mark.slow
def test_supernet_extract_and_identity_padding():
    from flax import nnx
    sup = SuperLM(Arch("AAAA", **KW), rngs=nnx.Rngs(params=jax.random.key(4)))
    tokens = jax.random.randint(jax.random.key(5), (2, 8), 0, 256)
    k = jnp.asarray(identity_kinds("SMA", 4))
    np.testing.assert_array_equal(k, [2, 1, 0, 4])  # 4 = len(LETTERS): the identity
    ref = extract(sup, "SMA")
    assert [b.letter for b in ref.blocks] == list("SMA")
    # the supernet's layer 4 is the identity: its output equals the 3-layer model's
    np.testing.assert_allclose(sup(tokens, k), ref(tokens), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_save_load_round_trip(small_model, tmp_path):
    arch, model = small_model
    save_lm(tmp_path / "lm", model, meta={"note": "x"})
    m2, meta = load_lm(tmp_path / "lm")
    tokens = jnp.arange(8)[None] % 256
    np.testing.assert_array_equal(m2(tokens), model(tokens))
    assert meta == {"note": "x"} and m2.arch == arch
    with pytest.raises(ValueError, match="not a saved model"):
        load_lm(tmp_path / "missing")


def test_lm_loss_uniform_is_8_bits():
    logits = jnp.zeros((2, 3, 256))
    t = jnp.ones((2, 3), jnp.int32)
    assert float(lm_loss(logits, t)) / np.log(2) == pytest.approx(8.0, rel=1e-6)


def test_fit_recovers_known_scaling_law():
    rng = np.random.default_rng(0)
    N, D, L = S.synthetic_losses(rng, np.geomspace(1e7, 1e10, 5), np.geomspace(1e9, 1e12, 5),
                                 E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.37)
    f = fit_chinchilla(N, D, L, n_starts=3)
    assert f.E == pytest.approx(1.8, rel=1e-3)
    assert f.alpha == pytest.approx(0.35, rel=1e-2)
    assert f.beta == pytest.approx(0.37, rel=1e-2)
    assert f.gamma == pytest.approx(0.35 * 0.37 / 0.72, rel=2e-2)
    # the frontier is optimal: any other split of the same compute has a higher loss
    n, d, lopt = frontier(f, 1e21)
    for k in (0.5, 2.0):
        assert S.predict(f, n * k, d / k) > lopt
    steeper = f._replace(alpha=0.7, beta=0.74)
    assert scales_faster(steeper, f) == pytest.approx(100.0, rel=1e-6)
    with pytest.raises(ValueError, match="`N`, `D`, `L`"):
        fit_chinchilla([1, 2], [1, 2], [1, 2])


def test_search_policies_on_a_synthetic_landscape():
    target = "SMSMAMSM"
    cost = {}

    def evaluate(strings):
        return [cost.setdefault(s, sum(a != b for a, b in zip(s, target, strict=True)))
                for s in strings]

    best = {}
    for name in POLICIES:
        vals = []
        for seed in range(6):
            p = make_policy(name, 8, jax.random.key(seed), population=6, sample=3)
            r = run_search(p, evaluate, 40, np.random.default_rng(seed), batch=2)
            assert len(r.losses) == 40 and r.best_curve[-1] == min(r.losses)
            if name == "composer":
                assert all("S" not in s and "D" not in s for s in r.strings)
            vals.append(r.best_loss)
        best[name] = np.mean(vals)
    # a smooth landscape: evolution (and its bandit variants) beat random search
    assert best["evolution"] < best["random"]
    assert best["bandit-ducb"] < best["random"]
    with pytest.raises(ValueError, match="`policy`"):
        make_policy("greedy", 4, jax.random.key(0))


def _fake_results(found_better: bool):
    rng = np.random.default_rng(1)
    runs = {p: [SearchRun(best_loss=float(3.0 + rng.normal(0, 0.01) - (0.1 if p != "random"
                                                                      else 0)),
                          best="MSM", best_curve=[3.2, 3.0], strings=["MSM"], losses=[3.0],
                          pulls=[]) for _ in range(5)] for p in POLICIES}
    s1 = dict(runs=runs, exhaustive=True, table={"MSM": 3.0})
    delta = -0.2 if found_better else 0.2
    bpb = {lab: [[4.0 + rng.normal(0, 0.01) for _ in range(3)]] for lab in
           ("llama", "nemotron", "composer-stack")}
    bpb["best1-stack"] = [[4.0 + delta + rng.normal(0, 0.01) for _ in range(3)]]
    s2 = dict(bpb=bpb, arch=dict(depth=6, width=32), tokens=[1000], labels=list(bpb),
              strings=["AMAMAM", "DMAMDM", "AMAAMA", "MSMMSM"])
    g = dict(N=[1] * 6, D=[1] * 6)
    fast = dict(pct_seeds=[30.0, 35.0, 40.0], pct=35.0)
    sc = dict(faster=dict(llama=fast, composer=dict(fast), nemotron=dict(fast)),
              best1=g, llama=g, families=["llama", "composer", "nemotron"],
              span=(100.0, 100.0))
    return s1, s2, sc


def test_claims_say_yes_and_no():
    from jaxkit.compose.config import QUICK

    def paper(s1, s2, sc):
        return {c.claim[:60]: c.verdict for c in R.claims(QUICK, s1, s2, sc)
                if c.kind == "paper"}

    s1, s2, sc = _fake_results(True)
    cl = paper(s1, s2, sc)
    assert len(cl) == 8
    # the fixed-budget claim and three frontier claims (54%, 71%, 23%) are decided; the
    # rest are not tested here, and the 37% one needs a Composer search over hybrids
    assert list(cl.values()).count("yes") == 4
    assert list(cl.values()).count("not tested") == 4
    s1, s2, sc = _fake_results(False)
    for v in sc["faster"].values():
        v["pct_seeds"] = [-30.0, -35.0, -40.0]
    assert list(paper(s1, s2, sc).values()).count("no") == 4
    # a slope only 5% steeper is under the 10% margin: not a "yes"
    for v in sc["faster"].values():
        v["pct_seeds"] = [4.0, 5.0, 6.0]
    assert "yes" not in paper(s1, s2, sc).values()
    # a grid spanning less than a decade cannot test the scaling claims
    sc["span"] = (4.0, 4.0)
    assert list(paper(s1, s2, sc).values()).count("not tested at this size") == 3
    # the search-policy rows are jaxkit's extensions, never paper rows
    assert all(c.kind == "extension" for c in R.claims(QUICK, s1, s2, sc)
               if c.claim.startswith("A guided search ("))


def _null_effect(seeds=4, noise=0.004):
    """Stage-2 results where the found architecture *is* the baseline: every family's
    losses follow one Chinchilla law (a grid of 3 depths spanning 10x in N and 3 budgets
    spanning 10x in D), each architecture and seed with its own small noise."""
    from jaxkit.compose.config import Config

    cfg = Config(depth=2, depth_factor=2, scaling_depths=(1, 2), scaling_budgets=(20, 60, 200),
                 steps2=200, chunk=20, seeds2=seeds, fit_maxiter=300)
    rng = np.random.default_rng(0)
    n_of = {1: 2e4, 2: 6.3e4, 4: 2e5}
    tokens = [2e5, 6.3e5, 2e6]
    labels, n_params = [], []
    for fam in ("best1", "llama", "composer", "nemotron"):
        for d in (1, 2, 4):
            labels.append({"best1": "best1-stack", "llama": "llama", "composer":
                           "composer-stack", "nemotron": "nemotron"}[fam] if d == 4
                          else f"{fam}@{d}")
            n_params.append(n_of[d])
    bpb = {}
    for lab, n in zip(labels, n_params, strict=True):
        law = 1.7 + 400.0 * n ** -0.34 + 410.0 * np.asarray(tokens)[:, None] ** -0.28
        bpb[lab] = (law * np.exp(noise * rng.standard_normal((3, seeds)))).tolist()
    s2 = dict(labels=labels, strings=["AMAM"] * len(labels), n_params=n_params,
              tokens=tokens, bpb=bpb, arch=dict(depth=4, width=16))
    return cfg, s2


def test_negative_control_no_paper_claim_says_yes_on_a_null_effect():
    """The found architecture is the Llama-style baseline (a null effect): the real
    scaling fits and the claim tests must not say "yes" to any paper claim."""
    from jaxkit.compose import experiments as E

    cfg, s2 = _null_effect()
    s1 = dict(runs={p: [SearchRun(best_loss=3.0, best="AM", best_curve=[3.0], strings=["AM"],
                                  losses=[3.0], pulls=[])] * 4 for p in POLICIES},
              exhaustive=True, table={"AM": 3.0})
    # every policy's promoted best (the agent's too) on the test split: one distribution
    rng = np.random.default_rng(5)
    s2["promoted"] = {f"promoted:{p}/{i}": dict(string="AMAM", bpb=[[float(
        3.0 + 0.01 * rng.standard_normal())]]) for p in POLICIES for i in range(4)}
    sc = E.scaling(s2, cfg)
    assert sc["families"] == ["llama", "composer", "nemotron"] and min(sc["span"]) >= 10
    claims = R.claims(cfg, s1, s2, sc)
    paper = [c for c in claims if c.kind == "paper"]
    assert len(paper) == 8 and not [c.claim for c in paper if c.verdict == "yes"]
    # the five testable rows (the agent's against random search too) are tested (not
    # skipped for size)
    tested = [c for c in paper if c.verdict in ("no", "not shown")]
    assert len(tested) == 5, [(c.claim[:40], c.verdict) for c in paper]
    assert not [c for c in claims if c.claim.startswith("The agent's") and c.verdict == "yes"]


def test_user_text_errors_and_split(tmp_path):
    from jaxkit.compose.data import load_text
    p = tmp_path / "t.txt"
    p.write_bytes(b"x" * 100)
    with pytest.raises(ValueError, match="at least"):
        load_text(p)
    with pytest.raises(ValueError, match="cannot read"):
        load_text(tmp_path / "missing.txt")
    p.write_bytes(bytes(range(256)) * 10)
    c = load_text(p, 0.25)
    assert len(c.train) == 1920 and len(c.val) == 640 and c.train[1] == 1


@pytest.mark.slow
def test_cli_train_lm(tmp_path):
    from typer.testing import CliRunner

    from jaxkit.compose.cli import app
    p = tmp_path / "t.txt"
    p.write_bytes(b"to be or not to be, that is the question. " * 100)
    r = CliRunner().invoke(app, ["train-lm", "--text", str(p), "--out", str(tmp_path / "o"),
                                 "--layers", "AS", "--width", "8", "--heads", "2",
                                 "--d-state", "2", "--context", "8", "--steps", "4",
                                 "--batch", "2", "--chunk", "2"])
    assert r.exit_code == 0, r.output
    model, meta = load_lm(tmp_path / "o" / "lm")
    assert model.arch.layers == "AS" and meta["val_bpb"] < 8.5
    bad = CliRunner().invoke(app, ["train-lm", "--text", str(p), "--out", str(tmp_path),
                                   "--layers", "AX"])
    assert bad.exit_code != 0 and "unknown letter" in bad.output
