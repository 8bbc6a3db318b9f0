"""Renz et al.'s generative AddCarbon baseline and the distribution-learning scores."""

import numpy as np
import pytest

from jaxkit.misaligned import addcarbon as G
from jaxkit.misaligned.results import GenerativeComparison
from tests.jaxkit.misaligned_fakes import fake_split, mean_ci

TRAIN = ["CCO", "c1ccccc1O", "CC(=O)O", "C1CCNCC1", "CCN", "c1ccncc1", "OCCO", "CC(C)O"]


def _count(smiles: str):
    from rdkit import Chem

    m = Chem.MolFromSmiles(smiles)
    return m.GetNumHeavyAtoms(), sum(a.GetSymbol() == "C" for a in m.GetAtoms())


def test_addcarbon_samples_are_a_training_molecule_plus_one_carbon():
    """Every sample is novel (not a training molecule) and has one heavy atom, a carbon,
    more than some training molecule: copying with a minimal change."""
    gen = G.generate(TRAIN, 30, np.random.default_rng(0))
    assert len(gen) == 30
    counts = {_count(s) for s in TRAIN}
    from rdkit import Chem

    can = {Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in TRAIN}
    for s in gen:
        assert s not in can
        h, c = _count(s)
        assert (h - 1, c - 1) in counts, s
    assert G.generate(TRAIN, 30, np.random.default_rng(0)) == gen  # seeded


def test_generative_scores_on_known_cases():
    """Copies of the training set: validity 1, novelty 0, KL score 1, NN similarity 1;
    duplicates lower uniqueness; an unparseable string lowers validity."""
    s = G.generative_scores(TRAIN, TRAIN, n_bits=256)
    assert s.validity == 1 and s.uniqueness == 1 and s.novelty == 0
    assert s.kl_score == pytest.approx(1.0)
    assert s.nn_similarity == pytest.approx(1.0)
    s = G.generative_scores(["CCCO", "CCCO", "not a smiles", "CCO"], TRAIN, n_bits=256)
    assert s.validity == pytest.approx(0.75)
    assert s.uniqueness == pytest.approx(2 / 3)
    assert s.novelty == pytest.approx(0.5)  # CCCO new, CCO a training molecule
    assert 0 < s.nn_similarity <= 1
    gen = G.generate(TRAIN, 20, np.random.default_rng(1))
    s = G.generative_scores(gen, TRAIN, n_bits=256)
    assert s.validity == 1 and s.novelty == 1


def test_kl_score_and_errors():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(500, 2))
    assert G.kl_score(a, a) == pytest.approx(1.0)
    assert G.kl_score(a, a + 3.0) < 0.2  # shifted far: low score
    with pytest.raises(ValueError, match="`n`"):
        G.generate(TRAIN, 0, rng)
    with pytest.raises(ValueError, match="train_smiles"):
        G.generate(["not a smiles"], 3, rng)
    with pytest.raises(ValueError, match="generated"):
        G.generative_scores([], TRAIN)


def test_report_sections_generative_and_physics():
    """The report's generative AddCarbon table (beside held-out molecules) and the
    physics-aligned table (descriptor ridge with and without logP, logP alone)."""
    from jaxkit.misaligned import report

    gen = G.generate(TRAIN, 10, np.random.default_rng(2))
    g = {"toy": GenerativeComparison(
        addcarbon=G.generative_scores(gen, TRAIN, n_bits=64),
        held_out=G.generative_scores(["CCCO", "CCCN"], TRAIN, n_bits=64))}
    md = report.generative_markdown(g)
    plain = g["toy"].as_dict()["held_out"]  # what metrics.json records
    assert plain["n"] == 2
    assert plain["nn_similarity_ge_0.7"] == g["toy"].held_out.nn_similarity_ge_07
    assert list(plain) == ["n", "validity", "uniqueness", "novelty", "kl_score", "nn_similarity",
                           "nn_similarity_ge_0.7"]
    assert "| toy | AddCarbon (generative baseline) | 10 | 1.000 |" in md
    assert "| toy | held-out real molecules | 2 | 1.000 | 1.000 | 1.000 |" in md
    assert report.generative_markdown({}) == ""
    res = {("toy", "random"): fake_split({m: {"rmse": mean_ci(v)} for m, v in
                                          (("descriptors", 0.9), ("descriptors_no_logp", 1.2),
                                           ("logp_only", 1.1), ("mlp", 1.0))})}
    rows = report.physics_rows(res)
    assert len(rows) == 1 and len(rows[0]) == 5 + len(report.MODELS)
    assert rows[0][:5] == ["toy", "random", "0.900 ± 0.100", "1.200 ± 0.100", "1.100 ± 0.100"]
    assert rows[0][5 + report.MODELS.index("mlp")] == "1.000 ± 0.100"
    assert rows[0].count("-") == len(report.MODELS) - 1  # models without results
