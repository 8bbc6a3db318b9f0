"""Peptide and protein descriptors and verifiers (jaxkit.actflow.seqprops,
jaxkit.actflow.peptide_verifier) on known sequences; against Biopython's ProtParam
where Biopython is installed (skipped otherwise)."""

import math

import numpy as np
import pytest

from jaxkit.actflow import peptide_verifier as V
from jaxkit.actflow import seqprops as S

MAGAININ2 = "GIGKFLHSAKKFGKAFVGEIMNS"
MELITTIN = "GIGAVLKVLTTGLPALISWIKRKRQQ"  # C-terminal amide in nature
LL37 = "LLGDFFRKSKEKIGKEFKRIVQRIKDFLRNLVPRTES"
KR12 = "KRIVQRIKDFLR"  # LL-37 residues 18-29
UBIQUITIN = "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG"
INSULIN_A = "GIVEQCCTSICSLYQLENYCN"
INSULIN_B = "FVNQHLCGSHLVEALYLVCGERGFFYTPKT"


def test_net_charge_of_known_peptides():
    # the charges quoted for these peptides: magainin 2 +3, melittin (amide) +6, LL-37 +6
    assert round(S.net_charge(MAGAININ2)) == 3
    assert S.net_charge(MELITTIN, amidated=True) == pytest.approx(6.0, abs=0.05)
    assert S.net_charge(MELITTIN) == pytest.approx(5.0, abs=0.05)  # free C-terminus
    assert S.net_charge(LL37) == pytest.approx(6.0, abs=0.05)
    assert S.net_charge(LL37, pka="Lehninger") == pytest.approx(6.0, abs=0.05)
    # Henderson-Hasselbalch by hand (EMBOSS): K x4, H, E, free termini
    hand = (4 / (1 + 10 ** (7 - 10.8)) + 1 / (1 + 10 ** (7 - 6.5)) + 1 / (1 + 10 ** (7 - 8.6))
            - 1 / (1 + 10 ** (4.1 - 7)) - 1 / (1 + 10 ** (3.6 - 7)))
    assert S.net_charge(MAGAININ2) == pytest.approx(hand, rel=1e-12)
    # far below every pKa everything is protonated: +1 per K, R, H and the N-terminus
    assert S.net_charge("KRHDEG", ph=-20.0) == pytest.approx(4.0)
    assert S.net_charge("KRHDEG", ph=40.0) == pytest.approx(-3.0)  # D, E, C-terminus
    w, c = S.charge_terms(7.0, "EMBOSS")
    assert c + sum(w[a] for a in LL37) == pytest.approx(S.net_charge(LL37), rel=1e-12)
    with pytest.raises(ValueError, match="`pka`"):
        S.net_charge(LL37, pka="nope")
    with pytest.raises(ValueError, match="`seq`.*non-canonical"):
        S.net_charge("GIGKXL")
    with pytest.raises(ValueError, match="`seq`"):
        S.gravy("")


def test_hydrophobic_moment_closed_forms():
    th = np.deg2rad(100.0)
    closed = 1.06 * abs(math.sin(9 * th / 2) / math.sin(th / 2)) / 9  # nine leucines
    assert S.hydrophobic_moment("L" * 9) == pytest.approx(closed, rel=1e-9)
    assert S.hydrophobic_moment("L" * 18) == pytest.approx(0.0, abs=1e-12)  # 18 x 100 = 5 turns
    helix = "".join("L" if (i * 100) % 360 < 180 else "K" for i in range(36))
    assert S.hydrophobic_moment(helix) > 0.8  # an ideal amphipathic helix
    two = abs(S.EISENBERG["K"] + S.EISENBERG["L"] * np.exp(1j * th)) / 2
    assert S.hydrophobic_moment("KL") == pytest.approx(two, rel=1e-12)
    assert S.hydrophobic_moment("GG" + helix[:18], window=18) == pytest.approx(
        S.hydrophobic_moment(helix[:18]), rel=1e-12)
    assert S.hydrophobic_moment(helix, window=100) == S.hydrophobic_moment(helix)


def test_instability_gravy_and_aggregation_by_hand():
    # II = 10/L * sum of DIWV over the dipeptides: A-C 44.94, C-A 1.0
    assert S.instability_index("ACA") == pytest.approx(10 / 3 * (44.94 + 1.0))
    assert len(S.DIWV) == 20 and all(len(r) == 20 for r in S.DIWV.values())
    # spot checks of the 400-entry table against the published values
    assert S.DIWV["W"]["A"] == -14.03 and S.DIWV["R"]["W"] == 58.28
    assert S.DIWV["Y"]["R"] == -15.91 and S.DIWV["P"]["E"] == 18.38
    assert S.gravy("IR") == pytest.approx((4.5 - 4.5) / 2)
    assert S.gravy("AC") == pytest.approx((1.8 + 2.5) / 2)
    assert S.aggregation_share("K" * 12) == 0.0
    assert S.aggregation_share("I" * 12) == 1.0
    assert S.aggregation_share("IIIIPIIII") == 0.0  # a proline breaks the runs below 5
    prof = S.aggrescan_profile("IIIIIKKKKK", window=3)
    assert prof[0] == pytest.approx(1.822) and prof[-1] == pytest.approx(-0.931)
    assert prof[5] == pytest.approx((1.822 - 2 * 0.931) / 3)
    # values Biopython 1.88's ProtParam gives (instability index, GRAVY)
    for seq, ii, gr in ((UBIQUITIN, 36.055, -0.4895), (MAGAININ2, -0.104, 0.0826),
                        (MELITTIN, 44.731, 0.2731), (INSULIN_B, 9.847, 0.2200)):
        assert S.instability_index(seq) == pytest.approx(ii, abs=1e-3)
        assert S.gravy(seq) == pytest.approx(gr, abs=1e-4)


def test_against_biopython_protparam(monkeypatch):
    """The typed tables and formulas against Biopython (``pip download --no-deps
    biopython``; only for this check, no code taken from it)."""
    pp = pytest.importorskip("Bio.SeqUtils.ProtParam")
    from Bio.SeqUtils.ProtParamData import DIWV, kd

    for a in S.CANONICAL:
        assert S.KYTE_DOOLITTLE[a] == kd[a]
        for b in S.CANONICAL:  # Biopython has F-Y as 33.601, the paper 33.60
            assert S.DIWV[a][b] == pytest.approx(DIWV[a][b], abs=0.0011), (a, b)
    # Henderson-Hasselbalch with Biopython's own pKa set (its N-terminal pKa depends on
    # the first residue only for A, M, S, P, T, V, E: none of these sequences)
    bp = S.PKa("Biopython", 7.5, 3.55, dict(K=10.0, R=12.0, H=5.98),
               dict(D=4.05, E=4.45, C=9.0, Y=10.0))
    monkeypatch.setitem(S.PKA_SETS, "Biopython", bp)
    for seq in (MAGAININ2, LL37, KR12, INSULIN_A, "GIGKFLHSAKKFGKAFVGEIMNS"):
        a = pp.ProteinAnalysis(seq)
        assert S.net_charge(seq, 7.0, "Biopython") == pytest.approx(a.charge_at_pH(7.0),
                                                                    abs=1e-9)
        assert S.instability_index(seq) == pytest.approx(a.instability_index(), abs=0.01)
        assert S.gravy(seq) == pytest.approx(a.gravy(), abs=1e-9)


def test_amp_like_verifier_on_known_peptides():
    assert V.check_amp(KR12) == []  # LL-37's antimicrobial core, +4
    long = V.AMPWindows(length=(8, 40))
    assert V.check_amp(MAGAININ2, long) == [] and V.check_amp(LL37, long) == []
    assert V.check_amp(MAGAININ2) == ["length 23 outside [8, 20]"]
    assert V.check_amp(MELITTIN, long) == ["instability index 44.7 > 40"]
    # aurein 1.2 is neutral at pH 7 with free termini
    assert V.check_amp("GLFDIIKKIAESF") == ["net charge at pH 7 -0.02 outside [1, 10]"]
    tm = "LLVLLAVLLGALLIVLALFL"  # a transmembrane-like stretch: every window but length
    broken = V.check_amp(tm)
    assert [r.split(" ")[0] for r in broken] == ["net", "hydrophobic", "GRAVY", "aggregation"]
    assert V.check_amp("GIGKFLDPAKKFGKAF")[-1] == "forbidden motif DP"
    assert V.check_amp("GIGKFLXSAKKF") == ["non-canonical residues X"]
    assert V.amp_like([KR12, MAGAININ2, tm]) == [True, False, False]
    with pytest.raises(ValueError, match="`charge`"):
        V.AMPWindows(charge=(3.0, 1.0))


def test_soluble_protein_verifier_on_known_proteins():
    wide = V.SolubleWindows(length=(20, 80))
    assert V.check_soluble(UBIQUITIN, wide) == []  # II 36.1, GRAVY -0.49
    assert V.check_soluble(UBIQUITIN) == ["length 76 outside [24, 48]"]
    assert V.check_soluble(LL37) == []
    assert V.check_soluble(INSULIN_B) == ["GRAVY +0.22 outside [-2, 0]",
                                          "aggregation hot-spot share 0.60 > 0.5"]
    assert V.check_soluble("TRSSRAGLQFPVGRVHRLLRKTRSSRAG")[0].startswith("instability index")
    assert V.check_soluble("A" * 30)[-1].startswith("one residue is 100%")
    assert V.soluble_like([LL37, INSULIN_B]) == [True, False]


def test_verifiers_split_the_shipped_classes():
    """The AMP-like verifier accepts a larger share of the shipped AMPs than of the
    transmembrane and UniProt negatives of the same lengths."""
    from jaxkit.actflow.peptides import load_peptides

    d = load_peptides()
    share = {}
    for cls in ("AMP", "TM", "UniProt"):
        seqs = [s for s in set(d["sequence"][d["cls"] == cls]) if 8 <= len(s) <= 20]
        share[cls] = np.mean(V.amp_like(seqs))
    assert share["AMP"] > 2 * share["UniProt"] and share["AMP"] > 5 * share["TM"]


def test_config_windows_reach_the_verifiers():
    from jaxkit.actflow.config import FULL, QUICK, Config

    assert QUICK.amp_windows() == FULL.amp_windows() == V.AMPWindows()
    assert QUICK.soluble_windows() == V.SolubleWindows()
    cfg = Config().override(["amp.charge=2,9", "pka_set=Lehninger", "soluble.gravy=-1,0.5"])
    assert cfg.amp_windows().charge == (2.0, 9.0) and cfg.amp_windows().pka == "Lehninger"
    assert cfg.soluble_windows().gravy == (-1.0, 0.5)
    for bad, field in (("amp.charge=3,1", "amp.charge"), ("amp.length=0,20", "amp.length"),
                       ("seq_novelty_share=1.5", "seq_novelty_share"),
                       ("soluble.max_share=2", "soluble.max_share"),
                       ("user_novelty_share=0", "user_novelty_share")):
        with pytest.raises(ValueError, match=f"`{field}`"):
            Config().override([bad])


def test_fasta_user_file_with_the_amp_verifier(tmp_path):
    from jaxkit.actflow.user import user_domain

    fa = tmp_path / "amps.fasta"
    fa.write_text(f">kr12\n{KR12}\n>magainin2 two lines\n{MAGAININ2[:10]}\n{MAGAININ2[10:]}\n"
                  ">tm\nLLVLLAVLLGALLIVLALFL\n")
    dom = user_domain(fa, "jaxkit.actflow.peptide_verifier:amp_like")
    assert dom.decode(dom.data) == [KR12, MAGAININ2, "LLVLLAVLLGALLIVLALFL"]
    assert dom.check(dom.data).tolist() == [True, False, False]  # magainin 2: 23 > 20
    assert dom.novelty == 4.0
    scaled = user_domain(fa, "jaxkit.actflow.peptide_verifier:soluble_like", novelty_share=0.3)
    assert scaled.novelty == 7.0  # 0.3 of the longest record, 23
    assert scaled.check(scaled.data).tolist() == [False, False, False]  # all < 24 residues


def test_protein_domain_tiny_comparison():
    """The protein domain through the comparison at tiny size: every method's final draws
    on the held-out k-NN coverage and the valid-novel-unique yield."""
    import jax

    from jaxkit.actflow import discrete as D
    from jaxkit.actflow.compare import compare_discrete
    from jaxkit.actflow.config import Config

    cfg = Config(domains=("proteins",), n_draws=2).override([
        "dfm.hidden=16", "dfm.depth=1", "dfm.pretrain_steps=10", "dfm.batch=16", "dfm.rounds=1",
        "dfm.budget=16", "dfm.adapt_steps=5", "dfm.n_eval=16", "dfm.sample_steps=3"])
    keys = dict(zip(("pretrain", "rounds", "draws"), jax.random.split(jax.random.key(0), 3),
                    strict=True))
    shared = {}
    res = compare_discrete(cfg, "proteins", keys, shared=shared)
    assert "soluble-protein-like" in res.description and "Hamming > 19" in res.description
    assert res.discrete and res.data is None and set(res.draws) == set(D.METHODS)
    for m in D.METHODS:
        cov, vnu = res.draws[m]["knn_coverage"], res.draws[m]["vnu_yield"]
        assert cov.shape == (2,) and np.all((cov >= 0) & (cov <= 1))
        assert np.all((vnu >= 0) & (vnu <= 1))
        assert np.all((res.draws[m]["heldout_recall"] >= 0)
                      & (res.draws[m]["heldout_recall"] <= 1))
        assert res.runs[m].samples is None and res.runs[m].valid is None  # decoded instead
    # the held-out recall by hand: share of reference rows within Hamming 19 of a valid
    # sample (on the padded tokens); samples: six reference rows, three of them shifted
    dom, kern = shared[("domain", "proteins")], shared[("kernels", "proteins")]
    x = dom.reference[:6].copy()
    x[3:, :30] = (x[3:, :30] + 1) % 20
    valid = np.array([True, True, False, True, True, True])
    got = kern.metrics(jax.numpy.asarray(dom.feats(x)), valid, np.zeros(6, bool),
                       kern.data_f, kern.ref_f)["heldout_recall"]
    ham = (dom.reference[:, None, :] != x[None, valid, :]).sum(-1)
    want = float(np.mean((ham <= 19).any(axis=1)))
    assert 0 < want < 1 and float(got) == pytest.approx(want, abs=1e-6)
    for seq, ok in zip(res.runs["actflow"].decoded, res.runs["actflow"].decoded_valid,
                       strict=True):
        assert ok == (V.check_soluble(seq) == [])
