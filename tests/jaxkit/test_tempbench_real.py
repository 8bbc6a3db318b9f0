"""TempBench on real activations: the text-task labels on a short text with known
answers, streaming a multi-file safetensors store, the LM recording round trip, the
probe metrics against scikit-learn, the fair tally and claims, and kill-and-resume of
the store-streamed dictionary training on a mesh with the dictionary sharded."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkit.crosscoder.store import ActivationStore, iter_tensors
from jaxkit.tempbench import lm_acts, real, report_real, stream
from jaxkit.tempbench import text_tasks as TT
from jaxkit.tempbench.config import QUICK

TEXT = "EUS**  \nNow, fair _Enter A_ the the the **HIPPO**\nFour d"
WANT = {  # ? = not knowable from the document
    "word_interior":   "??100000001000011000011100000010001000100000111000001100",
    "line_start":      "????????111111110000000000000000000000000000000000111111",
    "speaker":         "?????00000000000000000000000000000000000??11111??0000000",
    "stage_direction": "???????????????????1111111?00000000000000000000000000000",
    "repeated_ngram":  "???00000000000000000000000000000001111110000000000000000",
}


def _render(y, v):
    return "".join("?" if not vv else "1" if yy else "0" for yy, vv in zip(y, v, strict=True))


def test_task_labels_on_a_known_text():
    tok = TT.encode_text(TEXT, len(TEXT.encode()))
    got = TT.task_labels(tok)
    assert tuple(got) == TT.TASKS
    for t, want in WANT.items():
        assert _render(*(a[0] for a in got[t])) == want, t
    # " the" ends at 34 for the second time: positions 34..39 repeat a 4-gram
    # a document opening inside a bold span is read from its closing marker
    assert got["speaker"][1][0, 3] == np.False_ and got["speaker"][1][0, 5]


def test_task_label_errors():
    with pytest.raises(ValueError, match="tokens"):
        TT.task_labels(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="tokens"):
        TT.task_labels(np.full((1, 3), 300))
    with pytest.raises(ValueError, match="ngram"):
        TT.task_labels(np.zeros((1, 3), np.uint8), ngram=0)
    with pytest.raises(ValueError, match="text"):
        TT.encode_text("ab", 8)


def _write_store(tmp_path, n_files=3, docs=(3, 2, 4), L=10, d=4, layers=True):
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    acts, toks = [], []
    for i in range(n_files):
        a = rng.normal(size=(docs[i], L, d)).astype(np.float32)
        t = rng.integers(0, 256, (docs[i], L)).astype(np.uint8)
        blob = {"activations": a, "tokens": t}
        if layers:
            blob["layers"] = np.repeat(a[:, :, None], 2, axis=2)
        save_file(blob, str(tmp_path / f"shard_{i:05d}.safetensors"))
        acts.append(a)
        toks.append(t)
    return np.concatenate(acts), np.concatenate(toks)


def test_streaming_a_multi_file_store(tmp_path):
    acts, toks = _write_store(tmp_path)
    pieces = list(iter_tensors(tmp_path, ("activations", "tokens"), optional=("layers",),
                               chunk=2))
    assert [p.name for p, _ in pieces] == ["shard_00000.safetensors"] * 2 + [
        "shard_00001.safetensors"] + ["shard_00002.safetensors"] * 2  # 3, 2, 4 docs by 2
    assert max(len(g["activations"]) for _, g in pieces) == 2  # never a whole shard
    np.testing.assert_array_equal(np.concatenate([g["activations"] for _, g in pieces]), acts)
    docs = lm_acts.load_documents(tmp_path)
    np.testing.assert_array_equal(docs.acts, acts)
    np.testing.assert_array_equal(docs.tokens, toks)
    assert docs.layers.shape == (9, 10, 2, 4)
    part = lm_acts.load_documents(tmp_path, max_docs=4)  # stops inside the second shard
    np.testing.assert_array_equal(part.acts, acts[:4])
    # the training stream: windows never cross a document, ids map to the right rows
    st = ActivationStore(tmp_path, batch_size=4, window=3, tensor="activations", seed=1)
    assert len(st.shards) == 3 and st.n_windows == 9 * 3  # stride = window: 3 per doc
    flat = acts[:, :9].reshape(9, 3, 3, 4).reshape(-1, 3, 4)
    np.testing.assert_array_equal(st.read(np.arange(st.n_windows)), flat)
    b, _ = st.batch((0, 1), rows=slice(None))
    np.testing.assert_array_equal(b, flat[st.permutation(0)[4:8]])


def test_store_errors_name_the_shard(tmp_path):
    from safetensors.numpy import save_file

    save_file({"activations": np.zeros((2, 4, 3), np.float32)},
              str(tmp_path / "shard_00000.safetensors"))
    with pytest.raises(ValueError, match="shard_00000.*tokens"):
        lm_acts.load_documents(tmp_path)
    np.save(tmp_path / "x.npy", np.zeros((4, 3)))
    with pytest.raises(ValueError, match="npy"):
        list(iter_tensors(tmp_path, ("activations",)))


@pytest.fixture(scope="module")
def tiny_lm():
    from jaxkit.compose.model import build

    return build("AM", jax.random.key(0, impl="rbg"), width=16, heads=2, context=16)


def test_record_round_trip(tmp_path, tiny_lm):
    model = tiny_lm
    text = np.frombuffer((TEXT * 8).encode(), np.uint8)
    lm_acts.record(model, tmp_path, n_docs=6, length=16, layer=1, docs_per_shard=4,
                   text=text)
    assert sorted(p.name for p in tmp_path.glob("*.safetensors")) == [
        "shard_00000.safetensors", "shard_00001.safetensors"]
    meta = json.loads((tmp_path / lm_acts.MANIFEST).read_text())
    docs = lm_acts.load_documents(tmp_path)
    assert docs.acts.shape == (6, 16, 16) and docs.layers.shape == (6, 16, 2, 16)
    assert float(np.sqrt(np.mean(docs.acts.astype(np.float64) ** 2))) == pytest.approx(1, 1e-4)
    np.testing.assert_allclose(docs.layers[:, :, 1], docs.acts)  # the recorded block
    hs = lm_acts.hidden_states(model, docs.tokens)  # the recording's shape: no recompile
    np.testing.assert_allclose(hs[1] / meta["scale"], docs.acts, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="layer"):
        lm_acts.record(model, tmp_path, n_docs=2, length=16, layer=2, text=text)


def test_auroc_and_probe_scores_against_sklearn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(3)
    y = rng.random(300) < 0.3
    s = np.stack([y + rng.normal(0, 1, 300), rng.normal(size=300),
                  np.round(rng.normal(size=300))], 1)  # ties in column 2
    got = real.auroc_columns(s, y)
    want = [roc_auc_score(y, s[:, j]) for j in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert np.isnan(real.auroc_columns(s, np.zeros(300, bool))).all()
    from sklearn.linear_model import LogisticRegression

    xs = (s - s.mean(0)) / s.std(0)
    w, b = real.logistic_fit(xs, y)
    ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=1000).fit(xs, y)
    np.testing.assert_allclose(w, ref.coef_[0], rtol=1e-4, atol=1e-6)
    assert b == pytest.approx(float(ref.intercept_[0]), rel=1e-4, abs=1e-6)
    codes = np.concatenate([y[:, None] * 2.0, rng.random((300, 5))], 1)  # latent 0 = label
    sc = real.probe_scores(codes[:150], y[:150], codes[150:], y[150:], k_probe=2)
    assert sc["auroc_best"] == pytest.approx(1.0) and sc["probe_k"] > 0.99


def _fake_summary(tc_shift: float = 0.0, seeds=3, shifts=None, copy=None):
    """Real-panel results with every method at 0.7 + noise, shifted per window by
    ``shifts`` (``{"T=..": {method: shift}}``; default: the TC by ``tc_shift`` at T=3);
    ``copy``: ``(a, b)`` makes method ``a`` an exact copy of method ``b``."""
    rng = np.random.default_rng(0)
    shifts = shifts or {"T=3": {"tc": tc_shift}}
    out = {"tasks": {t: {"positives": 0.3, "valid": 100} for t in TT.TASKS}}
    for T, sh in shifts.items():
        res = {}
        for m in ("raw_token", "raw_window", "sae", "tfa", "tc"):
            met = {}
            for t in TT.TASKS:
                for k in real.PROBE_METRICS:
                    base = 0.7 + 0.01 * rng.normal(size=seeds)
                    met[f"{t}/{k}"] = base + sh.get(m, 0.0)
            met["fvu"], met["l0"] = np.full(seeds, 0.2), np.full(seeds, 3.0)
            res[m] = met
        if copy is not None:
            res[copy[0]] = {k: v.copy() for k, v in res[copy[1]].items()}
        out[T] = res
    return out


@pytest.mark.parametrize("shift,verdict,tally", [(0.2, "yes", "win"), (-0.2, "not shown", "loss")])
def test_real_claims_and_fair_tally(shift, verdict, tally):
    info = {"source": "x", "real": real.summarise_real(_fake_summary(shift))}
    cfg = QUICK.merged({"real_seeds": 3, "real_windows": (3,)})
    claims = report_real.real_claims(cfg, info)
    # the task-count row, the backtracking pair, jaxkit's two steering rows
    assert [c.kind for c in claims] == ["paper"] * 3 + ["extension"] * 2
    assert claims[0].verdict == verdict and "Holm" in claims[0].test
    assert claims[0].measured.startswith(f"T=3: TC {5 if shift > 0 else 0} of 5")
    assert [c.verdict for c in claims[1:3]] == ["not tested"] * 2
    assert "reasoning model" in claims[1].note
    assert [c.verdict for c in claims[3:]] == ["not tested at this size"] * 2
    assert "steering needs the trained LM" in claims[-1].note
    tl = report_real.tally(info["real"]["T=3"])
    assert set(tl) == {"sae", "tfa"}  # references and TC itself are not tallied
    assert tl["sae"]["auroc_best"][tally] == len(TT.TASKS)
    md, summ = report_real.real_markdown(cfg, info)
    assert "fair tally" in md and "not tested" in md and "T=3" in summ["real_tallies"]


def test_real_task_count_is_decided_at_every_window():
    """TC wins every task at T=2 but TFA wins every task at T=5: "no" (the count is
    not reported at the window that suits the TC); a baseline that wins more than the
    TC at one window is enough for "no"."""
    cfg = QUICK.merged({"real_seeds": 3, "real_windows": (2, 5)})
    fake = _fake_summary(shifts={"T=2": {"tc": 0.2}, "T=5": {"tfa": 0.2}})
    (row,) = [c for c in report_real.real_claims(cfg, {"real": real.summarise_real(fake)})
              if c.kind == "paper" and c.claim == report_real.REAL_CLAIM]
    assert row.verdict == "no"
    assert "T=2: TC 5 of 5" in row.measured and "T=5: TC 0 of 5" in row.measured
    assert "10 (window, task) cells" in row.test
    wins = report_real.task_wins(real.summarise_real(fake), 0.01)
    assert wins["T=5"]["tfa"] == list(TT.TASKS) and wins["T=2"]["tc"] == list(TT.TASKS)
    # a margin larger than the effect: nobody wins
    assert not any(report_real.task_wins(real.summarise_real(fake), 0.5)[T][m]
                   for T in ("T=2", "T=5") for m in ("tc", "sae", "tfa"))


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("acts")
    rng = np.random.default_rng(1)
    from safetensors.numpy import save_file

    atoms = rng.normal(size=(6, 3, 8)).astype(np.float32)
    for i in range(3):  # several small files
        z = (rng.random((8, 12, 6)) < 0.2).astype(np.float32)
        a = np.einsum("nlf,ftd->nld", z, atoms[:, :1]) + 0.01 * rng.normal(size=(8, 12, 8))
        save_file({"activations": a.astype(np.float32),
                   "tokens": np.zeros((8, 12), np.uint8)}, str(d / f"shard_{i:05d}.safetensors"))
    return d


# slow: three sharded trainings (one compilation on a data x model mesh); the same path
# (jaxkit.crosscoder.train on a store, dictionary sharded, killed and resumed) is in the
# default run of test_crosscoder_train (test_kill_and_resume_matches_uninterrupted_run,
# test_resume_onto_another_mesh_equals_uninterrupted_run)
@pytest.mark.slow
def test_store_tc_kill_and_resume_on_a_sharded_mesh(store_dir, tmp_path):
    kw = dict(window=2, n_latents=8, k=1, steps=8, batch_size=8, lr=3e-3, log_every=2)
    key = jax.random.key(0)
    full = stream.train_tc_on_store(key, store_dir, checkpoint_dir=tmp_path / "a", **kw)
    assert full.config["mesh"] == {"data": len(jax.devices()) // 2, "model": 2}

    class Kill(Exception):
        pass

    def die(step, m):
        if step >= 5:
            raise Kill

    with pytest.raises(Kill):
        stream.train_tc_on_store(key, store_dir, checkpoint_dir=tmp_path / "b", on_step=die,
                                 **kw)
    resumed = stream.train_tc_on_store(key, store_dir, checkpoint_dir=tmp_path / "b", **kw)
    assert resumed.resumed_from == 4  # the checkpoint at half the steps
    for a, b in zip(jax.tree.leaves(full.params), jax.tree.leaves(resumed.params),
                    strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    docs = lm_acts.load_documents(store_dir)
    f = stream.window_fvu(full.params, jnp.asarray(real.held_out_windows(docs, 2)), 2)
    assert np.isfinite(f) and f < 1.5


@pytest.mark.slow
def test_every_baseline_trains_and_probes(store_dir):
    """compare_real end to end on the small store (every method, two seeds): finite
    probe scores, L0 per representation at the budget k T."""
    from jaxkit.tempbench import baselines as BL
    from jaxkit.tempbench.train import TrainConfig

    docs = lm_acts.load_documents(store_dir)
    docs = docs._replace(layers=np.repeat(docs.acts[:, :, None], 2, axis=2),
                         tokens=TT.encode_text((TEXT * 8)[:12 * 24], 12)[:24])
    cfg = TrainConfig(window=2, n_latents=8, k=1, steps=20, batch_size=16, lr=3e-3,
                      log_every=10, checkpoint_every=1)
    out = real.compare_real(jax.random.key(0), docs, cfg, windows=(2,), n_seeds=2,
                            test_every=2)
    assert set(out["T=2"]) == {*real.REFERENCES, *BL.ALL_METHODS}
    for m in BL.ALL_METHODS:  # the acausal crosscoder's L0 is steered, not exact
        if m != "acausal":
            np.testing.assert_allclose(out["T=2"][m]["l0"], 2.0, atol=0.6, err_msg=m)
        assert np.isfinite(out["T=2"][m]["word_interior/auroc_best"]).all(), m


@pytest.mark.slow
def test_bench_tempbench_smoke(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_tempbench.py"
    spec = importlib.util.spec_from_file_location("bench_tempbench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "b.json"
    assert mod.main(["--quick", "--no-peers", "--only", "matryoshka,tfa", "--repeats", "1",
                     "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["case"].split()[0] for r in rows] == ["matryoshka", "tfa"]
    assert all(r["jax"]["median_s"] > 0 for r in rows)


def test_pipeline_stage_reads_a_user_directory(store_dir, tmp_path, monkeypatch):
    """With ``acts_dir`` the real stage trains no LM and probes the user's shards (the
    comparison itself is stubbed here; it runs end to end in the slow test above)."""
    from jaxkit.registry import RunContext
    from jaxkit.tempbench import panel
    from jaxkit.tempbench.pipeline import train_config
    from jaxkit.tempbench.train import Trainer

    seen = {}

    def fake(key, docs, cfg, **kw):
        seen.update(n=docs.acts.shape[0], layers=docs.layers, windows=kw["windows"])
        return _fake_summary(0.1)

    monkeypatch.setattr(real, "compare_real", fake)
    monkeypatch.setattr(lm_acts, "train_lm", lambda *a, **k: pytest.fail("LM trained"))
    cfg = QUICK.merged({"acts_dir": str(store_dir), "store_steps": 0})
    ctx = RunContext(out_dir=tmp_path, config=cfg, quick=True)
    info = panel.run_real(ctx, cfg, Trainer(), train_config(cfg))
    assert seen == {"n": 24, "layers": None, "windows": cfg.real_windows}
    assert info["source"] == str(store_dir) and "lm" not in info
    md, _ = report_real.real_markdown(cfg, info)
    assert f"the user's activations in `{store_dir}`" in md


def test_task_score_and_steering_atoms():
    from types import SimpleNamespace

    from jaxkit.tempbench import steer

    tok = np.asarray([[1, 2, 1, 3, 1, 2]], np.uint8)
    y = np.asarray([[1, 0, 1, 0, 0, 0]], bool)  # next bytes: after positives 2, 3
    v = np.ones_like(y)
    s = steer.task_score(tok, y, v)
    pos = np.full(256, 1.0)
    pos[[2, 3]] += 1
    neg = np.full(256, 1.0)  # after the negatives 1, 3, 4: bytes 1, 1, 2
    neg[1] += 2
    neg[2] += 1
    np.testing.assert_allclose(s, np.log(pos / pos.sum()) - np.log(neg / neg.sum()))
    rng = np.random.default_rng(0)
    T, F, d = 3, 4, 2
    tc = SimpleNamespace(W_dec=rng.normal(size=(F, T, d)))
    np.testing.assert_allclose(steer.atom_of("tc", tc, 2, T), tc.W_dec[2], rtol=1e-6)
    sae = SimpleNamespace(W_dec=rng.normal(size=(F, 1, d)))
    a = steer.atom_of("sae", sae, 1 * F + 3, T)  # column p F + f: atom f at position p
    np.testing.assert_allclose(a[1], sae.W_dec[3, 0], rtol=1e-6)
    assert not a[[0, 2]].any()
    a = steer.atom_of("sae_kT", sae, 2, T)  # the window's last token
    np.testing.assert_allclose(a[-1], sae.W_dec[2, 0], rtol=1e-6)
    st = SimpleNamespace(W_dec=rng.normal(size=(T, F, 1, d)))
    a = steer.atom_of("stacked", st, 2 * F + 1, T)
    np.testing.assert_allclose(a[2], st.W_dec[2, 1, 0], rtol=1e-6)
    tfa = SimpleNamespace(D=rng.normal(size=(F, d)))
    np.testing.assert_allclose(steer.atom_of("tfa", tfa, F, T)[1], tfa.D[0], rtol=1e-6)
    delta = steer.steer_deltas(tc.W_dec[0], [(0, 4)], L=6, norm=2.0)
    assert delta.shape == (1, 6, d) and not delta[0, :2].any()
    assert np.linalg.norm(delta) == pytest.approx(2.0, rel=1e-5)


def test_steering_against_a_direct_forward(tiny_lm):
    """The steered task score equals a direct forward with the atom added to the last
    block's output; steer_method's numbers are selected - random of those scores."""
    from types import SimpleNamespace

    from jaxkit.tempbench import steer

    model = tiny_lm
    rng = np.random.default_rng(1)
    n, L, T, F = 2, 16, 2, 4
    tok = rng.integers(0, 256, (n, L)).astype(np.uint8)
    score = rng.normal(size=256)
    delta = rng.normal(size=(n, L, 16)).astype(np.float32)
    pos = np.asarray([5, 15])
    got = steer.steered_scores(model, 1, tok, delta, pos, np.stack([score] * n))
    from flax import nnx

    graphdef, state = nnx.split(model)

    @jax.jit
    def direct(state, tok, delta):
        m = nnx.merge(graphdef, state)
        return jax.nn.softmax(m.embed.logits(m.hidden_states(tok)[-1] + delta), -1)

    p = direct(state, jnp.asarray(tok, jnp.int32), jnp.asarray(delta))
    want = np.asarray(p, np.float64)[np.arange(n), pos] @ score
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    # one task whose label is latent 0's firing: latent 0 is selected
    params = SimpleNamespace(W_dec=rng.normal(size=(F, T, 16)).astype(np.float32))
    yf = rng.random(40) < 0.5
    codes = np.concatenate([yf[:, None] * 1.0, rng.random((40, F - 1))], 1)
    ty = np.zeros((n, L), bool)
    ty[:, ::3] = True
    out = steer.steer_method(jax.random.key(0), "tc", params, model, layer=1, scale=2.0,
                             window=T, fit_codes=codes, fit_y={"t": yf},
                             fit_v={"t": np.ones(40, bool)}, test_tokens=tok,
                             test_y={"t": ty}, test_v={"t": np.ones((n, L), bool)},
                             scores={"t": score}, norm=3.0, per_doc=2)
    where = steer._positions(~ty, T, 2)
    d0 = steer.steer_deltas(params.W_dec[0], where, L, 3.0) * 2.0
    rows, ps = np.asarray([i for i, _ in where]), np.asarray([t for _, t in where])
    sc = np.stack([score] * len(where))
    sel = (steer.steered_scores(model, 1, tok[rows], d0, ps, sc)
           - steer.steered_scores(model, 1, tok[rows], 0 * d0, ps, sc)).mean()
    assert out["t/steer_sel"] == pytest.approx(sel, rel=1e-4, abs=1e-7)
    assert out["t/steer"] == pytest.approx(out["t/steer_sel"] - out["t/steer_rand"])
