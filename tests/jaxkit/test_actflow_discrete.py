"""Discrete ActFlow: the RDKit and protein verifiers on known cases, the molecule
metrics on hand-made cases, the discrete loop (keep rule, kill and resume), and the
user-data domain (entry point, errors naming file and line)."""

import math

import equinox as eqx
import jax
import numpy as np
import pytest

from jaxkit.actflow import discrete as D
from jaxkit.actflow import molecules as Mo
from jaxkit.actflow import proteins as P
from jaxkit.actflow.metrics import pairwise_distances, vendi_score
from jaxkit.io import DataError

TINY = D.DiscreteSettings(hidden=32, depth=1, pretrain_steps=40, batch=16, rounds=2,
                          budget=16, adapt_steps=10, sample_steps=3, n_eval=16)
L, V = 6, 3


def _valid(tokens):  # no two equal neighbours, no padding token needed
    t = np.asarray(tokens)
    return np.all(t[:, 1:] != t[:, :-1], axis=1)


def _toy():
    seqs = np.array([s for s in np.ndindex(*(V,) * L) if s[0] == 0], np.int32)
    seqs = seqs[_valid(seqs)]
    return D.TokenDomain("toy", L, V, seqs, _valid, lambda t: [str(r) for r in t], 1.0,
                         outside=lambda t: np.asarray(t)[:, 0] != 0)


@pytest.fixture(scope="module")
def toy_pre():
    dom = _toy()
    return dom, D.pretrain(dom, TINY, jax.random.key(0))


@pytest.fixture(scope="module")
def toy_actflow(toy_pre):
    """ActFlow's rounds on the toy domain (key 1), uninterrupted: the keep-rule test's run
    and the kill-and-resume test's reference."""
    return D.run_method(toy_pre[1], "actflow", jax.random.key(1))  # (MethodRun, params)


def test_rdkit_verifier_on_known_molecules():
    ok = ["CC(=O)Oc1ccccc1C(=O)O",  # aspirin
          "Cn1cnc2c1c(=O)n(C)c(=O)n2C",  # caffeine
          "c1ccccc1O"]  # phenol
    for s in ok:
        assert Mo.check_molecule(s) == [], s
    assert any("heavy atoms" in r for r in Mo.check_molecule("CCO"))
    assert Mo.check_molecule("CC(=O)Cl") == ["forbidden acyl halide"]
    assert "forbidden peroxide" in Mo.check_molecule("CCOOCC")
    assert "forbidden azo/diazo" in Mo.check_molecule("c1ccccc1N=Nc1ccccc1")
    assert "more than one fragment" in Mo.check_molecule("CCCC.CCCC")
    assert Mo.check_molecule("C1CC") == ["not parsable / sanitisable by RDKit"]
    assert Mo.check_molecule("C(C)(C)(C)(C)C") == ["not parsable / sanitisable by RDKit"]
    assert any(r.startswith("MW") for r in Mo.check_molecule("C" * 30))  # MW 422
    assert any(r.startswith("logP") for r in Mo.check_molecule("CCCCCCCCCCCCCCCC"))
    assert Mo.check_molecule("") == ["empty"]


def test_molecule_metrics_on_hand_made_cases():
    a = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]], np.float32)
    d = np.asarray(pairwise_distances(a, a, "tanimoto"))
    np.testing.assert_allclose(d[0, 1], 1 - 1 / 3, rtol=1e-6)
    assert d[0, 0] == 0 and d[2, 3] == 0 and d[0, 2] == 1
    np.testing.assert_allclose(Mo.internal_diversity(a[:2]), 2 / 3, rtol=1e-6)
    assert math.isnan(Mo.internal_diversity(a[:1]))
    # identical fingerprints: Vendi 1; two disjoint ones: 2
    assert float(vendi_score(a[[0, 0]], None, metric="tanimoto")) == pytest.approx(1.0)
    b = np.array([[1, 1, 0, 0], [0, 0, 1, 1]], np.float32)
    assert float(vendi_score(b, None, metric="tanimoto")) == pytest.approx(2.0, rel=1e-5)
    assert Mo.scaffold_count(["c1ccccc1", "Cc1ccccc1", "C1CCCCC1", "CCO", "CCCO"]) == 3
    fp = Mo.fingerprints(["CCO", "", "C1CC"])
    assert fp[0].sum() > 0 and fp[1].sum() == 0 and fp[2].sum() == 0


def test_protein_domain_uses_the_soluble_verifier():
    from jaxkit.actflow.peptide_verifier import SolubleWindows, check_soluble

    dom = P.protein_domain(max_moment_data=0.15)
    assert dom.novelty == 19.0  # 0.4 of the padded length 48
    seqs = dom.decode(np.concatenate([dom.data, dom.reference]))
    assert all(check_soluble(s) == [] for s in seqs)
    assert dom.check(dom.data).all() and dom.check(dom.reference).all()
    assert not dom.outside(dom.data).any() and dom.outside(dom.reference).all()
    strict = P.protein_domain(SolubleWindows(max_instability=20.0), max_moment_data=0.15)
    assert len(strict.data) < len(dom.data)  # the windows reach the data
    assert not dom.outside(np.full((1, 48), dom.vocab - 1)).any()  # empty decoded sequence


def test_discrete_loop_keep_rule_and_feedback(toy_pre, toy_actflow):
    dom, pre = toy_pre
    assert np.isfinite(pre.loss)
    res, _ = toy_actflow
    for h in res.history[1:]:
        assert h.n_kept_round <= h.n_novel_round <= h.n_valid_round <= TINY.budget
        assert 0.05 <= h.restart <= 0.95
        assert abs(h.restart - TINY.restart) <= TINY.remask_step * h.round + 1e-6
    assert res.history[0].n_valid_round is None and "n_valid_round" not in \
        res.history[0].as_dict() and "n_valid_round" in res.history[1].as_dict()
    base, base_params = D.run_method(pre, "pretrained", jax.random.key(1))
    assert all(h.n_kept_round == 0 and not h.updated for h in base.history[1:])
    assert all(h.restart is None for h in base.history)
    # the pre-trained model does not change: its rounds differ only by the eval key
    for a, b in zip(jax.tree.leaves(base_params),
                    jax.tree.leaves(eqx.filter(pre.model, eqx.is_array)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_discrete_round_killed_resumes_exactly(toy_pre, toy_actflow, tmp_path):
    _, pre = toy_pre
    full, full_params = toy_actflow  # the same run (key 1), uninterrupted

    class Killed(Exception):
        pass

    def killing_track(it, desc):
        for r in it:
            if r == 1:
                raise Killed
            yield r

    with pytest.raises(Killed):
        D.run_method(pre, "actflow", jax.random.key(1), checkpoint_dir=tmp_path / "ck",
                     track=killing_track)
    resumed, params = D.run_method(pre, "actflow", jax.random.key(1),
                                   checkpoint_dir=tmp_path / "ck")
    assert resumed.resumed_from == 1
    assert repr(resumed.history) == repr(full.history)  # repr: NaN == NaN
    for a, b in zip(jax.tree.leaves(full_params), jax.tree.leaves(params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="`checkpoint_dir`"):
        D.run_method(pre, "actflow", jax.random.key(4), checkpoint_dir=tmp_path / "ck")


def test_user_domain_entry_point_and_errors(tmp_path, monkeypatch):
    from jaxkit.actflow.user import load_verifier, user_domain

    (tmp_path / "myrules.py").write_text(
        "def ok(seqs):\n    return [s.count('A') <= 2 for s in seqs]\n"
        "def bad(seqs):\n    return [True]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    f = tmp_path / "seqs.csv"
    f.write_text("id,sequence\n1,ABBA\n2,BAB\n3,CAB\n")
    dom = user_domain(f, "myrules:ok", novelty=1)
    assert dom.vocab == 4 and dom.length == 4 and dom.decode(dom.data) == ["ABBA", "BAB", "CAB"]
    np.testing.assert_array_equal(dom.check(dom.data), [True, True, True])
    with pytest.raises(ValueError, match="myrules:bad"):
        user_domain(f, "myrules:bad").check(dom.data)
    with pytest.raises(ValueError, match="nosuchmod:ok"):
        load_verifier("nosuchmod:ok")
    with pytest.raises(ValueError, match="module:function"):
        load_verifier("myrules.ok")
    f.write_text("id,sequence\n1,ABBA\n2,\n")
    with pytest.raises(DataError, match=r"seqs.csv, line 3, column 'sequence'"):
        user_domain(f, "myrules:ok")
    f.write_text("id,seq\n1,ABBA\n")
    with pytest.raises(DataError, match="no column 'sequence'"):
        user_domain(f, "myrules:ok")
    with pytest.raises(DataError, match="no such file"):
        user_domain(tmp_path / "missing.csv", "myrules:ok")


def test_peptide_token_domain_split():
    from jaxkit.actflow import peptides

    dom = peptides.peptide_token_domain(max_charge_data=3.0)
    assert dom.novelty == 8.0  # 0.4 of the padded length 20
    assert dom.check(dom.data).all() and dom.check(dom.reference).all()
    assert not dom.outside(dom.data).any() and dom.outside(dom.reference).all()


def test_selfies_decode_to_rdkit_canonical_smiles():
    import selfies as sf
    from rdkit import Chem

    aspirin = "CC(=O)Oc1ccccc1C(=O)O"
    two_ways = [sf.encoder(aspirin), sf.encoder("OC(=O)c1ccccc1OC(C)=O"), ""]
    out = Mo.selfies_to_smiles(two_ways)
    assert out[0] == out[1] == Chem.MolToSmiles(Chem.MolFromSmiles(aspirin))
    assert out[2] == ""
    assert Mo.canonical_smiles(out[0]) == out[0]  # canonical: a fixed point
    assert Mo.canonical_smiles("C1CC") == "" and Mo.canonical_smiles("") == ""
    assert Mo.check_molecule(out[0]) == []


def _fake(n_seeds, outside, discrete):
    from jaxkit.actflow.results import DomainRun, MethodRun, Pretraining

    runs = {m: MethodRun(history=[], seconds=0.0, decoded=["AK", "KK"],
                         decoded_valid=[True, False])
            for m in D.METHODS}
    pre = Pretraining(loss=0.0, seconds=0.0, n_data=2, resumed_from=0)
    return [DomainRun(measure="novel_circles", runs=runs, pretrain=pre,
                      draws={m: {"outside": np.array(outside[m]) + s} for m in D.METHODS},
                      description="toy" if discrete else None)
            for s in range(n_seeds)]


def test_ablation_claim_and_sample_files(tmp_path):
    from jaxkit.actflow import report

    vals = {m: [0.1, 0.12, 0.11] for m in D.METHODS}
    hi = dict(vals, actflow=[0.30, 0.32, 0.31])
    c = report.ablation_claim(_fake(1, hi, True), _fake(1, vals, False))
    assert c.verdict == "yes" and c.measured.startswith("0.200")
    c = report.ablation_claim(_fake(1, vals, True), _fake(1, hi, False))
    assert c.verdict == "no"
    noisy = dict(vals, actflow=[0.0, 0.5, 0.2])
    assert report.ablation_claim(_fake(1, noisy, True), _fake(1, noisy, False)).verdict \
        == "not shown"
    paths = report.write_samples({"peptides-discrete": _fake(2, vals, True),
                                  "rings": _fake(1, vals, False)}, tmp_path)
    assert [p.name for p in paths] == ["actflow_peptides-discrete_samples.csv"]
    lines = paths[0].read_text().splitlines()
    assert lines[0] == "seed,method,valid,sequence" and lines[1] == "0,pretrained,1,AK"
    assert len(lines) == 1 + 2 * len(D.METHODS) * 2


@pytest.mark.slow
def test_molecule_domain_decodes_to_canonical_smiles():
    from rdkit import Chem

    dom = Mo.molecule_domain()
    smi = dom.decode(dom.data[:64])
    assert all(Chem.MolFromSmiles(s) is not None and Mo.canonical_smiles(s) == s for s in smi)
    assert dom.check(dom.data[:64]).all() and not dom.outside(dom.data[:64]).any()
    assert dom.outside(dom.reference[:32]).all()


def test_relaxed_peptides_outside_matches_host_charge():
    """The ablation's shared measure: the relaxed domain's traceable 'outside' (net charge
    of the decoded one-hot sample above the pre-training range) equals the host rule the
    discrete domain uses."""
    import jax.numpy as jnp

    from jaxkit.actflow import peptides

    dom = peptides.peptide_domain(max_charge_data=3.0)
    t = np.random.default_rng(0).integers(0, peptides.VOCAB, (200, 20))
    x = jnp.asarray(np.eye(peptides.VOCAB, dtype=np.float32)[t].reshape(200, -1))
    got = np.asarray(jax.jit(dom.outside)(x))
    want = np.array([peptides.net_charge(s) > 3.0 for s in peptides.decode(t)])
    np.testing.assert_array_equal(got, want)
    assert 0 < want.sum() < len(want)
