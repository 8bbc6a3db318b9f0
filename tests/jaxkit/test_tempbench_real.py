"""TempBench on real activations: the token-sequence task labels on a short text with
known answers, the activation store (recording through jaxkit.lm on a tiny random Llama,
streaming, the checks before anything runs, user labels), the probe and detection scores
against known answers and scikit-learn, splicing and steering against direct forwards,
the backtracking traces, and the claims with their negative control."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkit.crosscoder.store import ActivationStore, iter_tensors
from jaxkit.tempbench import lm_acts, probes, real, report_real, stream
from jaxkit.tempbench import text_tasks as TT
from jaxkit.tempbench.config import QUICK
from jaxkit.tempbench.results import LMLoss, RealResult, StoreMeta
from jaxkit.tempbench.train import TrainConfig
from tests.jaxkit.lm_fixtures import write_tiny_gguf

PIECES = [" The", " cat", " is", " not", " here", ",", " un", "usual", " (", "see", ' "',
          "it", '"', ")", ".", " The", " cat", " is", "\n", "No", " dogs"]
WANT = {  # ? = not knowable from the document (or the marker token itself)
    "multi_token_word": "000000010000000000000",
    "in_brackets":      "?????????1111?0000000",
    "in_quotes":        "???????????1?00000000",
    "sentence_start":   "???????????????111?11",
    "repeated_ngram":   "??0000000000000001000",
    "negation_scope":   "????1?00000000?000??1",
}


def _vocab_and_ids(pieces, extra=("Well",)):
    vocab = list(dict.fromkeys([*extra, *pieces]))
    return vocab, np.asarray([[vocab.index(p) for p in pieces]])


def _render(y, v):
    return "".join("?" if not vv else "1" if yy else "0" for yy, vv in zip(y, v, strict=True))


def test_task_labels_on_a_known_text():
    vocab, ids = _vocab_and_ids(PIECES)
    got = TT.task_labels(ids, vocab, first=np.asarray([vocab.index("Well")]))
    assert tuple(got) == TT.TASKS
    for t, want in WANT.items():
        assert _render(got[t][0][0], got[t][1][0]) == want, t
    # without the context token the first position's word continuation is unknown
    no_first = TT.task_labels(ids, vocab)
    assert not no_first["multi_token_word"][1][0, 0] and no_first["multi_token_word"][1][0, 1]


def test_task_label_errors():
    vocab, ids = _vocab_and_ids(PIECES)
    with pytest.raises(ValueError, match="tokens"):
        TT.task_labels(ids.astype(np.float32), vocab)
    with pytest.raises(ValueError, match="tokens"):
        TT.task_labels(ids + len(vocab), vocab)
    with pytest.raises(ValueError, match="ngram"):
        TT.task_labels(ids, vocab, ngram=0)
    with pytest.raises(ValueError, match="first"):
        TT.task_labels(ids, vocab, first=np.asarray([0, 1]))


def _write_store(tmp_path, n_files=3, docs=(3, 2, 4), L=10, d=4, layers=True, V=20,
                 vocab=True):
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    acts, toks = [], []
    for i in range(n_files):
        a = rng.normal(size=(docs[i], L, d)).astype(np.float32)
        t = rng.integers(0, V, (docs[i], L)).astype(np.int32)
        blob = {"activations": a, "tokens": t, "first": t[:, 0].copy()}
        if layers:
            blob["layers"] = np.repeat(a[:, :, None], 2, axis=2)
        save_file(blob, str(tmp_path / f"shard_{i:05d}.safetensors"))
        acts.append(a)
        toks.append(t)
    (tmp_path / lm_acts.MANIFEST).write_text(json.dumps({"vocab_size": V}))
    if vocab:
        (tmp_path / lm_acts.VOCAB).write_text(json.dumps([f" w{i}" for i in range(V)]))
    return np.concatenate(acts), np.concatenate(toks)


def test_streaming_a_multi_file_store(tmp_path):
    acts, toks = _write_store(tmp_path)
    pieces = list(iter_tensors(tmp_path, ("activations", "tokens"), optional=("layers",),
                               chunk=2))
    assert [p.name for p, _ in pieces] == ["shard_00000.safetensors"] * 2 + [
        "shard_00001.safetensors"] + ["shard_00002.safetensors"] * 2  # 3, 2, 4 docs by 2
    np.testing.assert_array_equal(np.concatenate([g["activations"] for _, g in pieces]), acts)
    docs = lm_acts.load_documents(tmp_path)
    np.testing.assert_array_equal(docs.acts, acts)
    np.testing.assert_array_equal(docs.tokens, toks)
    assert docs.layers.shape == (9, 10, 2, 4) and docs.first.shape == (9,)
    assert set(docs.labels) == set(TT.TASKS)
    part = lm_acts.load_documents(tmp_path, max_docs=4, with_layers=False)
    np.testing.assert_array_equal(part.acts, acts[:4])
    assert part.layers is None
    st = ActivationStore(tmp_path, batch_size=4, window=3, tensor="activations", seed=1)
    assert len(st.shards) == 3 and st.n_windows == 9 * 3  # stride = window: 3 per doc


def test_store_checks_name_the_file(tmp_path):
    from safetensors.numpy import save_file

    with pytest.raises(ValueError, match="acts_dir.*not a directory"):
        lm_acts.check_store(tmp_path / "missing")
    with pytest.raises(ValueError, match="no .safetensors"):
        lm_acts.check_store(tmp_path)
    save_file({"activations": np.zeros((2, 4, 3), np.float32)},
              str(tmp_path / "shard_00000.safetensors"))
    with pytest.raises(ValueError, match="tokens.*shard_00000"):
        lm_acts.check_store(tmp_path)
    save_file({"activations": np.zeros((2, 4, 3), np.float32),
               "tokens": np.zeros((2, 4), np.int32)}, str(tmp_path / "shard_00000.safetensors"))
    with pytest.raises(ValueError, match="vocabulary size"):
        lm_acts.check_store(tmp_path)
    (tmp_path / lm_acts.MANIFEST).write_text(json.dumps({"vocab_size": 5}))
    with pytest.raises(ValueError, match="no tasks"):
        lm_acts.check_store(tmp_path)
    # the configuration refuses the directory before anything runs
    with pytest.raises(ValueError, match="acts_dir.*no tasks"):
        QUICK.merged({"acts_dir": str(tmp_path)})
    with pytest.raises(ValueError, match="acts_dir.*not a directory"):
        QUICK.merged({"acts_dir": str(tmp_path / "nope")})


def test_user_labels_and_token_ids(tmp_path):
    """Any token ids below the vocabulary size, no vocab.json, and the user's own task
    labels (1, 0, -1 unknown)."""
    from safetensors.numpy import save_file

    lab = np.asarray([[1, 0, -1, 1], [0, 0, 1, -1]], np.int8)
    save_file({"activations": np.ones((2, 4, 3), np.float32),
               "tokens": np.asarray([[0, 999, 5, 7], [1, 2, 3, 4]], np.int64),
               "label.mine": lab}, str(tmp_path / "shard_00000.safetensors"))
    (tmp_path / lm_acts.MANIFEST).write_text(json.dumps({"vocab_size": 1000}))
    docs = lm_acts.load_documents(tmp_path)
    assert set(docs.labels) == {"mine"}
    y, v = docs.labels["mine"]
    np.testing.assert_array_equal(y, lab == 1)
    np.testing.assert_array_equal(v, lab >= 0)
    (tmp_path / lm_acts.MANIFEST).write_text(json.dumps({"vocab_size": 999}))
    with pytest.raises(ValueError, match="shard_00000.*vocabulary size"):
        lm_acts.load_documents(tmp_path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from jaxkit.lm import load

    path = write_tiny_gguf(tmp_path_factory.mktemp("lm") / "tiny.gguf")
    return path, load(path, use_cache=False)


def test_record_round_trip_and_the_command(tiny, tmp_path):
    from jaxkit.lm.record import record_activations, text_documents

    path, lm = tiny
    docs = text_documents(lm.tokenizer, "the cat is on the mat.\n\n" * 20, doc_len=8, n_docs=5)
    assert docs.shape == (5, 9)
    out = record_activations(lm, docs, [1, 0], tmp_path / "a", docs_per_shard=2, batch=2)
    assert sorted(p.name for p in out.glob("*.safetensors")) == [
        f"shard_0000{i}.safetensors" for i in range(3)]
    meta = json.loads((out / lm_acts.MANIFEST).read_text())
    assert meta["layers"] == [1, 0] and meta["layer"] == 1 and meta["doc_len"] == 8
    got = lm_acts.load_documents(out)
    want = lm.activations(docs, [0, 1])
    np.testing.assert_allclose(got.acts * meta["scale"], np.asarray(want["resid.1"])[:, 1:],
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got.layers[:, :, 1].astype(np.float64) * meta["scales"][1],
                               np.asarray(want["resid.0"])[:, 1:], rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(got.tokens, docs[:, 1:])
    np.testing.assert_array_equal(got.first, docs[:, 0])
    assert len(json.loads((out / lm_acts.VOCAB).read_text())) == lm.config.vocab_size
    with pytest.raises(ValueError, match="layers"):
        record_activations(lm, docs, [2], tmp_path / "b")
    # the command: same store, and a bad layer is one line before any work
    from typer.testing import CliRunner

    from jaxkit.lm.cli import lm_app

    (tmp_path / "t.txt").write_text("the cat is on the mat.\n\n" * 20)
    r = CliRunner().invoke(lm_app, ["record-activations", str(path), str(tmp_path / "t.txt"),
                                    "--out", str(tmp_path / "c"), "--layers", "1,0",
                                    "--doc-len", "8", "--n-docs", "5", "--docs-per-shard", "2",
                                    "--batch", "2"])
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(lm_acts.load_documents(tmp_path / "c").acts, got.acts,
                               rtol=1e-5, atol=1e-6)
    r = CliRunner().invoke(lm_app, ["record-activations", str(path), str(tmp_path / "t.txt"),
                                    "--out", str(tmp_path / "d"), "--layers", "7"])
    assert r.exit_code != 0 and "--layers" in r.output and not (tmp_path / "d").exists()


def _identity_sae(d: int):
    """A per-token SAE whose TopK-d reconstruction is exact: atoms +e_i and -e_i."""
    from jaxkit.kernels import crosscoder as cc

    eye = np.eye(d, dtype=np.float32)
    return cc.Params(W_enc=jnp.asarray(np.concatenate([eye, -eye], 1))[None],
                     b_enc=jnp.zeros(2 * d), W_dec=jnp.asarray(
                         np.concatenate([eye, -eye], 0))[:, None],
                     b_dec=jnp.zeros((1, d)), log_threshold=jnp.zeros(2 * d))


def test_splice_exact_dictionary_recovers_all_and_zero_ablation_costs(tiny):
    from jaxkit.tempbench import splice

    _, lm = tiny
    d = lm.config.d_model
    rng = np.random.default_rng(0)
    toks = rng.integers(3, lm.config.vocab_size, (3, 10))
    cfg = TrainConfig(window=2, n_latents=2 * d, k=d)
    p = _identity_sae(d)
    x = jnp.asarray(rng.normal(size=(2, 6, d)), jnp.float32)
    np.testing.assert_allclose(splice.token_reconstruction("sae", p, x, cfg), x, atol=1e-5)
    s = splice.splice_losses(lm, 1, 2.5, toks, "sae", p, cfg, start=1, batch=2)
    z = splice.splice_losses(lm, 1, 2.5, toks, "zero", None, cfg, start=1, batch=2)
    assert s.ce_spliced == pytest.approx(s.ce_clean, abs=1e-4) and s.kl < 1e-5
    assert z.ce_clean == pytest.approx(s.ce_clean, abs=1e-6)
    assert z.kl > 1e-3 and z.ce_spliced != pytest.approx(z.ce_clean, abs=1e-3)
    # the clean cross-entropy is the model's own loss on the same predictions
    mask = np.zeros(toks.shape, bool)
    mask[:, 2:-1] = True  # predictions made at positions >= 1 + start
    lp = np.asarray(jax.nn.log_softmax(np.asarray(lm.logits(toks)), -1), np.float64)
    nll = -np.take_along_axis(lp[:, :-1], toks[:, 1:, None], -1)[..., 0]
    assert s.ce_clean == pytest.approx(nll[mask[:, :-1]].mean(), rel=1e-4)
    assert splice.loss_recovered(2.0, 2.0, 5.0) == 1.0
    assert splice.loss_recovered(2.0, 5.0, 5.0) == 0.0


def test_steering_against_a_direct_forward(tiny):
    from jaxkit.tempbench import steer

    _, lm = tiny
    d = lm.config.d_model
    rng = np.random.default_rng(1)
    toks = rng.integers(3, lm.config.vocab_size, (3, 8))
    zero = np.zeros((3, 8, d), np.float32)
    pos, tgt = np.asarray([2, 5, 7]), np.asarray([4, 9, 11])
    got = steer.target_logprob(lm, 0, toks, zero, pos, tgt, batch=2)
    lp = np.asarray(jax.nn.log_softmax(lm.logits(toks), -1))
    np.testing.assert_allclose(got, lp[np.arange(3), pos, tgt], rtol=1e-4, atol=1e-5)
    delta = steer.steer_deltas(rng.normal(size=(2, d)), [(0, 3)], 8, norm=4.0)
    assert np.linalg.norm(delta) == pytest.approx(4.0, rel=1e-5)
    assert np.abs(delta[0, [0, 1, 4, 5, 6, 7]]).max() == 0
    moved = steer.target_logprob(lm, 0, toks[:1], 10 * delta, np.asarray([5]), tgt[:1])
    via = lm.logits_with(toks[:1], {0: lambda r: r + 10 * jnp.asarray(delta)})
    want = jax.nn.log_softmax(via, -1)[0, 5, tgt[0]]
    assert moved[0] == pytest.approx(float(want), abs=1e-4)
    with pytest.raises(ValueError, match="window"):
        steer.steer_deltas(np.ones((3, d)), [(0, 1)], 8, 1.0)


class _WordTokenizer:
    """Splits at spaces (a space joins the next piece), digits and punctuation."""

    def __init__(self):
        self.vocab: dict[str, int] = {}

    def encode(self, text):
        import re

        return [self.vocab.setdefault(p, len(self.vocab))
                for p in re.findall(r" ?[A-Za-z]+|\d|\s|[^\sA-Za-z\d]", text)]

    def decode(self, ids):
        inv = {i: p for p, i in self.vocab.items()}
        return "".join(inv[int(i)] for i in ids)


def test_backtracking_traces_have_exact_labels():
    from jaxkit.tempbench import backtracking as BT

    tok = _WordTokenizer()
    tr = BT.make_traces(tok, 3, n_docs=12, doc_len=40, p_error=0.5)
    assert tr.docs.shape == (12, 41) and tr.backtrack.shape == (12, 40)
    flat, bt, site = tr.docs[:, 1:].ravel(), tr.backtrack.ravel(), tr.steer_site.ravel()
    dot = tok.vocab["."]
    assert bt.sum() >= 1 and site.sum() >= 1 and not (bt & site).any()
    for i in np.flatnonzero(bt):  # a wrong step's "." followed by " Wait"
        assert flat[i] == dot and (i + 1 >= len(flat) or flat[i + 1] == tr.wait_id)
    for i in np.flatnonzero(site):  # a correct first step's "." not followed by " Wait"
        assert flat[i] == dot and (i + 1 >= len(flat) or flat[i + 1] != tr.wait_id)
    n_wait = int((flat == tr.wait_id).sum())
    assert abs(n_wait - bt.sum()) <= 1  # every " Wait" follows a marked position
    assert "Wait," in tr.text and "Question:" in tr.text
    again = BT.make_traces(tok, 3, n_docs=12, doc_len=40)
    np.testing.assert_array_equal(again.docs, tr.docs)


def test_detection_at_a_fixed_false_positive_rate():
    rng = np.random.default_rng(0)
    y = np.zeros(2000, bool)
    y[::10] = True
    s = y * 3.0 + rng.normal(size=2000)
    det, fpr = probes.detection_at_fpr(s[:1000], y[:1000], s[1000:], y[1000:], 0.05)
    # threshold ~ the 95% normal quantile 1.645: detection ~ P(N(3, 1) > 1.645) = 0.91
    assert 0.8 < det <= 1 and 0.02 < fpr < 0.09
    det0, _ = probes.detection_at_fpr(rng.normal(size=1000), y[:1000], rng.normal(size=1000),
                                      y[1000:], 0.05)
    assert det0 < 0.2  # an uninformative score detects at about the false-positive rate
    from jaxkit.tempbench import backtracking as BT

    codes = {p: np.concatenate([(y[sl] * 2.0)[:, None], rng.random((1000, 4))], 1)
             for p, sl in (("fit", slice(0, 1000)), ("test", slice(1000, 2000)))}
    labels = {p: (y[sl], np.zeros(1000, bool)) for p, sl in (("fit", slice(0, 1000)),
                                                               ("test", slice(1000, 2000)))}
    out = BT.detect_and_steer(jax.random.key(0), "tc", None, codes, labels, window=2, fpr=0.05)
    assert out.detect == 1.0 and out.detect_fpr == 0.0
    assert np.isnan(out.detect_hard)  # no step ends marked: nothing to tell apart
    assert out.as_dict().keys() == {"detect", "detect_fpr", "detect_hard"}  # no model
    # step ends: a latent on every step end detects all of them among all tokens but
    # cannot tell wrong from right; latent 1 knows which are wrong
    ends = np.zeros(2000, bool)
    ends[::5] = True
    wrong = ends & (np.arange(2000) % 10 == 0)
    codes = {p: np.stack([ends[sl] * 1.0, wrong[sl] * 2.0 + ends[sl]], 1)
             for p, sl in (("fit", slice(0, 1000)), ("test", slice(1000, 2000)))}
    labels = {p: (wrong[sl], (ends & ~wrong)[sl]) for p, sl in (("fit", slice(0, 1000)),
                                                                ("test", slice(1000, 2000)))}
    out = BT.detect_and_steer(jax.random.key(0), "tc", None, codes, labels, window=2, fpr=0.05)
    assert out.detect == 1.0 and out.detect_hard == 1.0
    codes = {p: c[:, :1] for p, c in codes.items()}  # only the step-end latent
    out = BT.detect_and_steer(jax.random.key(0), "tc", None, codes, labels, window=2, fpr=0.05)
    assert out.detect_hard == 0.0  # threshold above every step end: nothing told apart


def test_auroc_and_probe_scores_against_sklearn():
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(3)
    y = rng.random(300) < 0.3
    s = np.stack([y + rng.normal(0, 1, 300), rng.normal(size=300),
                  np.round(rng.normal(size=300))], 1)  # ties in column 2
    np.testing.assert_allclose(real.auroc_columns(s, y),
                               [roc_auc_score(y, s[:, j]) for j in range(3)], rtol=1e-12)
    assert np.isnan(real.auroc_columns(s, np.zeros(300, bool))).all()
    xs = (s - s.mean(0)) / s.std(0)
    w, b = real.logistic_fit(xs, y)
    ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=1000).fit(xs, y)
    np.testing.assert_allclose(w, ref.coef_[0], rtol=1e-4, atol=1e-6)
    assert b == pytest.approx(float(ref.intercept_[0]), rel=1e-4, abs=1e-6)
    codes = np.concatenate([y[:, None] * 2.0, rng.random((300, 5))], 1)  # latent 0 = label
    sc = real.probe_scores(codes[:150], y[:150], codes[150:], y[150:], k_probe=2)
    assert sc.auroc_best == pytest.approx(1.0) and sc.probe_k > 0.99
    assert list(sc.as_dict()) == list(real.PROBE_METRICS)


def _fake_summary(tc_shift: float = 0.0, seeds=3, shifts=None, copy=None, bt=True):
    """Real-panel results with every method at 0.7 + noise, shifted per window by
    ``shifts`` (``{"T=..": {method: shift}}``; default: the TC by ``tc_shift`` at T=3);
    ``copy``: ``(a, b)`` makes method ``a`` an exact copy of method ``b``."""
    rng = np.random.default_rng(0)
    shifts = shifts or {"T=3": {"tc": tc_shift}}
    out = {"tasks": {t: {"positives": 0.3, "valid": 100} for t in TT.TASKS}, "lm": {}}
    for T, sh in shifts.items():
        res = {}
        for m in ("raw_token", "raw_window", "sae", "tfa", "tc"):
            keys = [f"{t}/{k}" for t in TT.TASKS for k in real.PROBE_METRICS]
            if m not in real.REFERENCES and bt:
                keys += ["bt/detect", "bt/detect_fpr", "bt/steer_sel", "bt/steer_rand",
                         "bt/steer", "loss_recovered", "ce_spliced", "kl"]
            met = {k: 0.7 + 0.01 * rng.normal(size=seeds) + sh.get(m, 0.0) for k in keys}
            met["fvu"], met["l0"] = np.full(seeds, 0.2), np.full(seeds, 3.0)
            res[m] = met
        if copy is not None:
            res[copy[0]] = {k: v.copy() for k, v in res[copy[1]].items()}
        out[T] = res
        out["lm"][T] = LMLoss(ce_clean=3.0, ce_zero=9.0)
    return out


def _info(panel) -> RealResult:
    """The real stages' result around a :class:`RealPanel` (no store metadata)."""
    return RealResult(source="x", tokens=0, real=panel)


@pytest.mark.parametrize("shift,verdict,tally", [(0.2, "yes", "win"), (-0.2, "not shown", "loss")])
def test_real_claims_and_fair_tally(shift, verdict, tally):
    info = RealResult(source="x", tokens=72, real=real.summarise_real(_fake_summary(shift)),
                      meta=StoreMeta(model="m", layer=3, layers=[3], scale=2.0, n_docs=9,
                                     doc_len=8, tokens=72, provenance="p"))
    cfg = QUICK.merged({"real.seeds": 3, "real.windows": (3,)})
    claims = report_real.real_claims(cfg, info)
    # the task-count row, the backtracking pair, loss recovered and the steering control
    # (extension), the raw-probe precondition (setup)
    assert [c.kind for c in claims] == ["paper"] * 3 + ["extension"] * 2 + ["setup"]
    assert claims[0].verdict == verdict and "Holm" in claims[0].test
    assert claims[0].measured.startswith(f"T=3: TC {6 if shift > 0 else 0} of 6")
    want_bt = "yes" if shift > 0 else "no"
    assert [c.verdict for c in claims[1:4]] == [want_bt] * 3
    assert "stand-in" in claims[1].note.lower() and "margin 0.01" in claims[1].test
    tl = report_real.tally(info.real.windows[3].methods, TT.TASKS)
    assert set(tl) == {"sae", "tfa"}  # references and TC itself are not tallied
    assert tl["sae"]["auroc_best"][tally] == len(TT.TASKS)
    md, summ = report_real.real_markdown(cfg, info)
    assert "fair tally" in md and "loss recovered" in md and "T=3" in summ["real_tallies"]
    assert "backtracking" in md


def test_negative_control_a_tc_that_is_the_sae_wins_no_real_claim():
    """Negative control: the TC's numbers are the SAE's (no effect by construction): no
    real-panel paper row may say "yes", and the backtracking pair must say "no" (TC - SAE
    = 0 is not above the margin fixed in the configuration)."""
    fake = _fake_summary(copy=("tc", "sae"))
    cfg = QUICK.merged({"real.seeds": 3, "real.windows": (3,)})
    claims = report_real.real_claims(cfg, _info(real.summarise_real(fake)))
    paper = [c for c in claims if c.kind == "paper"]
    assert [c.verdict for c in paper] == [paper[0].verdict, "no", "no"]
    assert paper[0].verdict in ("no", "not shown")


def test_real_task_count_is_decided_at_every_window():
    """TC wins every task at T=2 but TFA wins every task at T=5: "no" (the count is
    not reported at the window that suits the TC)."""
    cfg = QUICK.merged({"real.seeds": 3, "real.windows": (2, 5)})
    fake = _fake_summary(shifts={"T=2": {"tc": 0.2}, "T=5": {"tfa": 0.2}})
    (row,) = [c for c in report_real.real_claims(cfg, _info(real.summarise_real(fake)))
              if c.kind == "paper" and c.claim == report_real.REAL_CLAIM]
    assert row.verdict == "no"
    assert "T=2: TC 6 of 6" in row.measured and "T=5: TC 0 of 6" in row.measured
    assert "12 (window, task) cells" in row.test
    wins = report_real.task_wins(real.summarise_real(fake), 0.01)
    assert wins["T=5"]["tfa"] == list(TT.TASKS) and wins["T=2"]["tc"] == list(TT.TASKS)
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
                   "tokens": rng.integers(0, 30, (8, 12)).astype(np.int32)},
                  str(d / f"shard_{i:05d}.safetensors"))
    (d / lm_acts.VOCAB).write_text(json.dumps([" a", "b", ".", " (", ")", " not", ","] * 4
                                              + [" x", "y"]))
    return d


# slow: three sharded trainings (one compilation on a data x model mesh); the same path
# is in the default run of test_crosscoder_train
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
    assert resumed.resumed_from == 4
    for a, b in zip(jax.tree.leaves(full.params), jax.tree.leaves(resumed.params),
                    strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_every_baseline_trains_and_probes(store_dir):
    """compare_real end to end on the small store (every method, two seeds): finite
    probe scores, L0 per representation at the budget k T."""
    from jaxkit.tempbench import baselines as BL

    docs = lm_acts.load_documents(store_dir)
    docs = docs._replace(layers=np.repeat(docs.acts[:, :, None], 2, axis=2).astype(np.float16))
    cfg = TrainConfig(window=2, n_latents=8, k=1, steps=20, batch_size=16, lr=3e-3,
                      log_every=10, checkpoint_every=1)
    out = real.compare_real(jax.random.key(0), docs, cfg, windows=(2,), n_seeds=2,
                            test_every=2)
    rows = out.windows[2].methods
    assert set(rows) == {*real.REFERENCES, *BL.ALL_METHODS}
    for m in BL.ALL_METHODS:  # the acausal crosscoder's L0 is steered, not exact
        if m != "acausal":
            np.testing.assert_allclose(rows[m]["l0"].seeds, 2.0, atol=0.6, err_msg=m)


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
    """With ``acts_dir`` the real stage loads no model and probes the user's shards (the
    comparison itself is stubbed here; it runs end to end in the slow test above)."""
    from jaxkit.registry import RunContext
    from jaxkit.tempbench import panel
    from jaxkit.tempbench.pipeline import train_config
    from jaxkit.tempbench.train import Trainer

    seen = {}

    def fake(key, docs, cfg, **kw):
        seen.update(n=docs.acts.shape[0], layers=docs.layers, windows=kw["windows"],
                    lmc=kw["lmc"], traces=kw["traces"])
        return real.summarise_real(_fake_summary(0.1))

    monkeypatch.setattr(real, "compare_real", fake)
    monkeypatch.setattr(panel, "load_model", lambda *a: pytest.fail("model loaded"))
    cfg = QUICK.merged({"acts_dir": str(store_dir), "store_steps": 2, "panel": "real",
                        "real.latents": 8, "real.k": 1, "batch_size": 8})
    ctx = RunContext(out_dir=tmp_path, config=cfg, quick=True)
    info = panel.run_real(ctx, cfg, Trainer(), train_config(cfg))
    assert seen == {"n": 24, "layers": None, "windows": cfg.real.windows, "lmc": None,
                    "traces": None}
    assert info.source == str(store_dir) and info.tokens > 0
    assert info.store.steps == 2 and info.store.shards == 3 and np.isfinite(info.store.fvu)
    plain = info.as_dict()
    assert plain["real"]["T=3"]["tc"]["fvu"]["seeds"] == [0.2, 0.2, 0.2]
    assert plain["store"]["shards"] == 3 and plain["meta"]["model"] is None
    md, _ = report_real.real_markdown(cfg, info)
    assert f"the user's activations in `{store_dir}`" in md
    assert "streamed from the 3 store shards" in md


# slow (about 20 s of CPU, mostly compilation): the pieces (recording, splicing, steering,
# probes, claims) have their own tests in the default run
@pytest.mark.slow
def test_real_panel_end_to_end_on_a_tiny_model(tiny, tmp_path):
    """The real panel through the pipeline on the tiny random Llama (its tokenizer splits
    " Wait", so no backtracking): recorded store with two blocks, TC and SAE probed on the
    tasks and spliced into the model, claims and report; then a bad acts_dir fails when
    the configuration is built."""
    from jaxkit.registry import RunContext
    from jaxkit.tempbench import pipeline as P

    path, _ = tiny
    text = tmp_path / "t.txt"
    text.write_text("The cat (a small one) is not here. \"It is,\" she said, \"gone.\"\n\n" * 40)
    cfg = QUICK.merged({"panel": "real", "lm_model": str(path), "corpus": str(text),
                        "lm_layers": (1, 0), "act_layer": 1, "doc_len": 16, "real.docs": 32,
                        "real.docs_per_shard": 16, "real.windows": (2,), "real.latents": 16,
                        "real.k": 1, "real.steps": 40, "log_every": 20, "batch_size": 32,
                        "splice_docs": 2, "probe_docs": 8})
    r = P.run(RunContext(out_dir=tmp_path / "run", config=cfg, quick=True))
    res = r.metrics["real"]["real"]["T=2"]
    assert set(res) == {"raw_token", "raw_window", "sae", "tc"}
    for m in ("sae", "tc"):
        assert np.isfinite(res[m]["ce_spliced"]["mean"]) and res[m]["kl"]["mean"] >= 0
        assert "bt/detect" not in res[m]
    lm = r.metrics["real"]["real"]["lm"]["T=2"]
    assert lm["ce_zero"] != lm["ce_clean"]
    meta = json.loads((tmp_path / "run" / "acts" / lm_acts.MANIFEST).read_text())
    assert meta["layers"] == [1, 0] and meta["n_docs"] == 32
    paper = [c for c in r.claims if c.kind == "paper"]
    assert [c.verdict for c in paper[:2]] == ["not tested"] * 2  # panel=real
    assert [c.verdict for c in paper[3:]] == ["not tested"] * 2  # no " Wait" token
    assert "loss recovered" in r.markdown and "multi_token_word" in r.markdown
