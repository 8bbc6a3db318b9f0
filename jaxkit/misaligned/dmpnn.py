"""A bond-aware directed message-passing network (D-MPNN) and its padded bond graphs.

The design of chemprop (Yang et al., "Analyzing Learned Molecular Representations for
Property Prediction", J. Chem. Inf. Model. 59:3370 (2019)): hidden states live on
*directed* bonds, so a message never returns along the bond it came from.

For a molecule with atom features :math:`x_v` (the existing
:data:`jaxkit.misaligned.features.ATOM_FEATURES`) and bond features :math:`e_{vw}`
(:data:`BOND_FEATURES`: bond type, conjugated, in ring, stereo), every bond gives two
directed bonds :math:`v \\to w` and :math:`w \\to v`, and

* :math:`h^0_{vw} = \\mathrm{ReLU}(W_i [x_v ; e_{vw}])`;
* ``steps`` (:math:`T`) rounds of
  :math:`m_{vw} = \\sum_{k \\in N(v) \\setminus w} h_{kv} = \\sum_{k \\in N(v)} h_{kv} -
  h_{wv}` (everything arriving at :math:`v` minus the reverse bond) and
  :math:`h_{vw} = \\mathrm{ReLU}(h^0_{vw} + W_m m_{vw})`;
* atom readout :math:`h_v = \\mathrm{ReLU}(W_a [x_v ; \\sum_{k \\in N(v)} h_{kv}])`;
* molecule :math:`h = \\mathrm{mean}_v h_v` (chemprop's default) or :math:`\\sum_v h_v`
  over the real atoms, then a feed-forward head to a scalar.

:math:`W_i`, :math:`W_m` carry no bias (as in chemprop); :math:`W_a` and the head do.
Arrays have fixed shapes with masks: ``max_atoms`` atoms and ``2 max_bonds`` directed
bonds per molecule, where directed bond ``2 b`` runs begin -> end of RDKit bond ``b``
and ``2 b + 1`` end -> begin (``rev`` holds each one's reverse; padded bonds point at
atom 0, are their own reverse and are masked out, as are padded atoms). The forward
pass is a pure function of these arrays: the sums over incoming bonds are products with
the masked one-hot incidence matrix, so it works under ``jit``, ``vmap`` and ``grad``,
and padding adds exact zeros (tested: more padding gives the same output, and so does
any renumbering of atoms and bonds).
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxkit.io import DataError

__all__ = ["BOND_FEATURES", "bond_graphs", "DMPNN", "dmpnn_inputs"]

_BOND_TYPES = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")
_STEREO = ("STEREONONE", "STEREOANY", "STEREOZ", "STEREOE", "STEREOCIS", "STEREOTRANS")
BOND_FEATURES = (*(f"type={t.lower()}" for t in _BOND_TYPES), "type=other", "conjugated",
                 "in_ring", *(f"stereo={s[6:].lower()}" for s in _STEREO))
_GRAPH_KEYS = ("atoms", "atom_mask", "bonds", "src", "dst", "rev", "bond_mask")


def _bond_row(bond) -> list[float]:
    t = str(bond.GetBondType())
    st = str(bond.GetStereo())
    return ([float(t == b) for b in _BOND_TYPES] + [float(t not in _BOND_TYPES)]
            + [float(bond.GetIsConjugated()), float(bond.IsInRing())]
            + [float(st == s) for s in _STEREO])


def bond_graphs(smiles: Sequence[str], max_atoms: int | None = None,
                max_bonds: int | None = None) -> dict[str, np.ndarray]:
    """Padded directed-bond graphs of molecules (module docstring), heavy atoms only.

    The atom numbering is RDKit's for each SMILES, the numbering
    :func:`jaxkit.misaligned.features.featurise` uses, so ``atoms`` and ``atom_mask``
    equal a :class:`~jaxkit.misaligned.features.MolDataset`'s for the same SMILES and
    ``max_atoms``.

    Args:
        smiles: one SMILES per molecule (each must parse).
        max_atoms: atom padding; ``None``: the largest molecule's heavy atoms.
        max_bonds: bond padding (``2 max_bonds`` directed bonds); ``None``: the most
            bonds of any molecule (at least 1).

    Returns:
        ``atoms (n, A, len(ATOM_FEATURES))`` float32, ``atom_mask (n, A)`` bool,
        ``bonds (n, 2B, len(BOND_FEATURES))`` float32, ``src`` / ``dst`` / ``rev``
        ``(n, 2B)`` int32 (source atom, target atom, reverse directed bond) and
        ``bond_mask (n, 2B)`` bool.

    Raises:
        DataError: an unparseable SMILES, or a molecule over ``max_atoms`` /
            ``max_bonds`` (naming its row).
    """
    from rdkit import Chem, RDLogger

    from .features import ATOM_FEATURES, atom_row

    smiles = list(smiles)
    RDLogger.DisableLog("rdApp.*")
    try:
        mols = [Chem.MolFromSmiles(s) if isinstance(s, str) else None for s in smiles]
    finally:
        RDLogger.EnableLog("rdApp.*")
    bad = [i for i, m in enumerate(mols) if m is None]
    if bad:
        raise DataError(f"`smiles`: {len(bad)} could not be parsed, first at row {bad[0]} "
                        f"({smiles[bad[0]]!r})")
    n_at = [m.GetNumAtoms() for m in mols]
    n_bd = [m.GetNumBonds() for m in mols]
    A = max(n_at, default=1) if max_atoms is None else int(max_atoms)
    B = max([1, *n_bd]) if max_bonds is None else int(max_bonds)
    for name, sizes, cap in (("max_atoms", n_at, A), ("max_bonds", n_bd, B)):
        over = [i for i, s in enumerate(sizes) if s > cap]
        if cap < 1 or over:
            raise DataError(f"`{name}`={cap}: {len(over)} molecules have more "
                            f"{name[4:]}, first at row {over[0] if over else '-'}")
    n = len(mols)
    atoms = np.zeros((n, A, len(ATOM_FEATURES)), np.float32)
    atom_mask = np.zeros((n, A), bool)
    bonds = np.zeros((n, 2 * B, len(BOND_FEATURES)), np.float32)
    src = np.zeros((n, 2 * B), np.int32)
    dst = np.zeros((n, 2 * B), np.int32)
    rev = np.tile(np.arange(2 * B, dtype=np.int32), (n, 1))
    bond_mask = np.zeros((n, 2 * B), bool)
    for k, m in enumerate(mols):
        for a in m.GetAtoms():
            atoms[k, a.GetIdx()] = atom_row(a)
        atom_mask[k, :m.GetNumAtoms()] = True
        for b in m.GetBonds():
            i, j, e = b.GetBeginAtomIdx(), b.GetEndAtomIdx(), 2 * b.GetIdx()
            bonds[k, e] = bonds[k, e + 1] = _bond_row(b)
            src[k, e], dst[k, e], src[k, e + 1], dst[k, e + 1] = i, j, j, i
            rev[k, e], rev[k, e + 1] = e + 1, e
            bond_mask[k, e:e + 2] = True
    return dict(atoms=atoms, atom_mask=atom_mask, bonds=bonds, src=src, dst=dst, rev=rev,
                bond_mask=bond_mask)


def dmpnn_inputs(graphs: dict) -> dict:
    """The arrays :class:`DMPNN` reads, as JAX arrays, from :func:`bond_graphs`' output
    (or any dict holding its keys; missing keys are an error naming them)."""
    missing = [k for k in _GRAPH_KEYS if k not in graphs]
    if missing:
        raise ValueError(f"`graphs` lacks {missing}; build them with bond_graphs()")
    return {"atoms": jnp.asarray(graphs["atoms"], jnp.float32),
            "atom_mask": jnp.asarray(graphs["atom_mask"], bool),
            "bonds": jnp.asarray(graphs["bonds"], jnp.float32),
            **{k: jnp.asarray(graphs[k], jnp.int32) for k in ("src", "dst", "rev")},
            "bond_mask": jnp.asarray(graphs["bond_mask"], bool)}


class DMPNN(eqx.Module):
    """The D-MPNN of the module docstring: one molecule's padded arrays -> scalar.

    Args:
        key: initialisation key.
        n_atom: atom feature count (``len(ATOM_FEATURES)``).
        n_bond: bond feature count (``len(BOND_FEATURES)``).
        width: hidden size of bonds, atoms and the head.
        steps: message-passing rounds :math:`T` (``>= 0``).
        aggregation: ``"mean"`` or ``"sum"`` over the real atoms.
    """

    w_i: eqx.nn.Linear
    w_m: eqx.nn.Linear
    w_a: eqx.nn.Linear
    head: eqx.nn.MLP
    steps: int = eqx.field(static=True)
    aggregation: str = eqx.field(static=True)

    def __init__(self, key, n_atom: int, n_bond: int, width: int = 64, steps: int = 3,
                 aggregation: str = "mean"):
        if aggregation not in ("mean", "sum"):
            raise ValueError(f"`aggregation` must be 'mean' or 'sum'; got {aggregation!r}")
        if steps < 0:
            raise ValueError(f"`steps` must be >= 0; got {steps}")
        k = jax.random.split(key, 4)
        self.w_i = eqx.nn.Linear(n_atom + n_bond, width, use_bias=False, key=k[0])
        self.w_m = eqx.nn.Linear(width, width, use_bias=False, key=k[1])
        self.w_a = eqx.nn.Linear(n_atom + width, width, key=k[2])
        self.head = eqx.nn.MLP(width, "scalar", width, 1, activation=jax.nn.relu, key=k[3])
        self.steps, self.aggregation = int(steps), aggregation

    def encode(self, mol: dict) -> jax.Array:
        """The molecule vector ``(width,)`` before the head."""
        x, am = mol["atoms"], mol["atom_mask"].astype(jnp.float32)
        bm = mol["bond_mask"].astype(jnp.float32)[:, None]
        # incoming incidence: inc[v, e] = 1 when directed bond e ends at atom v (real ones)
        inc = jax.nn.one_hot(mol["dst"], x.shape[0], dtype=jnp.float32).T * bm[:, 0]
        h0 = jax.nn.relu(jax.vmap(self.w_i)(jnp.concatenate([x[mol["src"]], mol["bonds"]],
                                                           axis=1))) * bm
        h = h0
        for _ in range(self.steps):
            m = (inc @ h)[mol["src"]] - h[mol["rev"]]
            h = jax.nn.relu(h0 + jax.vmap(self.w_m)(m)) * bm
        hv = jax.nn.relu(jax.vmap(self.w_a)(jnp.concatenate([x, inc @ h], axis=1)))
        total = am @ hv
        return total / jnp.maximum(jnp.sum(am), 1.0) if self.aggregation == "mean" else total

    def __call__(self, mol: dict) -> jax.Array:
        return self.head(self.encode(mol))
