"""Drug-like ActFlow (issue 63): the strict molecule verifier on known accepted and
rejected molecules, the MOSES reader (skipped without the molsets wheel), the drug-like
domain's split, the two new baselines, and the claims (every baseline on the independent
measures; negative control) at tiny size."""

from dataclasses import replace

import jax
import numpy as np
import pytest

from jaxkit.actflow import discrete as D
from jaxkit.actflow import molecules as Mo
from jaxkit.actflow import moses
from jaxkit.actflow import verify_mol as V
from jaxkit.actflow.results import DiscreteRound, DomainRun, MethodRun, Pretraining

needs_moses = pytest.mark.skipif(not moses.available(), reason="the MOSES data (molsets "
                                 "wheel) are not installed: pip install --no-deps "
                                 "molsets==0.3.1")

ACCEPTED = ["CC(C)Cc1ccc(cc1)C(C)C(=O)O",  # ibuprofen
            "CCCS(=O)c1ccc2[nH]c(=NC(=O)OC)[nH]c2c1",  # albendazole oxide (MOSES train)
            "COc1ccc(NC(=O)c2ccco2)cc1"]
#: (SMILES, a rule it must break); every one is a drug-sized molecule otherwise
REJECTED = [("O=C(NCc1ccccc1)c1ccc([CH2])cc1", "radical"),
            ("C[N+](C)(C)Cc1ccc(cc1)C(=O)NC", "net formal charge +1"),
            ("C1#CCCC1c1ccc(cc1)C(=O)NC", "triple bond in a 5-ring"),
            ("CC1=CC1c1ccc(cc1)C(=O)NC", "double bond in a 3-ring"),
            ("C1=CC=C=CC1c1ccc(cc1)C(=O)NC", "cumulated double bonds in a small ring"),
            ("O=C(NC)c1ccc(cc1)C1CCCCCCCC1", "ring of 9 atoms > 7"),
            ("CCC(=C=CNC(C)CC)NC(=O)OC",  # an acyclic allene that a QUICK run produced
             "cumulated double bonds (allene, ketene, heterocumulene)"),
            ("S=C1SC(=Cc2ccccc2)C(=O)N1", "catalogue ene_rhod_A(235)"),  # PAINS
            ("O=Cc1ccc(cc1)C(=O)NCC", "catalogue aldehyde"),  # Brenk
            ("CC12CC3(C)CC(C)(C1)C1(C)C4CC5C(C2)C3C41C5", "SA 7.19 > 4.5"),
            ("CC(C)(C)OC(=O)N1CCC(CC1)C(=O)N[Si](C)(C)C", "elements Si"),
            ("c1ccccc1.CCO", "more than one fragment"),
            ("C1CC", "not parsable / sanitisable by RDKit")]


def test_strict_verifier_accepts_drug_like_and_names_each_broken_rule():
    for smi in ACCEPTED:
        assert V.check_strict(smi) == [] and V.is_valid(smi)
    for smi, rule in REJECTED:
        assert rule in V.check_strict(smi), smi
        assert not V.is_valid(smi)
    # the nitro group's zwitterionic notation is neutral (only Brenk flags it)
    assert V.check_strict("O=[N+]([O-])c1ccc(cc1)C(=O)NCC1CCCO1") == [
        "catalogue nitro_group"]
    assert V.check_strict("CC(C)Cc1ccc(cc1)C(C)C(=O)O", V.StrictRules(catalogs=())) == []
    assert V.check_strict("CC(C)Cc1ccc(cc1)C(C)C(=O)O",
                          V.StrictRules(min_qed=0.99))[0].startswith("QED 0.82 <")
    assert V.check_strict("") == ["empty"]
    assert 1.0 <= V.sa_score(__import__("rdkit.Chem").Chem.MolFromSmiles("c1ccccc1")) < 1.5


def test_the_old_verifier_accepts_what_the_strict_one_rejects():
    """The issue's findings: radicals, charged species and triple bonds in small rings
    passed the small-molecule verifier; the strict one refuses them."""
    for smi, _ in REJECTED[:3]:
        assert Mo.check_molecule(smi) == [] and not V.is_valid(smi)


@needs_moses
def test_mcf_table_and_moses_reader():
    table = moses.mcf_smarts()
    assert len(table) == 22 and table[0][0] == "MCF1"
    assert "MCF MCF1" in V.check_strict("C=C(C#N)c1ccc(cc1)C(=O)NC")
    assert "MCF MCF7" in V.check_strict("O=Cc1ccc(cc1)C(=O)NCC")
    a = moses.read_smiles("test", 5, seed=3)
    assert a == moses.read_smiles("test", 5, seed=3) and len(set(a)) == 5
    assert a != moses.read_smiles("test", 5, seed=4)
    assert all(Mo.canonical_smiles(s) for s in a)
    with pytest.raises(ValueError, match="`split`"):
        moses.read_smiles("valid")
    with pytest.raises(ValueError, match="`n`"):
        moses.read_smiles("test", 0)
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "jaxkit" / "data" / "MOSES.md").read_text()
    for name in ("test", "mcf"):  # the provenance file names the checksums read
        assert moses.sha256(name) in doc


def test_without_molsets_the_reader_returns_none(monkeypatch):
    monkeypatch.setattr(moses, "_files", lambda: None)
    assert not moses.available()
    assert moses.read_smiles("train", 3) is None and moses.mcf_smarts() is None
    from jaxkit.actflow.druglike import druglike_domain

    assert druglike_domain(n_data=8, n_ref=8) is None


@needs_moses
def test_druglike_split_is_the_configured_logp_cut():
    from jaxkit.actflow.druglike import druglike_domain

    dom = druglike_domain(n_data=24, n_ref=12, max_logp_data=2.5)
    assert dom.data.shape[1] == 40 and 6 <= dom.reference.shape[0] <= 12
    assert dom.check(dom.data).all() and not dom.outside(dom.data).any()
    assert dom.check(dom.reference).all() and dom.outside(dom.reference).all()
    assert "logP <= 2.5" in dom.description and "PAINS+BRENK" in dom.description
    pre = set(dom.decode(dom.data))
    assert not pre & set(dom.decode(dom.reference))  # the held-out set is disjoint


L, VOC = 6, 3
TINY = D.DiscreteSettings(hidden=32, depth=1, pretrain_steps=20, batch=16, rounds=2,
                          budget=16, adapt_steps=5, sample_steps=3, n_eval=16)


def _toy():
    rng = np.random.default_rng(0)
    data = rng.integers(0, VOC, (2000, L))
    data = np.unique(data[np.all(data[:, 1:] != data[:, :-1], axis=1)], axis=0)[:40]
    return D.TokenDomain("toy", L, VOC, data, lambda t: np.all(
        np.asarray(t)[:, 1:] != np.asarray(t)[:, :-1], axis=1), lambda t: ["".join(map(
            str, r)) for r in np.asarray(t)], novelty=1.0, reference=data[:8])


def test_new_baselines_keep_what_their_rule_says():
    """``tempered+filter`` keeps exactly its valid samples; ``actflow-noexplore`` at most
    its valid novel ones; both report the valid-novel-unique yield."""
    pre = D.pretrain(_toy(), TINY, jax.random.key(0))
    for m in ("tempered+filter", "actflow-noexplore"):
        h = D.run_method(pre, m, jax.random.key(1))[0].history
        for row in h[1:]:
            assert row.n_kept_round <= row.n_valid_round
            if m == "tempered+filter":
                assert row.n_kept_round == row.n_valid_round
            else:
                assert row.n_kept_round <= row.n_novel_round
        assert all(0.0 <= r.metrics["vnu_yield"] <= r.metrics["validity"] for r in h)


def _fake(shift: dict, *, same=False, n=4, rng_seed=0,
          domains=("peptides-discrete", "druglike", "proteins")):
    rng = np.random.default_rng(rng_seed)
    keys = ("knn_coverage", "novel_circles", "outside_circles", "vnu_yield")
    out = {}
    for d in domains:
        base = {k: (60.0 if "circles" in k else 0.5) * (1 + 0.03 * rng.normal(size=n))
                for k in keys}
        draws = {m: {k: base[k] + (0 if same else 0.02 * base[k].mean() * rng.normal(size=n))
                     + shift.get(m, 0.0) * (100 if "circles" in k else 1) for k in keys}
                 for m in D.METHODS}
        runs = {m: MethodRun(history=[_row(0, {k: float(np.mean(v)) + 0.001 * i
                                               for k, v in draws[m].items()})], seconds=0.0)
                for i, m in enumerate(D.METHODS)}
        out[d] = [DomainRun(measure="novel_circles", draws=draws, runs=runs, description=d,
                            pretrain=Pretraining(loss=0.0, seconds=0.0, n_data=1,
                                                 resumed_from=0))]
    return out


def _row(r, metrics, kept=None):
    """A :class:`DiscreteRound` of round ``r`` with these evaluation metrics."""
    return DiscreteRound(round=r, method="m", metrics=metrics, n_kept_round=kept,
                         updated=bool(kept), restart=None)


def test_claims_every_baseline_and_negative_control():
    from jaxkit.actflow import report
    from jaxkit.actflow.config import QUICK

    def rows(res):
        cl = report.claims(QUICK, res)
        paper = [c for c in cl if c.kind == "paper" and not c.verdict.startswith("not")]
        every = [c for c in cl if c.kind == "extension" and "every baseline" in c.claim]
        return paper, every

    paper, every = rows(_fake({}, same=True))  # nothing changed the model: all "no"
    assert len(paper) == 6 and all(c.verdict == "no" for c in paper)
    assert len(every) == 6 and all(c.verdict in ("no", "not shown") for c in every)
    assert any("drug-like" in c.claim for c in paper)
    for r in range(4):  # exchangeable methods: never "yes"
        p, e = rows(_fake({}, rng_seed=r))
        assert all(c.verdict != "yes" for c in p + e)
    p, e = rows(_fake({"actflow": 0.2}))  # positive control
    assert all(c.verdict == "yes" for c in p + e)
    # ActFlow ahead of the synthetic baselines but not of tempered sampling + filter
    p, e = rows(_fake({"actflow": 0.2, "tempered+filter": 0.3}))
    assert all(c.verdict != "yes" and "tempered+filter" in c.claim for c in e)


def test_druglike_not_tested_without_moses(monkeypatch):
    from jaxkit.actflow import report
    from jaxkit.actflow.config import QUICK

    monkeypatch.setattr(moses, "_files", lambda: None)
    res = _fake({}, domains=("peptides-discrete",))
    rows = [c for c in report.paper_claims(QUICK, res) if "drug-like" in c.claim]
    assert len(rows) == 2 and all(c.verdict == "not tested" and "molsets" in c.note
                                  for c in rows)


def test_actflow_keeping_nothing_warns_and_says_no():
    """A domain where ActFlow's keep rule never fires (the issue's 40 short SMILES) gets a
    warning and an extension row "no"; a domain where it kept samples gets neither."""
    from jaxkit.actflow import report
    from jaxkit.actflow.config import QUICK

    res = _fake({}, domains=("peptides-discrete", "proteins"))
    for d, kept in (("peptides-discrete", 0.0), ("proteins", 3.0)):
        for r in res[d]:
            for m in D.METHODS:
                r.runs[m] = replace(r.runs[m], history=[_row(0, {})] + [
                    _row(i, {}, kept) for i in (1, 2)])
    assert report.kept_nothing(res) == ["peptides-discrete"]
    rows = [c for c in report.claims(QUICK, res) if "keep rule accepts" in c.claim]
    assert len(rows) == 1 and rows[0].verdict == "no" and rows[0].kind == "extension"
    assert rows[0].claim.startswith("peptides-discrete")


def test_druglike_config_fields():
    from jaxkit.actflow.config import DISCRETE, DOMAINS, FULL, QUICK, Config

    assert "druglike" in DISCRETE and "druglike" in FULL.domains and "druglike" in DOMAINS
    assert QUICK.druglike_n_data < FULL.druglike_n_data  # the split itself: the same cut
    assert QUICK.druglike_max_logp == FULL.druglike_max_logp
    with pytest.raises(ValueError, match="`druglike_n_data`"):
        Config(druglike_n_data=2)
    with pytest.raises(ValueError, match="`druglike_novelty`"):
        Config(druglike_novelty=1.5)
    t = Config(druglike_arch="transformer")
    assert t.discrete("druglike").arch == "transformer" and t.discrete("proteins").arch == "mlp"


def test_user_files_fasta_smiles_and_extra_columns(tmp_path):
    """FASTA records, a SMILES list (names after the SMILES, comments) and a CSV with an
    extra ``name`` column are read; malformed files are refused naming file and line."""
    from jaxkit.actflow.user import read_sequences
    from jaxkit.io import DataError

    def write(name, text):
        (tmp_path / name).write_text(text)
        return tmp_path / name

    assert read_sequences(write("a.fasta", ">p1 x\nKKLL\nAA\n>p2\nAAKK\n")) == (
        ["KKLLAA", "AAKK"], [1, 4])
    assert read_sequences(write("a.smi", "SMILES\nCCO ethanol\n# note\n\nc1ccccc1\n")) == (
        ["CCO", "c1ccccc1"], [2, 5])
    assert read_sequences(write("a.csv", "name,sequence\np1,KKLL\np2,AAKK\n"))[0] == [
        "KKLL", "AAKK"]
    for name, text, msg in (("b.fasta", "KKLL\n>p\n", "line 1: sequence before"),
                            ("c.fasta", ">p\n>q\nKK\n", "line 1: FASTA record without"),
                            ("d.fasta", ">p\nKK1L\n", "line 2: characters '1'"),
                            ("e.smi", "# only a comment\n", "no SMILES"),
                            ("f.csv", "sequence,name\nKKLL,a\nAAKK\n", "line 3")):
        with pytest.raises(DataError, match=msg):
            read_sequences(write(name, text))


@needs_moses
@pytest.mark.slow
def test_pipeline_druglike_tiny(tmp_path):
    """The drug-like domain through the pipeline at tiny size: its section, six methods,
    its two paper rows tested (Holm over the one paper domain run), the SMILES file."""
    from jaxkit.actflow import pipeline
    from jaxkit.actflow.config import QUICK
    from jaxkit.registry import RunContext

    cfg = QUICK.override(["domains=druglike", "druglike_n_data=40", "druglike_n_ref=16",
                          "dfm.hidden=16", "dfm.depth=1", "dfm.pretrain_steps=10",
                          "dfm.batch=16", "dfm.rounds=1", "dfm.budget=16",
                          "dfm.adapt_steps=5", "dfm.n_eval=16", "dfm.sample_steps=3",
                          "n_draws=2"])
    res = pipeline.run(RunContext(out_dir=tmp_path, config=cfg, quick=True))
    assert "### druglike" in res.markdown and set(res.metrics["druglike"]) == set(D.METHODS)
    rows = [c for c in res.claims if c.kind == "paper" and "drug-like" in c.claim]
    assert len(rows) == 2 and all(c.verdict in ("yes", "no", "not shown") for c in rows)
    assert (tmp_path / "actflow_druglike_samples.csv").read_text().startswith(
        "seed,method,valid,smiles")


def test_transformer_denoiser_shapes_and_training():
    """The transformer denoiser maps (L,) tokens and a time to (L, V) logits, refuses a
    width that the heads do not divide, and pre-training through the one training step
    lowers its loss on the toy domain."""
    from jaxkit.actflow.transformer import TransformerDenoiser

    m = TransformerDenoiser(L, VOC, 16, 1, heads=2, key=jax.random.key(0))
    assert m(0.3, np.full(L, VOC)).shape == (L, VOC)
    with pytest.raises(ValueError, match="`hidden`"):
        TransformerDenoiser(L, VOC, 10, 1, heads=4, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`arch`"):
        D.DiscreteSettings(arch="rnn")
    dom = _toy()
    short = D.pretrain(dom, TINY.override(["arch=transformer", "pretrain_steps=5",
                                           "adapt_steps=5"]), jax.random.key(0))
    long = D.pretrain(dom, TINY.override(["arch=transformer", "pretrain_steps=200",
                                          "adapt_steps=5"]), jax.random.key(0))
    assert long.loss < short.loss
