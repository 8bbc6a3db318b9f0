"""Kill-and-resume tests for every pipeline that trains (issue 58, section 1).

Each test trains a pipeline's training stage at tiny size into a temporary folder, stops
it right after a checkpoint with :func:`jaxkit.training.interrupt_after` (a simulated
kill: nothing after the checkpoint runs), runs the same call again, and asserts that the
result equals an uninterrupted run's exactly. ``test_kill_resume_cli.py`` kills a whole
``jaxkit run`` with a real ``SIGKILL`` and checks ``run.json``.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxkit import training


def _same(a, b):
    """Bit-identical pytrees (arrays, floats, lists and dicts)."""
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _killed_then_resumed(run, at: int, folder):
    """``run(folder)`` stopped after the checkpoint of step ``at``, then ``run(folder)``
    again; returns the resumed result and what :func:`training.record_resumes` saw."""
    with training.interrupt_after(at) as hook, pytest.raises(training.Interrupted):
        run(folder)
    assert hook["fired"]
    seen: list = []
    with training.record_resumes(seen):
        out = run(folder)
    return out, seen


def test_hooks_and_initial_step_refuse_bad_values():
    with pytest.raises(ValueError, match="`initial_step` must be in"), \
            training.interrupt_after(1):
        training.fit(jax.random.key(0), {}, lambda k, s, b: (s, {}), lambda i: None,
                     steps=3, initial_step=4)
    with pytest.raises(ValueError, match="`step` must be >= 1"), training.interrupt_after(0):
        pass


# -- AIRA-Compose: stage 2's budget sweep through one folder ---------------------------

def test_compose_budget_sweep_resumes_to_the_same_losses(tmp_path):
    """Killed after chunk 5 of 6 with budgets at chunks 1, 2 and 6: the checkpoints of
    the early budgets are gone (keep=2), and the resumed sweep must still read the
    losses at 1 and 2 chunks, not those of a state trained past them (the reported
    AIRA-Compose case: every budget came back as the last one's loss)."""
    from jaxkit.compose import Arch, TrainSettings, load_corpus, train_candidates

    arch = Arch("AA", width=8, heads=2, d_state=2, context=8)
    s = TrainSettings(steps=12, batch=2, lr=3e-3, warmup=1, chunk=2, checkpoint_every=1,
                      eval_at=(2, 4), n_val=4)
    corpus = load_corpus(max_bytes=20_000)

    def run(folder):
        return train_candidates(jax.random.key(0), arch, ["AD", "DA"], corpus, s,
                                checkpoint_dir=folder)

    ref = run(tmp_path / "ref")
    out, seen = _killed_then_resumed(run, 5, tmp_path / "run")
    np.testing.assert_array_equal(out.val_bpb, ref.val_bpb)
    _same(out.params, ref.params)
    assert [h["step"] for h in out.history] == [h["step"] for h in ref.history]
    _same([h["loss"] for h in out.history], [h["loss"] for h in ref.history])
    assert [r["resumed_from"] for r in seen] == [5]  # only the last budget restored


# -- TempBench: the synthetic panel's TopK dictionaries and the acausal crosscoder -----

def _tempbench_data():
    return jax.random.normal(jax.random.key(3), (6, 8, 4))


@pytest.mark.parametrize("every", [2, 3])
def test_tempbench_topk_resumes_to_the_same_parameters_and_fvu(tmp_path, every):
    """Killed after the first checkpoint (chunk ``every`` of 4), and after the last one
    before anything was returned (the resumed run had no FVU history)."""
    from jaxkit.tempbench.train import TrainConfig, train_topk

    cfg = TrainConfig(window=2, n_latents=8, k=2, steps=8, batch_size=4, log_every=2,
                      checkpoint_every=every)
    seqs = _tempbench_data()

    def run(folder):
        return train_topk(jax.random.key(0), seqs, window=2, position=None, k=2, cfg=cfg,
                          checkpoint_dir=folder)

    ref = run(tmp_path / "ref")
    assert ref[1].shape == (4,)
    for at, name in ((every * 2, "mid"), (8, "end")):  # steps (2 per chunk)
        out, seen = _killed_then_resumed(run, at, tmp_path / name)
        _same(out, ref)
        assert [r["resumed_from"] for r in seen] == [at]


def test_tempbench_topk_restarts_cleanly_after_a_configuration_change(tmp_path):
    """Checkpoints of another fingerprint (the pipeline's configuration, seed or code
    changed) are removed and the training starts afresh: it used to start from the
    abstract restore target and fail with "ShapeDtypeStruct is not a valid JAX type"."""
    from jaxkit.tempbench.train import TrainConfig, train_topk

    cfg = TrainConfig(window=2, n_latents=8, k=2, steps=8, batch_size=4, log_every=2,
                      checkpoint_every=1)
    seqs = _tempbench_data()

    def run(folder):
        return train_topk(jax.random.key(0), seqs, window=2, position=None, k=2, cfg=cfg,
                          checkpoint_dir=folder)

    ref = run(tmp_path / "ref")
    with training.use_fingerprint("before"), training.interrupt_after(4), \
            pytest.raises(training.Interrupted):
        run(tmp_path / "run")
    seen: list = []
    with training.use_fingerprint("after"), training.record_resumes(seen), \
            pytest.warns(UserWarning, match="another configuration"):
        out = run(tmp_path / "run")
    _same(out, ref)
    assert [r["resumed_from"] for r in seen] == [0] and "removed" in seen[0]["restarted"]


def test_tempbench_acausal_resumes_to_the_same_parameters_and_fvu(tmp_path):
    from jaxkit.tempbench.train import TrainConfig, train_acausal

    cfg = TrainConfig(window=2, n_latents=8, k=2, steps=8, batch_size=4, log_every=2,
                      checkpoint_every=1)
    seqs = _tempbench_data()

    def run(folder):
        return train_acausal(jax.random.key(0), seqs, window=2, target_l0=2.0, cfg=cfg,
                             checkpoint_dir=folder)

    ref = run(tmp_path / "ref")
    for at, name in ((2, "mid"), (4, "end")):
        out, seen = _killed_then_resumed(run, at, tmp_path / name)
        _same(out, ref)
        assert [r["resumed_from"] for r in seen] == [at]


# -- universal-circuits: the classifiers and the transcoder -----------------------------

def test_universal_circuits_classifier_and_transcoder_resume(tmp_path):
    """A classifier (4 chunks, a checkpoint every chunk) and a transcoder (3 chunks)
    killed mid-training and after their last checkpoint: parameters and the logged
    history equal the uninterrupted runs'."""
    from jaxkit.crosscoder.store import SiteStore
    from jaxkit.universal_circuits import data as D
    from jaxkit.universal_circuits.models import Arch, Classifier, train_classifier
    from jaxkit.universal_circuits.transcoder import record, train_uc

    d = D.load_digits(8, 5)
    clf = Classifier(Arch("mlp", 8, widths=(6, 5)))

    def run_clf(folder):
        return train_classifier(jax.random.key(1), clf, d.x_train[:64], d.y_train[:64],
                                steps=8, batch=8, lr=1e-2, chunk=2, checkpoint_dir=folder,
                                checkpoint_every=1)

    ref = run_clf(tmp_path / "clf-ref")
    assert len(ref[1]) == 4
    for at, name in ((2, "clf-mid"), (4, "clf-end")):
        out, seen = _killed_then_resumed(run_clf, at, tmp_path / name)
        _same(out, ref)
        assert [r["resumed_from"] for r in seen] == [at]

    ps = [clf.init(jax.random.key(0))]
    store = SiteStore(record(tmp_path / "store", ["mlp"], [clf], ps, d.x_train[:32],
                             d.y_train[:32]), batch_size=8, seed=0)

    def run_uc(folder):
        return train_uc(jax.random.key(7), store, [clf], ps, n_latents=8, k=2, steps=6,
                        lr=1e-2, fidelity_coef=1.0, chunk=2, checkpoint_dir=folder,
                        checkpoint_every=1)

    spec, p_ref, h_ref = run_uc(tmp_path / "uc-ref")
    for at, name in ((1, "uc-mid"), (3, "uc-end")):
        (spec2, p, h), seen = _killed_then_resumed(run_uc, at, tmp_path / name)
        assert spec2 == spec
        _same((p, h), (p_ref, h_ref))
        assert [r["resumed_from"] for r in seen] == [at]


# -- misaligned: the stacked property models -------------------------------------------

def test_misaligned_models_resume_to_the_same_predictions(tmp_path):
    from jaxkit.misaligned import models as Mo

    rng = np.random.default_rng(0)
    arrays = {"fp": (rng.random((24, 16)) < 0.3).astype(np.float32)}
    y = arrays["fp"] @ rng.normal(size=16)
    mask = rng.random((2, 24)) < 0.7
    ts = Mo.TrainSettings(steps=8, batch_size=4, log_every=2, checkpoint_every=1,
                          mlp_width=8, mlp_depth=1)

    def run(folder):
        return Mo.train(jax.random.key(2), "mlp", arrays, y, mask, ts, checkpoint_dir=folder)

    ref = run(tmp_path / "ref")
    assert len(ref[1]) == 4
    for at, name in ((2, "mid"), (4, "end")):
        out, seen = _killed_then_resumed(run, at, tmp_path / name)
        _same(out, ref)
        assert [r["resumed_from"] for r in seen] == [at]


# -- CausalTab: the amortised structure model ------------------------------------------

def test_causaltab_model_resumes_to_the_same_parameters_and_history(tmp_path):
    from jaxkit.causaltab.model import ModelConfig
    from jaxkit.causaltab.train import TrainSettings, narrow_prior, train_model

    cfg = ModelConfig(dim=8, heads=2, layers=1, ffn=2, max_vars=6)
    st = TrainSettings(steps=6, batch=8, lr=3e-3, d_max=5, n_max=8, chunk=2,
                       checkpoint_every=1, warmup=1)
    prior = narrow_prior(5, 8)

    def run(folder):
        params, hist, _ = train_model(jax.random.key(3), cfg, st, end=prior,
                                      checkpoint_dir=folder)
        return params, [{k: v for k, v in h.items() if k != "seconds"} for h in hist]

    ref = run(tmp_path / "ref")
    assert [h["step"] for h in ref[1]] == [2, 4, 6]
    for at, name in ((1, "mid"), (3, "end")):
        out, seen = _killed_then_resumed(run, at, tmp_path / name)
        _same(out, ref)
        assert [r["resumed_from"] for r in seen] == [at]


# -- AMGenC: the denoiser --------------------------------------------------------------

def test_amgenc_denoiser_resumes_to_the_same_model_and_losses(tmp_path):
    import equinox as eqx

    from jaxkit.amgenc import data as D
    from jaxkit.amgenc import train as T
    from jaxkit.amgenc.config import QUICK

    cfg = QUICK.override(["n_train=3", "n_test=1", "relax_steps=40", "min_steps=10",
                          "hidden=8", "layers=1", "k_nbr=6", "train_steps=6", "batch=3",
                          "checkpoint_every=2"])
    data = D.make_data(cfg, np.random.default_rng(0))

    def run(folder):
        r = T.fit_denoiser(cfg, data, jax.random.key(4), checkpoint_dir=folder)
        return eqx.filter(r.model, eqx.is_array), r.losses

    ref = run(tmp_path / "ref")
    assert ref[1].shape == (6,)
    for at, name in ((2, "mid"), (6, "end")):
        out, seen = _killed_then_resumed(run, at, tmp_path / name)
        _same(out, ref)
        assert [r["resumed_from"] for r in seen] == [at]


# -- ActFlow: pre-training and rounds, continuous and discrete --------------------------

def _arrays(tree):
    import equinox as eqx

    return eqx.filter(tree, eqx.is_array)


def test_actflow_pretraining_and_rounds_resume(tmp_path):
    from jaxkit.actflow import domains, loop
    from jaxkit.actflow.config import ActFlowConfig

    cfg = ActFlowConfig(hidden=16, depth=2, n_data=64, pretrain_steps=40, batch=16,
                        rounds=3, budget=16, adapt_steps=10, n_eval=16, sample_steps=4,
                        steer_steps=1)
    rings = domains.rings()
    p = loop.pretrain(rings, cfg, jax.random.key(10))  # the reference; its compiled kernels

    def pre(folder):
        q = loop.pretrain(rings, cfg, jax.random.key(10), checkpoint_dir=folder,
                          checkpoint_every=1, kernels=p.kernels)
        return _arrays(q.model), q.loss, q.data

    ref = (_arrays(p.model), p.loss, p.data)
    for at, name in ((2, "pre-mid"), (4, "pre-end")):
        out, seen = _killed_then_resumed(pre, at, tmp_path / name)
        _same(out, ref)
        assert [r["resumed_from"] for r in seen] == [at]

    def rounds(folder):
        r, state = loop.run_method(rings, p.model, p.data, "actflow", cfg, jax.random.key(11),
                                   checkpoint_dir=folder, kernels=p.kernels)
        return repr(r.history), r.samples, r.valid, _arrays(state.params)

    ref = rounds(tmp_path / "run-ref")
    for at, name in ((1, "run-mid"), (3, "run-end")):
        out, seen = _killed_then_resumed(rounds, at, tmp_path / name)
        assert out[0] == ref[0]  # the per-round history (repr: NaN == NaN)
        _same(out[1:], ref[1:])
        assert [r["resumed_from"] for r in seen] == [at]


def test_actflow_discrete_pretraining_and_rounds_resume(tmp_path):
    from jaxkit.actflow import discrete as D

    cfg = D.DiscreteSettings(hidden=16, depth=1, pretrain_steps=60, batch=8, rounds=2,
                             budget=8, adapt_steps=10, sample_steps=2, n_eval=8)
    seqs = np.array([s for s in np.ndindex(3, 3, 3, 3) if s[0] == 0], np.int32)
    dom = D.TokenDomain("toy", 4, 3, seqs, lambda t: np.ones(len(t), bool),
                        lambda t: [str(r) for r in t], 1.0)

    p = D.pretrain(dom, cfg, jax.random.key(0))  # the reference; its compiled kernels

    def pre(folder):
        q = D.pretrain(dom, cfg, jax.random.key(0), checkpoint_dir=folder,
                       kernels=p.kernels)
        return _arrays(q.model), q.loss

    ref = (_arrays(p.model), p.loss)
    for at, name in ((5, "pre-mid"), (6, "pre-end")):
        out, seen = _killed_then_resumed(pre, at, tmp_path / name)
        _same(out, ref)
        assert [r["resumed_from"] for r in seen] == [at]

    def rounds(folder):
        r, params = D.run_method(p, "actflow", jax.random.key(1), checkpoint_dir=folder)
        return repr(r.history), _arrays(params)

    ref = rounds(tmp_path / "run-ref")
    for at, name in ((1, "run-mid"), (2, "run-end")):
        out, seen = _killed_then_resumed(rounds, at, tmp_path / name)
        assert out[0] == ref[0]
        _same(out[1], ref[1])
        assert [r["resumed_from"] for r in seen] == [at]
