"""The bond-aware directed MPNN (chemprop's D-MPNN) of jaxkit.misaligned.dmpnn: its padded
directed-bond graphs, one message step by hand, invariance to atom / bond numbering and to
padding, jit = eager = vmap, a tiny training whose loss falls, and its one-line errors."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkit.io import DataError
from jaxkit.misaligned import features as F
from jaxkit.misaligned import models as Mo
from jaxkit.misaligned.dmpnn import BOND_FEATURES, DMPNN, bond_graphs, dmpnn_inputs
from jaxkit.misaligned.results import ClassGap, ClassResult, MeanCI
from jaxkit.stats import Verdict

pytestmark = pytest.mark.usefixtures("one_blas_thread")  # tests/jaxkit/conftest.py

NA = len(F.ATOM_FEATURES)
NB = len(BOND_FEATURES)


def _one(graphs, i):
    return {k: v[i] for k, v in dmpnn_inputs(graphs).items()}


def _model(steps=2, width=6, aggregation="mean", seed=0):
    return DMPNN(jax.random.key(seed), NA, NB, width, steps, aggregation)


def test_bond_graphs_directed_bonds_reverse_index_and_features():
    g = bond_graphs(["C=CO", "C#N"], max_atoms=4, max_bonds=3)
    assert g["bonds"].shape == (2, 6, NB) and g["src"].shape == (2, 6)
    np.testing.assert_array_equal(g["bond_mask"], [[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]])
    np.testing.assert_array_equal(g["src"][0, :4], [0, 1, 1, 2])
    np.testing.assert_array_equal(g["dst"][0, :4], [1, 0, 2, 1])
    np.testing.assert_array_equal(g["rev"][0], [1, 0, 3, 2, 4, 5])  # padding: itself
    names = dict(zip(BOND_FEATURES, g["bonds"][0, 0], strict=True))
    assert names["type=double"] == 1 and names["type=single"] == 0
    assert names["stereo=none"] == 1 and names["in_ring"] == 0
    assert dict(zip(BOND_FEATURES, g["bonds"][1, 1], strict=True))["type=triple"] == 1
    assert not g["bonds"][0, 4:].any()
    ring = bond_graphs(["c1ccccc1"])
    assert ring["bonds"].shape[1] == 12  # 6 bonds, 12 directed
    ring_row = dict(zip(BOND_FEATURES, ring["bonds"][0, 0], strict=True))
    assert ring_row["type=aromatic"] == ring_row["in_ring"] == ring_row["conjugated"] == 1
    trans = bond_graphs(["C/C=C/C"])["bonds"][0]
    assert dict(zip(BOND_FEATURES, trans[2], strict=True))["stereo=e"] == 1
    # the atoms are featurise()'s, numbered as there
    d = F.featurise(["C=CO", "C#N", "CCO", "CN"], [0, 1, 2, 3], n_bits=16, max_atoms=4)
    np.testing.assert_array_equal(g["atoms"], d.atoms[:2])
    np.testing.assert_array_equal(g["atom_mask"], d.atom_mask[:2])


def test_one_message_step_by_hand_on_a_three_atom_molecule():
    """CCO: directed bonds 0->1, 1->0, 1->2, 2->1; h0, one step and the readout in NumPy
    with explicit neighbour lists (no incidence matrices)."""
    g = bond_graphs(["CCO"])
    model = _model(steps=1, width=5)
    Wi, Wm = np.asarray(model.w_i.weight), np.asarray(model.w_m.weight)
    Wa, ba = np.asarray(model.w_a.weight), np.asarray(model.w_a.bias)
    x, e = g["atoms"][0].astype(float), g["bonds"][0].astype(float)
    relu = lambda v: np.maximum(v, 0.0)  # noqa: E731
    edges = [(0, 1), (1, 0), (1, 2), (2, 1)]  # (v, w): bond b's two directions
    feat = {(0, 1): e[0], (1, 0): e[0], (1, 2): e[2], (2, 1): e[2]}
    h0 = {(v, w): relu(Wi @ np.concatenate([x[v], feat[(v, w)]])) for v, w in edges}
    nbrs = {0: [1], 1: [0, 2], 2: [1]}
    h1 = {}
    for v, w in edges:
        m = sum((h0[(k, v)] for k in nbrs[v] if k != w), np.zeros(5))
        h1[(v, w)] = relu(h0[(v, w)] + Wm @ m)
    assert np.allclose(h1[(0, 1)], h0[(0, 1)])  # atom 0 has no other neighbour
    hv = [relu(Wa @ np.concatenate([x[v], sum(h1[(k, v)] for k in nbrs[v])]) + ba)
          for v in range(3)]
    want = np.mean(hv, axis=0)
    got = np.asarray(model.encode(_one(g, 0)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert float(model(_one(g, 0))) == pytest.approx(float(model.head(jnp.asarray(want))),
                                                     rel=1e-5, abs=1e-6)
    summed = _model(steps=1, width=5, aggregation="sum")
    np.testing.assert_allclose(np.asarray(summed.encode(_one(g, 0))), np.sum(hv, axis=0),
                               rtol=1e-5, atol=1e-6)


def _permuted(g, i, p, q):
    """Molecule ``i`` of ``g`` with atoms renumbered (new atom a is old p[a]) and directed
    bonds reordered (new bond b is old q[b])."""
    pinv, qinv = np.argsort(p), np.argsort(q)
    one = {k: v[i] for k, v in g.items()}
    return {"atoms": one["atoms"][p], "atom_mask": one["atom_mask"][p],
            "bonds": one["bonds"][q], "bond_mask": one["bond_mask"][q],
            "src": pinv[one["src"][q]].astype(np.int32),
            "dst": pinv[one["dst"][q]].astype(np.int32),
            "rev": qinv[one["rev"][q]].astype(np.int32)}


def test_same_output_for_any_numbering_of_atoms_and_bonds():
    g = bond_graphs(["CC(=O)Nc1ccc(O)cc1"], max_atoms=14, max_bonds=14)
    model = _model(steps=3)
    ref = float(model(_one(g, 0)))
    rng = np.random.default_rng(0)
    for _ in range(3):
        p, q = rng.permutation(14), rng.permutation(28)
        got = float(model({k: jnp.asarray(v) for k, v in _permuted(g, 0, p, q).items()}))
        assert got == pytest.approx(ref, rel=1e-5, abs=1e-6)
    # the same molecule written from another atom: RDKit numbers it differently
    other = bond_graphs(["Oc1ccc(NC(C)=O)cc1"], max_atoms=14, max_bonds=14)
    assert not np.array_equal(other["atoms"], g["atoms"])
    assert float(model(_one(other, 0))) == pytest.approx(ref, rel=1e-5, abs=1e-6)


def test_more_padding_gives_the_same_output():
    smiles = ["CCO", "c1ccncc1", "C", "CC(=O)O"]  # methane: no bonds at all
    tight, loose = bond_graphs(smiles), bond_graphs(smiles, max_atoms=15, max_bonds=20)
    assert tight["bonds"].shape[1] == 12 and loose["bonds"].shape[1] == 40
    for agg in ("mean", "sum"):
        model = _model(steps=2, aggregation=agg)
        a = jax.vmap(model)(dmpnn_inputs(tight))
        b = jax.vmap(model)(dmpnn_inputs(loose))
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        assert np.all(np.isfinite(np.asarray(a)))


def test_jit_equals_eager_and_vmap_equals_a_loop():
    g = bond_graphs(["CCO", "c1ccccc1N", "OC(=O)C#N"])
    model = _model(steps=2)
    x = dmpnn_inputs(g)
    eager = [float(model({k: v[i] for k, v in x.items()})) for i in range(3)]
    jitted = jax.jit(jax.vmap(model))(x)
    np.testing.assert_allclose(np.asarray(jitted), eager, rtol=1e-5, atol=1e-6)
    assert len(set(np.round(eager, 6))) == 3  # three molecules, three outputs
    grads = eqx.filter_grad(lambda m: jnp.sum(jax.vmap(m)(x)))(model)
    assert np.all(np.isfinite(np.asarray(grads.w_m.weight)))
    assert np.abs(np.asarray(grads.w_m.weight)).sum() > 0


def test_tiny_training_through_the_one_step_lowers_the_loss():
    smiles = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "c1ccccc1O", "CC(=O)O", "CCN", "CCCCCC",
              "C=CC=C", "CC#N", "OCCO", "c1ccncc1"]
    g = bond_graphs(smiles)
    y = np.array([np.sum(gg[:, 1]) + 2 * np.sum(gg[:, 3]) for gg in g["bonds"]])  # doubles
    train = np.ones((2, len(smiles)), bool)
    train[1, :2] = False
    ts = Mo.TrainSettings(steps=60, log_every=20, checkpoint_every=1, batch_size=8,
                          lr=1e-2, dmpnn_width=16, dmpnn_steps=2)
    pred, hist = Mo.train(jax.random.key(0), "dmpnn", g, y, train, ts)
    assert pred.shape == (2, len(smiles)) and np.all(np.isfinite(pred))
    assert [h["step"] for h in hist] == [1, 2, 3]
    assert hist[-1]["loss"] < 0.5 * hist[0]["loss"]
    assert np.sqrt(np.mean((pred[0] - y) ** 2)) < np.std(y)


def test_errors_name_the_argument():
    with pytest.raises(DataError, match="`max_bonds`=1: 1 molecules have more bonds, first "
                                        "at row 1"):
        bond_graphs(["CC", "CCO"], max_bonds=1)
    with pytest.raises(DataError, match="`max_atoms`=2"):
        bond_graphs(["CC", "CCO"], max_atoms=2)
    with pytest.raises(DataError, match="row 1 \\('C1CC'\\)"):
        bond_graphs(["CC", "C1CC"])
    with pytest.raises(ValueError, match="`aggregation` must be 'mean' or 'sum'"):
        DMPNN(jax.random.key(0), NA, NB, aggregation="max")
    with pytest.raises(ValueError, match="`graphs` lacks \\['bonds'"):
        dmpnn_inputs({"atoms": 0, "atom_mask": 0})
    with pytest.raises(ValueError, match="`graphs` lacks"):
        Mo.train(jax.random.key(0), "dmpnn", {"fp": np.zeros((4, 8))}, np.arange(4.0),
                 np.ones((2, 4), bool), Mo.TrainSettings(steps=10, log_every=10))


def test_model_arrays_pad_the_bond_graphs_like_the_data_set():
    d = F.featurise(["CCO", "c1ccccc1", "CC#N", "OCCO"], [0, 1, 2, 3], n_bits=16, max_atoms=9)
    g = Mo.model_arrays("dmpnn", d)
    np.testing.assert_array_equal(g["atoms"], d.atoms)
    np.testing.assert_array_equal(g["atom_mask"], d.atom_mask)
    assert g["bonds"].shape == (4, 12, NB)  # benzene's 6 bonds
    assert set(Mo.model_arrays("mpnn", d)) == {"fp", "atoms", "adj", "atom_mask"}


def test_classes_markdown_gives_every_models_gap():
    from jaxkit.misaligned import report

    summ = MeanCI(mean=0.8, ci95=0.1, seeds=[0.7, 0.9])
    gap = ClassGap(best="size_only", per_seed=[0.1, 0.2], selected_on="validation",
                   test=Verdict("not shown", 0.15, -0.1, 0.3, 2, "paired t"))
    one = ClassResult(metrics={m: {"auroc": summ, "accuracy": summ} for m in ("mlp", "dmpnn")},
                      gaps={"mlp": gap, "dmpnn": gap}, positive_rate=0.4)
    assert one.as_dict()["gaps"]["mlp"]["test"]["verdict"] == "not shown"
    md = report.classes_markdown({"random": one, "scaffold": one})
    rows = [ln for ln in md.splitlines() if ln.startswith("| D-MPNN")]
    assert len(rows) == 3  # the metrics row and one gap row per split
    assert "| D-MPNN (bond-aware, directed) | scaffold | size only" in md
    assert "MPNN (graph)" not in md  # not run: no row


def test_dmpnn_training_killed_and_resumed_ends_with_the_same_parameters(tmp_path):
    g = bond_graphs(["CCO", "CCCO", "c1ccccc1", "CC(=O)O", "CCN", "C=CC=C"])
    y = np.arange(6.0)
    train = np.ones((2, 6), bool)
    train[0, :2] = False
    ts = Mo.TrainSettings(steps=20, log_every=10, checkpoint_every=1, batch_size=4,
                          dmpnn_width=8, dmpnn_steps=1)
    key = jax.random.key(3)
    full, full_hist = Mo.train(key, "dmpnn", g, y, train, ts)
    ck = tmp_path / "ck"
    Mo.train(key, "dmpnn", g, y, train, ts._replace(steps=10), checkpoint_dir=ck)  # "killed"
    resumed, hist = Mo.train(key, "dmpnn", g, y, train, ts, checkpoint_dir=ck)
    assert [h["step"] for h in hist] == [1, 2]
    for a, b in zip(hist, full_hist, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6)
    np.testing.assert_allclose(resumed, full, rtol=1e-6, atol=1e-6)


def test_users_audit_can_train_the_dmpnn():
    """``jaxkit misaligned ... --model dmpnn``: the user path trains the bond-aware model
    on the training rows and predicts the test rows (finite, one per test molecule)."""
    from jaxkit.misaligned.features import featurise
    from jaxkit.misaligned.userdata import model_fit_predict

    smiles = ["CCO", "CCN", "CCC", "c1ccccc1", "CC(=O)O", "CCCl", "OCCO", "CNC"]
    data = featurise(smiles, np.arange(8.0), n_bits=64)
    fp = model_fit_predict("dmpnn", Mo.TrainSettings(steps=10, log_every=10, batch_size=4))
    pred = fp(data, np.arange(6), np.array([6, 7]))
    assert pred.shape == (2,) and np.all(np.isfinite(pred))
