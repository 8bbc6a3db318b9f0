"""Molecules to arrays with RDKit: descriptors, Morgan fingerprints, padded graphs, splits.

:func:`featurise` parses SMILES (unparseable ones are an error listing their row
numbers, or are skipped and counted with ``skip_invalid=True``) and returns a
:class:`MolDataset`:

* ``desc``: RDKit ``Descriptors.MolWt``, ``HeavyAtomCount``, ``TPSA`` and ``MolLogP``
  (Wildman & Crippen 1999) -- the reductionist signals of the size-only and
  descriptor-only baselines;
* ``fp``: Morgan / ECFP bit fingerprints (Rogers & Hahn 2010; radius 2 = ECFP4),
  ``rdFingerprintGenerator.GetMorganGenerator``;
* ``atoms`` / ``adj`` / ``atom_mask``: the molecular graph padded to ``max_atoms`` heavy
  atoms (one-hot element, degree, formal charge, total H count, aromaticity, ring
  membership: :data:`ATOM_FEATURES` columns) with a symmetric 0/1 bond adjacency, so a
  batch of molecules has one fixed shape;
* ``scaffold``: the Bemis-Murcko scaffold SMILES (Bemis & Murcko 1996; ``""`` for an
  acyclic molecule).

Splits (:func:`random_split`, :func:`scaffold_split`) are boolean ``(seeds, n)`` train
and test masks (:class:`Splits`). The scaffold split puts whole scaffold groups on one
side: groups larger than half the test size go to train, the rest in a seeded random
order fill the test set up to ``test_fraction`` (the "balanced scaffold split" of
chemprop; acyclic molecules share the ``""`` group). :func:`add_carbon` is the carbon
insertion of Renz et al.'s AddCarbon (Drug Discov. Today: Technol. 32:55 (2019)): a ``C``
inserted at a random position of the SMILES, kept when the result parses to a different
molecule; the family applies it to test inputs (``carbon_inserted``), the generative
baseline of that name to training molecules (:mod:`jaxkit.misaligned.addcarbon`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from jaxkit.io import DataError

__all__ = ["ATOM_FEATURES", "DESCRIPTORS", "MolDataset", "Splits", "featurise", "atom_row",
           "fingerprints", "random_split", "scaffold_split", "make_splits",
           "validation_splits", "add_carbon", "duplicates_across", "check_splits"]

DESCRIPTORS = ("MolWt", "HeavyAtomCount", "TPSA", "MolLogP")
_ELEMENTS = ("C", "N", "O", "S", "F", "Cl", "Br", "I", "P")
ATOM_FEATURES = (*(f"element={e}" for e in _ELEMENTS), "element=other",
                 *(f"degree={d}" for d in range(5)), "degree>=5",
                 "charge<0", "charge=0", "charge>0",
                 *(f"H={h}" for h in range(3)), "H>=3", "aromatic", "in_ring")


@dataclass(frozen=True)
class MolDataset:
    """Featurised molecules (module docstring); row ``i`` of every array is
    ``smiles[i]``, which came from row ``rows[i]`` (0-based) of the input."""

    name: str
    smiles: tuple[str, ...]
    canonical: tuple[str, ...]
    y: np.ndarray  # (n,) float64 labels
    desc: np.ndarray  # (n, 4) float64, DESCRIPTORS
    fp: np.ndarray  # (n, n_bits) uint8
    atoms: np.ndarray  # (n, max_atoms, len(ATOM_FEATURES)) float32
    adj: np.ndarray  # (n, max_atoms, max_atoms) float32
    atom_mask: np.ndarray  # (n, max_atoms) bool
    scaffold: tuple[str, ...]
    rows: np.ndarray  # (n,) int, row of each molecule in the input
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.smiles)

    def subset(self, idx) -> MolDataset:
        """The molecules ``idx`` (an index array), in that order."""
        idx = np.asarray(idx)
        t = lambda s: tuple(s[i] for i in idx)  # noqa: E731
        return replace(self, smiles=t(self.smiles), canonical=t(self.canonical),
                       y=self.y[idx], desc=self.desc[idx], fp=self.fp[idx],
                       atoms=self.atoms[idx], adj=self.adj[idx],
                       atom_mask=self.atom_mask[idx], scaffold=t(self.scaffold),
                       rows=self.rows[idx])


@dataclass(frozen=True)
class Splits:
    """``train`` / ``test`` boolean masks of shape ``(seeds, n)``; ``kind`` names the
    split ("random", "scaffold" or "user")."""

    kind: str
    train: np.ndarray
    test: np.ndarray

    @property
    def seeds(self) -> int:
        return self.train.shape[0]


def atom_row(atom) -> list[float]:
    """An RDKit atom as its feature row: one-hot element, degree, formal-charge sign and
    hydrogen count, aromatic and in-ring flags (``ATOM_FEATURES`` columns)."""
    sym = atom.GetSymbol()
    el = [float(sym == e) for e in _ELEMENTS] + [float(sym not in _ELEMENTS)]
    d = atom.GetDegree()
    deg = [float(d == k) for k in range(5)] + [float(d >= 5)]
    q = atom.GetFormalCharge()
    h = atom.GetTotalNumHs()
    hs = [float(h == k) for k in range(3)] + [float(h >= 3)]
    return (el + deg + [float(q < 0), float(q == 0), float(q > 0)] + hs
            + [float(atom.GetIsAromatic()), float(atom.IsInRing())])


def _parse(smiles: Sequence[str], skip_invalid: bool):
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        mols = [Chem.MolFromSmiles(s) if isinstance(s, str) and s.strip() else None
                for s in smiles]
    finally:
        RDLogger.EnableLog("rdApp.*")
    bad = [i for i, m in enumerate(mols) if m is None]
    if bad and not skip_invalid:
        shown = ", ".join(f"row {i} ({smiles[i]!r})" for i in bad[:10])
        more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        raise DataError(f"{len(bad)} SMILES could not be parsed by RDKit: {shown}{more} "
                        f"(rows count from 0 at the first data row: line row + 2 of a CSV with a "
                        f"header; pass skip_invalid=True / --skip-invalid to drop them)")
    return mols, bad


def fingerprints(mols, n_bits: int = 2048, radius: int = 2) -> np.ndarray:
    """Morgan bit fingerprints ``(len(mols), n_bits)`` uint8 of RDKit molecules."""
    from rdkit.Chem import rdFingerprintGenerator

    gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    if not mols:
        return np.zeros((0, n_bits), np.uint8)
    return np.stack([gen.GetFingerprintAsNumPy(m) for m in mols]).astype(np.uint8)


def featurise(smiles: Sequence[str], labels, *, name: str = "data", n_bits: int = 2048,
              radius: int = 2, max_atoms: int | None = None, skip_invalid: bool = False,
              info: dict | None = None) -> MolDataset:
    """Parse and featurise molecules (module docstring).

    Args:
        smiles: one SMILES per molecule.
        labels: one finite number per molecule.
        name: the data set's name (reports).
        n_bits: fingerprint length.
        radius: Morgan radius (2 = ECFP4).
        max_atoms: graph padding; ``None``: the largest molecule. A molecule with more
            heavy atoms is an error naming its row (or skipped with ``skip_invalid``).
        skip_invalid: drop unparseable SMILES (and too-large molecules), recording their
            rows in ``info["skipped_rows"]``, instead of raising.
        info: extra metadata kept in :attr:`MolDataset.info`.

    Returns:
        A :class:`MolDataset`.

    Raises:
        DataError: unparseable SMILES (with their row numbers), labels that are not
            finite numbers, fewer than 4 molecules, or molecules over ``max_atoms``.
    """
    from rdkit import Chem
    from rdkit.Chem import Descriptors
    from rdkit.Chem.Scaffolds import MurckoScaffold

    smiles = list(smiles)
    try:
        y = np.asarray(labels, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise DataError("`labels` must be numbers (one per molecule); got non-numeric "
                        "values") from None
    if y.shape[0] != len(smiles):
        raise DataError(f"`labels` has {y.shape[0]} values for {len(smiles)} SMILES")
    bad_y = np.flatnonzero(~np.isfinite(y))
    if bad_y.size:
        raise DataError(f"`labels` has {bad_y.size} NaN or inf values, first at rows "
                        f"{bad_y[:10].tolist()}")
    mols, bad = _parse(smiles, skip_invalid)
    sizes = [m.GetNumHeavyAtoms() if m is not None else 0 for m in mols]
    if max_atoms is not None:
        big = [i for i, s in enumerate(sizes) if s > max_atoms]
        if big and not skip_invalid:
            raise DataError(f"{len(big)} molecules have more than max_atoms={max_atoms} "
                            f"heavy atoms, first at rows {big[:10]}")
        bad = sorted(set(bad) | set(big))
    keep = [i for i in range(len(smiles)) if i not in set(bad)]
    if len(keep) < 4:
        raise DataError(f"need at least 4 valid molecules; got {len(keep)}")
    mols = [mols[i] for i in keep]
    pad = max_atoms if max_atoms is not None else max(sizes[i] for i in keep)
    nf = len(ATOM_FEATURES)
    atoms = np.zeros((len(mols), pad, nf), np.float32)
    adj = np.zeros((len(mols), pad, pad), np.float32)
    mask = np.zeros((len(mols), pad), bool)
    desc = np.zeros((len(mols), len(DESCRIPTORS)))
    scaffolds = []
    for k, m in enumerate(mols):
        for a in m.GetAtoms():
            atoms[k, a.GetIdx()] = atom_row(a)
        mask[k, :m.GetNumAtoms()] = True
        for b in m.GetBonds():
            i, j = b.GetBeginAtomIdx(), b.GetEndAtomIdx()
            adj[k, i, j] = adj[k, j, i] = 1.0
        desc[k] = [Descriptors.MolWt(m), m.GetNumHeavyAtoms(), Descriptors.TPSA(m),
                   Descriptors.MolLogP(m)]
        scaffolds.append(MurckoScaffold.MurckoScaffoldSmiles(mol=m))
    meta = dict(info or {}, skipped_rows=list(bad), n_bits=n_bits, radius=radius)
    return MolDataset(name=name, smiles=tuple(smiles[i] for i in keep),
                      canonical=tuple(Chem.MolToSmiles(m) for m in mols), y=y[keep],
                      desc=desc, fp=fingerprints(mols, n_bits, radius), atoms=atoms, adj=adj,
                      atom_mask=mask, scaffold=tuple(scaffolds), rows=np.asarray(keep),
                      info=meta)


def _check_fraction(test_fraction: float) -> None:
    if not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"`test_fraction` must be in (0, 1); got {test_fraction}")


def random_split(rng: np.random.Generator, n: int, seeds: int, test_fraction: float = 0.2
                 ) -> Splits:
    """``seeds`` independent random splits of ``n`` molecules, ``round(test_fraction
    n)`` (at least 1) in each test set."""
    _check_fraction(test_fraction)
    n_test = min(max(1, round(test_fraction * n)), n - 1)
    test = np.zeros((seeds, n), bool)
    for s in range(seeds):
        test[s, rng.permutation(n)[:n_test]] = True
    return Splits("random", ~test, test)


def scaffold_split(rng: np.random.Generator, scaffolds: Sequence[str], seeds: int,
                   test_fraction: float = 0.2) -> Splits:
    """``seeds`` balanced scaffold splits (module docstring): no scaffold on both sides."""
    _check_fraction(test_fraction)
    n = len(scaffolds)
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(scaffolds):
        groups.setdefault(s, []).append(i)
    n_test = max(1, round(test_fraction * n))
    if len(groups) < 2:
        raise ValueError("a scaffold split needs at least 2 distinct scaffolds; all "
                         f"{n} molecules share one")
    sets = list(groups.values())
    test = np.zeros((seeds, n), bool)
    for s in range(seeds):
        big = [g for g in sets if len(g) > n_test / 2]
        small = [g for g in sets if len(g) <= n_test / 2]
        order = [small[i] for i in rng.permutation(len(small))]
        count = 0
        for g in order:
            if count + len(g) <= n_test or count == 0:
                test[s, g] = True
                count += len(g)
            if count >= n_test:
                break
        if count == 0:  # every group is big: the smallest one is the test set
            test[s, min(big, key=len)] = True
    return Splits("scaffold", ~test, test)


def make_splits(data: MolDataset, kind: str, rng: np.random.Generator, seeds: int,
                test_fraction: float = 0.2) -> Splits:
    """:func:`random_split` or :func:`scaffold_split` of ``data`` (``kind``)."""
    if kind == "random":
        return random_split(rng, data.n, seeds, test_fraction)
    if kind == "scaffold":
        return scaffold_split(rng, data.scaffold, seeds, test_fraction)
    raise ValueError(f"`kind` must be 'random' or 'scaffold'; got {kind!r}")


def validation_splits(data: MolDataset, splits: Splits, rng: np.random.Generator,
                      fraction: float = 0.2) -> Splits:
    """Inner splits of each training set, to choose among baselines without the test set.

    For seed ``s`` the training molecules ``splits.train[s]`` are split again as the
    outer split was made (``scaffold``: :func:`scaffold_split` of their scaffolds, so no
    scaffold is on both sides; otherwise :func:`random_split`), ``fraction`` of them in
    the validation set. The returned masks have ``splits``' shape: ``train`` the inner
    training set, ``test`` the validation set (both inside ``splits.train[s]``; the
    outer test molecules are in neither).

    Raises:
        ValueError: a training set of fewer than 2 molecules, or ``fraction`` outside
            ``(0, 1)``.
    """
    _check_fraction(fraction)
    train = np.asarray(splits.train, bool)
    inner = np.zeros_like(train)
    val = np.zeros_like(train)
    for s in range(train.shape[0]):
        idx = np.flatnonzero(train[s])
        if idx.size < 2:
            raise ValueError(f"`splits`: seed {s} has {idx.size} training molecule(s); a "
                             "validation split needs at least 2")
        if splits.kind == "scaffold" and len({data.scaffold[i] for i in idx}) >= 2:
            sub = scaffold_split(rng, [data.scaffold[i] for i in idx], 1, fraction)
        else:
            sub = random_split(rng, idx.size, 1, fraction)
        inner[s, idx] = sub.train[0]
        val[s, idx] = sub.test[0]
    return Splits(f"{splits.kind}-validation", inner, val)


def duplicates_across(canonical: Sequence[str], train: np.ndarray, test: np.ndarray) -> int:
    """The number of test molecules whose canonical SMILES also occurs in the training
    set of the same split (one seed's masks)."""
    seen = {canonical[i] for i in np.flatnonzero(train)}
    return int(sum(canonical[i] in seen for i in np.flatnonzero(test)))


def check_splits(data: MolDataset, splits: Splits, *, warn: bool = True) -> list[int]:
    """Validate ``splits`` against ``data``: masks of shape ``(seeds, n)``, disjoint,
    every train and test set non-empty (an error naming the seed otherwise). Returns
    the number of train/test duplicate molecules per seed, with a warning when any."""
    train, test = np.asarray(splits.train, bool), np.asarray(splits.test, bool)
    if train.ndim != 2 or train.shape != test.shape or train.shape[1] != data.n:
        raise ValueError(f"`splits` masks must both have shape (seeds, {data.n}); got "
                         f"{train.shape} and {test.shape}")
    for s in range(train.shape[0]):
        if not train[s].any():
            raise ValueError(f"`splits`: seed {s} leaves the training set empty")
        if not test[s].any():
            raise ValueError(f"`splits`: seed {s} leaves the test set empty")
        if (train[s] & test[s]).any():
            raise ValueError(f"`splits`: seed {s} puts molecules in both train and test "
                             f"(rows {np.flatnonzero(train[s] & test[s])[:5].tolist()})")
    dups = [duplicates_across(data.canonical, train[s], test[s]) for s in range(len(train))]
    if warn and any(dups):
        warnings.warn(f"{data.name} ({splits.kind} split): {sum(dups)} test molecules over "
                      f"{len(dups)} seeds duplicate a training molecule (same canonical "
                      f"SMILES); per seed {dups}", stacklevel=2)
    return dups


def add_carbon(smiles: str, rng: np.random.Generator, n_carbons: int = 1,
               tries: int = 50) -> str | None:
    """Carbon insertion (module docstring): ``n_carbons`` successive insertions of ``C`` at
    random positions of the SMILES, each kept only when the result parses and differs
    from its input. Returns the canonical SMILES, or None when an insertion failed
    ``tries`` times."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        cur = Chem.MolToSmiles(Chem.MolFromSmiles(smiles))
        for _ in range(n_carbons):
            for _ in range(tries):
                pos = int(rng.integers(0, len(cur) + 1))
                m = Chem.MolFromSmiles(cur[:pos] + "C" + cur[pos:])
                if m is not None:
                    new = Chem.MolToSmiles(m)
                    if new != cur:
                        cur = new
                        break
            else:
                return None
        return cur
    finally:
        RDLogger.EnableLog("rdApp.*")
